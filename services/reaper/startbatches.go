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

// Start batches (docs/batching.md): the database holds every open batch,
// so no process's death or stall loses one. A batch that fills closes in
// the transaction of the add that fills it; one that does not is closed
// at its deadline by the leader, with a timer armed at the earliest
// deadline, in transactions fenced by its term: a leader replaced while
// frozen closes nothing when it resumes, and the new one reads the
// deadlines when it takes over. Closing locks the batch, as every add
// does, so an item is in one run.
//
// Opening a batch notifies as a published event does (migration 033), so
// the sweep re-reads the next deadline on protocol.EventPublished; an
// idle system reads nothing.

// startBatches is the start-batch sweep.
type startBatches struct {
	*shared
	faults

	// reread is set when the next deadline must be read again.
	reread atomic.Bool
	// at is the armed timer (zero: none); touched by the leader's loop.
	at   time.Time
	runs atomic.Int64

	sub  *nats.Subscription
	life lifecycle.Base
}

func newStartBatches(sh *shared) *startBatches {
	return &startBatches{shared: sh, faults: faults{lg: sh.log}}
}

// Start subscribes to published events (which opened batches notify as).
func (s *startBatches) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return fmt.Errorf("start batches: %w", err)
	}
	sub, err := s.nc.Subscribe(protocol.SubjectEventAll, func(*nats.Msg) { s.resync() })
	if err != nil {
		s.life.Stop(nil)
		return fmt.Errorf("start batches: subscribe %s: %w", protocol.SubjectEventAll, err)
	}
	s.sub = sub
	s.drops.Add(sub, s.resync)
	return nil
}

// Stop unsubscribes; safe to call twice.
func (s *startBatches) Stop() {
	s.life.Stop(func() {
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
	})
}

func (s *startBatches) resync() {
	s.reread.Store(true)
	s.wake()
}

// gain takes over: the next deadline is read at the first step.
func (s *startBatches) gain(context.Context, time.Time) error {
	s.at = time.Time{}
	s.reread.Store(true)
	return nil
}

func (s *startBatches) next() time.Time {
	if s.reread.Load() {
		return s.clock.Now()
	}
	return s.at
}

// step closes the due batches when the timer is due, then re-reads the
// next deadline when asked.
func (s *startBatches) step(ctx context.Context) {
	now := s.clock.Now()
	closed := 0
	if !s.at.IsZero() && !s.at.After(now) {
		runs, err := fenced(ctx, s.shared, func(tx *store.Store) ([]uuid.UUID, error) { return tx.StartBatchesFlushDue(ctx, now) })
		if err != nil {
			if ctx.Err() == nil {
				s.failed("close due start batches", err)
			}
			s.at = now.Add(retryAfter)
			return
		}
		closed = len(runs)
		s.runs.Add(int64(closed))
		s.reread.Store(true)
		for _, run := range runs {
			s.log.Debug("start batch closed at its deadline", "run_id", run)
		}
	}
	if !s.reread.Swap(false) {
		return
	}
	next, err := s.st.StartBatchesNextDue(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.failed("next start batch deadline", err)
		}
		s.at = now.Add(retryAfter)
	case next == nil:
		s.at = time.Time{}
	case !next.After(now) && closed == 0 && !s.at.IsZero() && !s.at.After(now):
		// Due, but an adder held it: its add may close it, else look again.
		s.at = now.Add(recheck)
	default:
		s.at = *next
	}
}
