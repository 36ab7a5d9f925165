package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Pulse notices that its own process stopped making progress: a freeze
// (SIGSTOP, a paused VM, a process swapped out, a long stop-the-world
// pause). A frozen process keeps its TCP connections — its kernel still
// answers — so its peers go on treating it as alive, and when it resumes
// it holds state that is as old as the freeze: a lock that a standby may
// have taken over since, liveness times that say every worker fell
// silent, deliveries that their dispatcher released long ago. Nothing in
// the process can see the freeze except a clock that jumped, so Pulse
// ticks and remembers the gaps between its ticks (monotonic time, which
// runs on while the process is stopped).
//
// Whoever acts on state older than a bound asks StalledSince before
// acting. It answers true for a stall that already ended (the ticker saw
// the gap) and for one that is ending now (the ticker has not run since
// the process resumed), so it does not matter which goroutine runs first
// after a resume.
type Pulse struct {
	tick time.Duration

	mu      sync.Mutex
	started bool
	last    time.Time
	stalls  []stall // oldest first

	life Base
}

type stall struct {
	end time.Time
	len time.Duration
}

// keptStalls bounds what a Pulse remembers; older stalls are forgotten.
const (
	keptStalls   = 32
	keptStallAge = 10 * time.Minute
)

// NewPulse returns a pulse that ticks every tick (default 100 ms): gaps
// shorter than a few ticks are the scheduler's noise, not stalls.
func NewPulse(tick time.Duration) *Pulse {
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	return &Pulse{tick: tick, last: time.Now()}
}

// Start begins ticking.
func (p *Pulse) Start(ctx context.Context) error {
	ctx, err := p.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pulse: %w", err)
	}
	p.mu.Lock()
	p.last, p.started = time.Now(), true
	p.mu.Unlock()
	p.life.Go(func() {
		t := time.NewTicker(p.tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.beat(time.Now())
			}
		}
	})
	return nil
}

// Stop ends the ticking; safe to call twice.
func (p *Pulse) Stop() { p.life.Stop(nil) }

func (p *Pulse) beat(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gap := now.Sub(p.last); gap > 3*p.tick {
		p.stalls = append(p.stalls, stall{end: now, len: gap})
		for len(p.stalls) > keptStalls || (len(p.stalls) > 0 && now.Sub(p.stalls[0].end) > keptStallAge) {
			p.stalls = p.stalls[1:]
		}
	}
	p.last = now
}

// StalledSince reports whether the process made no progress for longer
// than max at some time after since: a stall that ended after since, or
// one going on now (the pulse has not ticked for longer than max). A nil
// Pulse, or one not started, never stalls.
func (p *Pulse) StalledSince(since time.Time, max time.Duration) bool {
	if p == nil {
		return false
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return false
	}
	if now.Sub(p.last) > max {
		return true
	}
	for i := len(p.stalls) - 1; i >= 0 && p.stalls[i].end.After(since); i-- {
		if p.stalls[i].len > max {
			return true
		}
	}
	return false
}
