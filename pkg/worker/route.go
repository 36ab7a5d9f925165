package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Where the worker's messages for a dispatcher go. NATS picks a member of
// the dispatchers' queue group for each message, and keeps a frozen member
// (SIGSTOP, a paused VM) in the group until the server's pings evict it:
// 3 to 4 s with the pings Kagzi's own servers use, 4 minutes with
// nats-server's defaults, and with some server versions not even then. A
// worker that left the choice to NATS would send report after report to a
// dispatcher that answers nothing, and wait its ReportTimeout for each.
//
// So the worker chooses (protocol.SubjectDirect): among the dispatchers it
// heard beacon lately that take addressed messages, at random, preferring
// those whose last beacon is not yet overdue. A request in flight to a
// dispatcher that falls silent (protocol.BeaconSilence) is cancelled and
// sent again to another; one that times out makes its dispatcher avoided
// until its silence would have shown; one that finds no responder (the
// dispatcher is gone, its subscription with it) forgets the dispatcher at
// once. Only when no such dispatcher is known (none heard yet, or all of
// an older version) does a message go to the queue group.
//
// This is safe for the same reason renewing a request is: everything a
// dispatcher does for a worker is fenced by the run's lease token, so what
// a frozen dispatcher does when it resumes, for a request or report that
// was since sent elsewhere, is refused.

// errDispatcherSilent cancels the round trips in flight to a dispatcher
// that fell silent or went away.
var errDispatcherSilent = errors.New("the dispatcher fell silent")

// flight is one round trip in flight to an addressed dispatcher.
type flight struct {
	cancel context.CancelCauseFunc
}

// route returns the subject to send a message of the dispatchers' queue
// group subject group to, and the dispatcher it addresses (uuid.Nil: the
// queue group). It prefers, at random, a dispatcher whose beacon is not
// overdue, then one not yet silent; it avoids the dispatchers that timed
// out lately unless no other is known.
func (l *liveness) route(group string) (string, uuid.UUID) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Reservoir sampling per tier: lower tiers are better.
	const tiers = 3
	var pick [tiers]uuid.UUID
	var seen [tiers]int
	for id, h := range l.heard {
		if !h.direct {
			continue
		}
		tier := 0
		if now.Sub(h.at) > h.interval+h.interval/2 {
			tier = 1 // a beacon is overdue: frozen, maybe
		}
		if until, ok := l.avoid[id]; ok {
			if now.Before(until) {
				tier = 2
			} else {
				delete(l.avoid, id)
			}
		}
		seen[tier]++
		if rand.IntN(seen[tier]) == 0 {
			pick[tier] = id
		}
	}
	for t := range tiers {
		if seen[t] > 0 {
			return protocol.SubjectDirect(pick[t], group), pick[t]
		}
	}
	return group, uuid.Nil
}

// fly registers a round trip to dispatcher (uuid.Nil: the queue group,
// not registered) made under ctx, so that its dispatcher falling silent
// cancels it; done must be called when the round trip is over.
func (l *liveness) fly(ctx context.Context, dispatcher uuid.UUID) (context.Context, func()) {
	if dispatcher == uuid.Nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	f := &flight{cancel: cancel}
	l.mu.Lock()
	if _, ok := l.heard[dispatcher]; !ok {
		// Forgotten between route and here: it went silent.
		l.mu.Unlock()
		cancel(errDispatcherSilent)
		return ctx, func() {}
	}
	set := l.flights[dispatcher]
	if set == nil {
		set = map[*flight]struct{}{}
		l.flights[dispatcher] = set
	}
	set[f] = struct{}{}
	l.mu.Unlock()
	return ctx, func() {
		l.mu.Lock()
		if set := l.flights[dispatcher]; set != nil {
			delete(set, f)
			if len(set) == 0 {
				delete(l.flights, dispatcher)
			}
		}
		l.mu.Unlock()
		cancel(nil)
	}
}

// groundedLocked cancels the round trips in flight to the dispatchers forgotten;
// the caller holds l.mu.
func (l *liveness) groundedLocked(ids ...uuid.UUID) {
	for _, id := range ids {
		for f := range l.flights[id] {
			f.cancel(errDispatcherSilent)
		}
		delete(l.flights, id)
	}
}

// tripFailed notes how a round trip to dispatcher under fctx (fly's)
// ended in err, and returns the error to retry on: a time-out makes the
// dispatcher avoided until its silence would have shown; no responder
// means it is gone, and it is forgotten (and the work request it may hold
// renewed); a round trip cancelled because the dispatcher fell silent
// returns errDispatcherSilent.
func (w *Worker) tripFailed(fctx context.Context, dispatcher uuid.UUID, err error) error {
	if dispatcher == uuid.Nil {
		return err
	}
	if cause := context.Cause(fctx); errors.Is(cause, errDispatcherSilent) {
		return cause
	}
	l := &w.live
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		l.mu.Lock()
		_, known := l.heard[dispatcher]
		delete(l.heard, dispatcher)
		l.groundedLocked(dispatcher)
		l.mu.Unlock()
		if known {
			w.renewRequestIf(func(o *outstanding) bool { return o.target == dispatcher }, "dispatcher gone", "dispatcher_id", dispatcher)
		}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		l.mu.Lock()
		if h, ok := l.heard[dispatcher]; ok {
			l.avoid[dispatcher] = time.Now().Add(protocol.BeaconSilence(h.interval))
		}
		l.mu.Unlock()
	}
	return err
}

// initRoutes makes the maps of a fresh liveness; the caller holds l.mu.
func (l *liveness) initRoutesLocked() {
	if l.avoid == nil {
		l.avoid = map[uuid.UUID]time.Time{}
	}
	if l.flights == nil {
		l.flights = map[uuid.UUID]map[*flight]struct{}{}
	}
}
