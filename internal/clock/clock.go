// Package clock is the source of time of the services that act on time
// (the scheduler fires schedules, the reaper presumes workers dead and
// expires leases and deadlines), so their tests drive time instead of
// waiting for it.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and arms timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed (at once if
	// d <= 0), as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is an armed AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a Clock that moves only when told (Set, Advance); its timers
// fire when it reaches their time. Changed tells a test when timers are
// armed or stopped, so it waits for the code under test to arm the timer
// it means to fire rather than for real time to pass.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{}
	changed chan struct{}
}

type fakeTimer struct {
	c  *Fake
	at time.Time
	f  func()
}

// NewFake returns a fake clock at now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, timers: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// Now implements Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
	return t
}

// Stop implements Timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if _, ok := t.c.timers[t]; !ok {
		return false
	}
	delete(t.c.timers, t)
	t.c.notifyLocked()
	return true
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Changed returns a channel closed the next time a timer is armed,
// stopped or fired.
func (c *Fake) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Armed returns the times of the armed timers, earliest first.
func (c *Fake) Armed() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.timers))
	for t := range c.timers {
		out = append(out, t.at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// Set moves the clock to now (never back) and fires, each in its own
// goroutine, the timers due by then.
func (c *Fake) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.After(c.now) {
		c.now = now
	}
	fired := false
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			go t.f()
			fired = true
		}
	}
	if fired {
		c.notifyLocked()
	}
}

// Advance moves the clock d forward (Set).
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }
