package reaper

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/store"
)

// Knobs are what tests set besides the configuration (see knobs).
type Knobs = knobs

// NewWith is New with the knobs k.
func NewWith(cfg Config, k Knobs, st *store.Store, nc *nats.Conn, log *slog.Logger) *Reaper {
	return newReaper(cfg, k, st, nc, log)
}

// SetFlushHook makes r call fn on its leader goroutine after every flush,
// with the number of workers the flush wrote. Set it before Start.
func SetFlushHook(r *Reaper, fn func(workers int)) { r.live.onFlush = fn }

// SetStepHook makes r call fn on its leader goroutine after every step of
// the leader's loop, with the clock's time before the step. Set it before
// Start.
func SetStepHook(r *Reaper, fn func(at time.Time)) { r.onStep = fn }

// Kick wakes r's leader for a step.
func Kick(r *Reaper) { r.wakeLeader() }

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time { return later(a, b) }
