package reaper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Fan-out of published events to triggers (docs/triggers.md): the leader
// starts, for each event not fanned out yet, the runs of the triggers that
// match it, in fenced transactions of up to fanOutChunk events
// (store.PublishedEventsFanOut each), so an event is fanned out whole or
// not at all, and a new leader takes the events still pending: a run per
// (event, trigger), exactly once.
//
// An event whose fan-out fails is tried again after a backoff while the
// events after it go on, and given up at store.MaxFanOutAttempts (a
// poison event, see fanOutFailed).
//
// The sweep reads the pending events when it takes over, when an event is
// published (protocol.EventPublished, relayed from the events' trigger)
// and when a relay (re)starts; an idle system reads nothing.

const (
	// fanOutRead is how many pending events one read takes; more wait for
	// the next step.
	fanOutRead = 100
	// fanOutChunk is how many events one fenced transaction fans out: a
	// commit per event capped the fan-out near the commit rate.
	fanOutChunk = 25
	// fanOutStepBudget bounds the time one step of the leader's loop
	// spends fanning out, so a burst of events does not hold up the other
	// sweeps.
	fanOutStepBudget = 100 * time.Millisecond
	// fanOutBackoffMax bounds the wait before an event whose fan-out
	// failed is tried again (retryAfter doubled per failure before).
	fanOutBackoffMax = time.Minute
)

// fanOuts is the fan-out sweep.
type fanOuts struct {
	*shared
	faults

	// reread is set when the pending events must be read again.
	reread atomic.Bool
	// retryAt is when a failed read is tried again, or the next event in
	// backoff is due (zero: none); backoff holds the events whose fan-out
	// failed and when each is tried again: the events after them go on
	// meanwhile. Both are touched by the leader's loop only.
	retryAt time.Time
	backoff map[uuid.UUID]time.Time
	c       fanOutCounters
	// fanOut, if set (tests), replaces store.PublishedEventsFanOut in the
	// fenced transaction.
	fanOut func(ctx context.Context, tx *store.Store, id uuid.UUID) (store.FanOut, error)

	ctx  context.Context
	sub  *nats.Subscription
	life lifecycle.Base
}

type fanOutCounters struct {
	// events counts the events this replica fanned out as leader, runs
	// the runs they started, givenUp the events it gave up.
	events, runs, givenUp atomic.Int64
}

func newFanOuts(sh *shared) *fanOuts {
	return &fanOuts{shared: sh, faults: faults{lg: sh.log}}
}

// Start subscribes to published events.
func (s *fanOuts) Start(ctx context.Context) error {
	ctx, err := s.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fan-out: %w", err)
	}
	s.ctx = ctx
	sub, err := s.nc.Subscribe(protocol.SubjectEventAll, s.onPublished)
	if err != nil {
		s.life.Stop(nil)
		return fmt.Errorf("fan-out: subscribe %s: %w", protocol.SubjectEventAll, err)
	}
	s.sub = sub
	s.drops.Add(sub, s.resync)
	return nil
}

// Stop unsubscribes; safe to call twice.
func (s *fanOuts) Stop() {
	s.life.Stop(func() {
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
	})
}

func (s *fanOuts) onPublished(m *nats.Msg) {
	var e protocol.EventPublished
	if err := protocol.Decode(m.Data, &e); err != nil {
		s.malformed.Drop(s.ctx, m.Subject, err)
		return
	}
	s.resync()
}

// resync asks the leader to read the pending events again.
func (s *fanOuts) resync() {
	s.reread.Store(true)
	s.wake()
}

// gain takes over: the pending events are read at the first step.
func (s *fanOuts) gain(context.Context, time.Time) error {
	s.retryAt = time.Time{}
	s.backoff = map[uuid.UUID]time.Time{}
	s.reread.Store(true)
	return nil
}

func (s *fanOuts) next() time.Time {
	if s.reread.Load() {
		return s.clock.Now()
	}
	return s.retryAt
}

// step fans out the pending events, for at most fanOutStepBudget.
func (s *fanOuts) step(ctx context.Context) {
	now := s.clock.Now()
	if !s.retryAt.IsZero() && !now.Before(s.retryAt) {
		s.retryAt = time.Time{}
		s.reread.Store(true)
	}
	if !s.reread.Swap(false) {
		return
	}
	ids, err := s.st.PublishedEventsPending(ctx, fanOutRead)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("read events to fan out", err)
			s.retryAt = now.Add(retryAfter)
		}
		return
	}
	s.retryAt = time.Time{}
	due := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if at, ok := s.backoff[id]; !ok || !now.Before(at) {
			due = append(due, id)
		}
	}
	for len(due) > 0 {
		if ctx.Err() != nil {
			return
		}
		if s.clock.Now().Sub(now) > fanOutStepBudget {
			s.reread.Store(true)
			return
		}
		chunk := due[:min(fanOutChunk, len(due))]
		due = due[len(chunk):]
		if !s.fanOutChunk(ctx, now, chunk) {
			return
		}
	}
	if len(ids) == fanOutRead {
		s.reread.Store(true)
	} else {
		// Every pending event was read: an entry of another is stale (the
		// event was fanned out or deleted by someone else).
		pending := make(map[uuid.UUID]bool, len(ids))
		for _, id := range ids {
			pending[id] = true
		}
		for id := range s.backoff {
			if !pending[id] {
				delete(s.backoff, id)
			}
		}
	}
	var e earliest
	for _, at := range s.backoff {
		e.at(at)
	}
	s.retryAt = e.t
}

// fanOutChunk fans out chunk in one fenced transaction, or, when that
// fails, each event in its own, so a poison event is found and backed off
// while the others go on. False: the step stops (the context ended, or
// a failure could not be recorded and retryAt is set).
func (s *fanOuts) fanOutChunk(ctx context.Context, now time.Time, chunk []uuid.UUID) bool {
	one := func(tx *store.Store, id uuid.UUID) (store.FanOut, error) {
		if s.fanOut != nil {
			return s.fanOut(ctx, tx, id)
		}
		return tx.PublishedEventsFanOut(ctx, id)
	}
	if len(chunk) > 1 {
		outs, err := fenced(ctx, s.shared, func(tx *store.Store) ([]store.FanOut, error) {
			outs := make([]store.FanOut, 0, len(chunk))
			for _, id := range chunk {
				out, err := one(tx, id)
				if err != nil {
					return nil, err
				}
				outs = append(outs, out)
			}
			return outs, nil
		})
		if err == nil {
			for i, out := range outs {
				s.fannedOut(chunk[i], out)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	for _, id := range chunk {
		out, err := fenced(ctx, s.shared, func(tx *store.Store) (store.FanOut, error) { return one(tx, id) })
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			if !s.fanOutFailed(ctx, now, id, err) {
				s.retryAt = now.Add(retryAfter)
				return false
			}
			continue
		}
		s.fannedOut(id, out)
	}
	return true
}

// fannedOut counts event id's fan-out (out.Done: done before, by another).
func (s *fanOuts) fannedOut(id uuid.UUID, out store.FanOut) {
	delete(s.backoff, id)
	if !out.Done {
		s.c.events.Add(1)
		s.c.runs.Add(int64(len(out.Started)))
		s.log.Debug("event fanned out", "event_id", id, "runs", len(out.Started))
	}
}

// fanOutFailed records a failed fan-out of event id in a fenced
// transaction: the event is tried again after a backoff that doubles
// with its failures, while the events after it go on, and is given up at
// the store.MaxFanOutAttempts-th. It returns false when the failure
// could not be recorded (the database or the term is gone, most likely
// the cause of the failure too): the step stops and tries again later.
func (s *fanOuts) fanOutFailed(ctx context.Context, now time.Time, id uuid.UUID, cause error) bool {
	s.failed(fmt.Sprintf("fan out event %s", id), cause)
	f, err := fenced(ctx, s.shared, func(tx *store.Store) (store.FanOutFailure, error) {
		return tx.PublishedEventsFanOutFailed(ctx, id, cause)
	})
	if err != nil {
		if ctx.Err() == nil {
			s.failed(fmt.Sprintf("record failed fan-out of event %s", id), err)
		}
		return false
	}
	switch {
	case f.GivenUp:
		delete(s.backoff, id)
		s.c.givenUp.Add(1)
		s.log.Error("event given up: its fan-out failed too often; no run started", "event_id", id,
			"attempts", f.Attempts, "err", cause)
	case f.Attempts == 0:
		// No longer pending: fanned out by someone else meanwhile.
		delete(s.backoff, id)
	default:
		s.backoff[id] = now.Add(min(retryAfter<<(f.Attempts-1), fanOutBackoffMax))
	}
	return true
}
