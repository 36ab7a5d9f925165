package scheduler

import "time"

// Clock is the scheduler's source of time: what "now" is when it reads due
// schedules and decides which fire times were missed, and the timer it arms
// for the next one. Tests inject a fake to drive catch-up deterministically.
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

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
