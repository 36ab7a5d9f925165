package scheduler

import "github.com/kagzi/kagzi/internal/clock"

// Clock is the scheduler's source of time: what "now" is when it reads due
// schedules and decides which fire times were missed, and the timer it arms
// for the next one. Tests inject a fake to drive catch-up deterministically.
type Clock = clock.Clock

// Timer is an armed AfterFunc.
type Timer = clock.Timer

// RealClock is the wall clock.
type RealClock = clock.Real
