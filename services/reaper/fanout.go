package reaper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Fan-out of published events to triggers (docs/triggers.md): the leader
// starts, for each event not fanned out yet, the runs of the triggers that
// match it, one fenced transaction per event (store.PublishedEventsFanOut),
// so an event is fanned out whole or not at all, and a new leader takes
// the events still pending: a run per (event, trigger), exactly once.
//
// The sweep reads the pending events when it takes over, when an event is
// published (protocol.EventPublished, relayed from the events' trigger)
// and when a relay (re)starts; an idle system reads nothing.

const (
	// fanOutRead is how many pending events one read takes; more wait for
	// the next step.
	fanOutRead = 100
	// fanOutStepBudget bounds the time one step of the leader's loop
	// spends fanning out, so a burst of events does not hold up the other
	// sweeps.
	fanOutStepBudget = 100 * time.Millisecond
)

// fanOuts is the fan-out sweep.
type fanOuts struct {
	*shared
	faults

	// reread is set when the pending events must be read again.
	reread atomic.Bool
	// retryAt is when a failed fan-out is tried again (zero: none);
	// touched by the leader's loop only.
	retryAt time.Time
	c       fanOutCounters

	ctx  context.Context
	sub  *nats.Subscription
	life lifecycle.Base
}

type fanOutCounters struct {
	// events counts the events this replica fanned out as leader, runs
	// the runs they started.
	events, runs atomic.Int64
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
	for i, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if s.clock.Now().Sub(now) > fanOutStepBudget {
			s.reread.Store(true)
			return
		}
		out, err := fenced(ctx, s.shared, func(tx *store.Store) (store.FanOut, error) {
			return tx.PublishedEventsFanOut(ctx, id)
		})
		if err != nil {
			if ctx.Err() == nil {
				// The events after it wait too: they are read again,
				// in order, once it is tried again.
				s.failed(fmt.Sprintf("fan out event %s", id), err)
				s.retryAt = now.Add(retryAfter)
			}
			return
		}
		if !out.Done {
			s.c.events.Add(1)
			s.c.runs.Add(int64(len(out.Started)))
			s.log.Debug("event fanned out", "event_id", id, "runs", len(out.Started), "left", len(ids)-i-1)
		}
	}
	if len(ids) == fanOutRead {
		s.reread.Store(true)
	}
}
