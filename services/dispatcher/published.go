package dispatcher

import (
	"sync"

	"github.com/google/uuid"
)

// publishedCap bounds each generation of Published: entries the relay
// never takes (it runs in another replica, or the run's notification was
// lost) are forgotten after two generations.
const publishedCap = 1 << 16

// Published remembers the run ends that a process's dispatcher or relay
// announced, so that the other one — publishing on the same NATS
// connection, hence with the same fate — does not announce them a second
// time. Either may come first: the dispatcher announces right after its
// commit, and the relay when the commit's notification comes back from
// Postgres, which is often sooner than the dispatcher's reply (about half
// of all ends went out twice when only the dispatcher's were
// remembered). The relay of another replica announces as before. A nil
// *Published remembers nothing.
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

// once announces run's end with publish, unless the other side of the
// process announced it already: then it forgets it and reports skipped.
// An end that publish sent is remembered for the other side.
func (p *Published) once(run uuid.UUID, status string, publish func() bool) (skipped bool) {
	if p.take(run, status) {
		return true
	}
	if publish() {
		p.add(run, status)
	}
	return false
}
