package reaper

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/store"
)

// Deadlines: runs past their deadline are failed, at the earliest
// deadline the leader read, which wakeups make it read again.

// deadlines is the deadline sweep.
type deadlines struct {
	*shared
	faults

	mu sync.Mutex
	// check is when the next deadline must be re-read because of wakeups
	// (zero: no need); lastQuery rate-limits it.
	check, lastQuery time.Time
	tm               deadlinesTerm
	c                deadlinesCounters

	life lifecycle.Base
}

// deadlinesTerm is the deadline sweep's state for one term.
type deadlinesTerm struct {
	// at is the armed timer, queryAt asks for a re-read (zero: none).
	at, queryAt time.Time
}

type deadlinesCounters struct {
	missed, queries atomic.Int64
}

func newDeadlines(sh *shared) *deadlines {
	return &deadlines{shared: sh, faults: faults{lg: sh.log}}
}

// Start starts the sweep, which listens to nothing of its own: the Reaper
// hands it the wakeups (onWakeup).
func (s *deadlines) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return fmt.Errorf("deadlines: %w", err)
	}
	return nil
}

// Stop stops the sweep; safe to call twice.
func (s *deadlines) Stop() { s.life.Stop(nil) }

// onWakeup schedules a re-read of the next deadline (every created run
// produces a wakeup, and may have one), at most once a second; it reports
// whether one was not scheduled already.
func (s *deadlines) onWakeup(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.check.IsZero() {
		return false
	}
	s.check = now
	if next := s.lastQuery.Add(time.Second); next.After(now) {
		s.check = next
	}
	return true
}

// resync asks for a re-read now.
func (s *deadlines) resync(now time.Time) { s.tm.queryAt = now }

// gain takes over: the next deadline is read at the first step.
func (s *deadlines) gain(_ context.Context, now time.Time) error {
	s.mu.Lock()
	s.check = time.Time{}
	s.mu.Unlock()
	s.tm = deadlinesTerm{queryAt: now}
	return nil
}

// next is the timer or a re-read, whichever is first.
func (s *deadlines) next() time.Time {
	var e earliest
	e.at(s.tm.at)
	e.at(s.tm.queryAt)
	s.mu.Lock()
	defer s.mu.Unlock()
	e.at(s.check)
	return e.t
}

// step serves the deadline timer and re-reads the next deadline when
// asked (by wakeups, at most once a second).
func (s *deadlines) step(ctx context.Context) {
	t := &s.tm
	now := s.clock.Now()
	s.mu.Lock()
	if !s.check.IsZero() && !s.check.After(now) {
		s.check = time.Time{}
		t.queryAt = now
	}
	s.mu.Unlock()
	acted := false
	if !t.at.IsZero() && !t.at.After(now) {
		runs, err := fenced(ctx, s.shared, func(st *store.Store) ([]store.Run, error) { return st.RunsFailPastDeadline(ctx, now) })
		if err != nil {
			if ctx.Err() == nil {
				s.failed("fail runs past their deadline", err)
			}
			t.at = now.Add(retryAfter)
			return
		}
		acted = true
		t.queryAt = now
		for _, run := range runs {
			s.log.Info("run missed its deadline", "run_id", run.ID, "ns", run.Namespace)
		}
		s.c.missed.Add(int64(len(runs)))
	}
	if t.queryAt.IsZero() || t.queryAt.After(now) {
		return
	}
	s.c.queries.Add(1)
	next, err := s.st.RunsNextDeadline(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("next deadline", err)
		}
		t.queryAt = now.Add(retryAfter)
		return
	}
	s.mu.Lock()
	s.lastQuery = now
	s.mu.Unlock()
	t.queryAt = time.Time{}
	switch {
	case next == nil:
		t.at = time.Time{}
	case acted && !next.After(now):
		t.at = now.Add(recheck)
	default:
		t.at = *next
	}
}
