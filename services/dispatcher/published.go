package dispatcher

import (
	"sync"

	"github.com/google/uuid"
)

// publishedCap bounds each generation of Published: entries the relay
// never takes (it runs in another replica, or the run's notification was
// lost) are forgotten after two generations.
const publishedCap = 1 << 16

// Published remembers the run ends a dispatcher announced itself, right
// after its commit, so that the relay of the same process — publishing on
// the same NATS connection, hence with the same fate — does not announce
// them a second time when their notification comes back from Postgres.
// The relay of another replica, or one in a process whose dispatcher did
// not announce the end (the reaper's deadlines, a cancellation, a parent's
// close), announces as before. A nil *Published remembers nothing.
type Published struct {
	mu        sync.Mutex
	cur, prev map[publishedKey]struct{}
}

type publishedKey struct {
	run    uuid.UUID
	status string
}

// NewPublished returns an empty Published to share between a process's
// dispatcher and relay.
func NewPublished() *Published {
	return &Published{cur: map[publishedKey]struct{}{}, prev: map[publishedKey]struct{}{}}
}

// add records that run's end with status was announced.
func (p *Published) add(run uuid.UUID, status string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if len(p.cur) >= publishedCap {
		p.prev, p.cur = p.cur, make(map[publishedKey]struct{}, publishedCap)
	}
	p.cur[publishedKey{run, status}] = struct{}{}
	p.mu.Unlock()
}

// take reports whether run's end with status was announced, forgetting it.
func (p *Published) take(run uuid.UUID, status string) bool {
	if p == nil {
		return false
	}
	k := publishedKey{run, status}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.cur[k]; ok {
		delete(p.cur, k)
		return true
	}
	if _, ok := p.prev[k]; ok {
		delete(p.prev, k)
		return true
	}
	return false
}
