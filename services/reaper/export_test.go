package reaper

import "time"

// SetFlushHook makes r call fn on its leader goroutine after every flush,
// with the number of workers the flush wrote. Set it before Start.
func SetFlushHook(r *Reaper, fn func(workers int)) { r.onFlush = fn }

// SetStepHook makes r call fn on its leader goroutine after every step of
// the leader's loop, with the clock's time before the step. Set it before
// Start.
func SetStepHook(r *Reaper, fn func(at time.Time)) { r.onStep = fn }

// Kick wakes r's leader for a step.
func Kick(r *Reaper) { r.wakeLeader() }

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time { return later(a, b) }
