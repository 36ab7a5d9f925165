package reaper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle"

	"github.com/kagzi/kagzi/pkg/store"
)

// Attribute counts: starts, forks, batch changes and deletions of runs
// with search attributes append count deltas (migration 025); the leader
// folds them into the maintained counts (store.AttributeCountsFold) a
// few seconds after it hears of such work, so a count grouped by an
// attribute reads few rows. A count is exact either way: folding only
// keeps it short. The sweep hears of work by the wakeups starts make and
// by the leader's own deletions and batches; with nothing heard it runs
// no statement, and with no delta waiting one read.

const (
	// countsFoldDelay is how long after the first news of work the leader
	// folds: deltas of the starts of those seconds go in one pass.
	countsFoldDelay = 5 * time.Second
	// countsFoldBatch is the most deltas one fold's transaction takes.
	countsFoldBatch = 10000
	// countsFoldPause is the least time between two folds of a backlog.
	countsFoldPause = 100 * time.Millisecond
)

// counts is the sweep that folds attribute count deltas.
type counts struct {
	*shared
	faults
	// heard is when the sweep first heard of work that may have appended
	// deltas since its last look (unix nanoseconds; 0: none).
	heard atomic.Int64
	// at is when the leader folds next (zero: when it hears of work).
	at time.Time
	c  countsCounters

	life lifecycle.Base
}

type countsCounters struct {
	folds, deltas atomic.Int64
}

func newCounts(sh *shared) *counts {
	return &counts{shared: sh, faults: faults{lg: sh.log}}
}

// Start starts the sweep, which listens to nothing: the reaper tells it
// of work (touch).
func (s *counts) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return fmt.Errorf("attribute counts: %w", err)
	}
	return nil
}

// Stop stops the sweep; safe to call twice.
func (s *counts) Stop() { s.life.Stop(nil) }

// touch tells the sweep of work that may have appended deltas; it wakes
// the leader the first time after a fold.
func (s *counts) touch() {
	if s.heard.Load() == 0 && s.heard.CompareAndSwap(0, s.clock.Now().UnixNano()) {
		s.wake()
	}
}

// gain takes over: the deltas appended while no replica led are folded at
// the first step.
func (s *counts) gain(_ context.Context, now time.Time) error {
	s.at = now
	return nil
}

// next is when the sweep folds next.
func (s *counts) next() time.Time { return s.at }

// step folds a batch of deltas when due, and again after a pause while a
// batch came back full.
func (s *counts) step(ctx context.Context) {
	now := s.clock.Now()
	if h := s.heard.Swap(0); h != 0 && s.at.IsZero() {
		s.at = time.Unix(0, h).Add(countsFoldDelay)
	}
	if s.at.IsZero() || s.at.After(now) || ctx.Err() != nil {
		return
	}
	// Most news is of starts without attributes: a read, not a fenced
	// transaction, tells there is nothing to fold.
	pending, err := s.st.AttributeCountDeltasAny(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("read attribute count deltas", err)
		}
		s.at = now.Add(retryAfter)
		return
	}
	if !pending {
		s.at = time.Time{}
		return
	}
	n, err := fenced(ctx, s.shared, func(st *store.Store) (int, error) {
		return st.AttributeCountsFold(ctx, countsFoldBatch)
	})
	if err != nil {
		if ctx.Err() == nil {
			s.failed("fold attribute counts", err)
		}
		s.at = now.Add(retryAfter)
		return
	}
	s.c.folds.Add(1)
	s.c.deltas.Add(int64(n))
	if n < countsFoldBatch {
		s.at = time.Time{}
		return
	}
	s.at = now.Add(max(countsFoldPause, s.clock.Now().Sub(now)))
}
