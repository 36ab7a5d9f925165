package reaper

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// A sweep is one of the leader's duties: liveness, registration, leases,
// deadlines, retention. Each has its own state, counters and lifecycle:
// Start subscribes to what it listens to (every replica listens, so a
// standby that takes over knows what the leader knew), Stop undoes it and
// is safe to call twice. The Reaper composes them, and leadership decides
// when they act: the leader's loop (lead.go) calls gain on taking over,
// then step whenever anything is due, and arms its one timer at the
// earliest of their next times.
type sweep interface {
	Start(ctx context.Context) error
	Stop()
	// gain takes over for a new term, before the first step.
	gain(ctx context.Context, now time.Time) error
	// step does what is due.
	step(ctx context.Context)
	// next is when the sweep must step next (zero: only when woken).
	next() time.Time
	// errs counts failed statements (each is retried).
	errs() int64
}

// shared is what the Reaper gives every sweep.
type shared struct {
	st    *store.Store
	nc    *nats.Conn
	log   *slog.Logger
	clock clock.Clock
	// term is the leader's current term (store.LeadersElect), which
	// fences its writes; leader is set while this replica leads.
	term   atomic.Int64
	leader atomic.Bool
	// wake nudges the leader's loop (a no-op on a standby).
	wake func()
	// drops watches the subscriptions for messages NATS dropped.
	drops     *natsutil.Drops
	malformed *natsutil.Malformed
}

// fenced runs fn, a write of the leader, in a transaction in which this
// replica's term is current (store.Fenced): a leader replaced while it
// stalled writes nothing, even a statement it prepared before the stall.
func fenced[T any](ctx context.Context, sh *shared, fn func(st *store.Store) (T, error)) (T, error) {
	var out T
	err := sh.st.Fenced(ctx, protocol.LeaderReaper, sh.term.Load(), func(tx *store.Store) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// faults counts and logs a sweep's failed statements.
type faults struct {
	n  atomic.Int64
	lg *slog.Logger
}

func (f *faults) failed(what string, err error) {
	f.n.Add(1)
	f.lg.Error(what, "err", err)
}

func (f *faults) errs() int64 { return f.n.Load() }

// retryAfter is the wait before a failed statement is tried again, and
// recheck the wait before re-reading a due time that did not move (rows
// skipped because another transaction held them).
const (
	retryAfter = time.Second
	recheck    = 250 * time.Millisecond
)

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// earliest folds due times: at(x) keeps the earliest non-zero one.
type earliest struct{ t time.Time }

func (e *earliest) at(x time.Time) {
	if !x.IsZero() && (e.t.IsZero() || x.Before(e.t)) {
		e.t = x
	}
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}
