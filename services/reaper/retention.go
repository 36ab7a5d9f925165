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

// Retention: the leader deletes the finished runs older than their
// retention period (store.RunsDeleteExpired), one bounded batch per step
// of its loop, at the moment store.RunsNextExpiry says the next one
// expires. Between two batches of a backlog it pauses; with nothing due,
// its timer waits for the next expiry.

const (
	// retentionRecheck bounds the wait between two reads of the next
	// expiry. Nothing announces a changed policy, nor the end of a parent
	// whose children were spared: both take effect at the next read, so
	// within the hour. One read is one indexed statement.
	retentionRecheck = time.Hour
	// retentionRefresh is how often a long backlog re-reads the next
	// expiry between its batches, so the gauges stay current.
	retentionRefresh = time.Minute
	// retentionBusyMax bounds the backoff after batches that left due runs
	// other transactions held.
	retentionBusyMax = time.Minute
	// retentionCoalesce is the least time between two batches when runs
	// expire one after the other: runs finish all the time, so their
	// expiries are milliseconds apart, and a timer at each would delete
	// them one per statement (three statements and a transaction each).
	// A run goes up to this much after it expired, together with the
	// others of that second.
	retentionCoalesce = time.Second
)

// retention is the retention sweep.
type retention struct {
	*shared
	faults
	cfg RetentionConfig
	// onBatch, if set (tests), is called in each batch's transaction,
	// after its deletion and before its commit.
	onBatch func(ctx context.Context, tx *store.Store)
	// onDeleted, if set, is told of each batch that deleted runs (the
	// attribute counts' news of work).
	onDeleted func()

	// mu guards expiry, what the leader last read of the next expiry (nil
	// on a standby).
	mu     sync.Mutex
	expiry *store.RunsExpiry
	tm     retentionTerm
	c      retentionCounters

	life lifecycle.Base
}

// retentionTerm is the retention sweep's state for one term.
type retentionTerm struct {
	// at is when retention acts next (zero: at the first step): deletes a
	// batch if due, else reads the next expiry.
	at  time.Time
	due bool
	// readAt is when the next expiry was last read; busy the backoff
	// after batches that left due runs others held; pass the runs deleted
	// since the last pass ended.
	readAt time.Time
	busy   time.Duration
	pass   int64
	// waysAt is when the ways in's retention acts next (zero: at the
	// first step; retention_ways_in.go).
	waysAt time.Time
}

type retentionCounters struct {
	deleted, batches, queries atomic.Int64
	// events and tokens count the published events and wait tokens
	// deleted (retention_ways_in.go).
	events, tokens atomic.Int64
}

func newRetention(sh *shared, cfg RetentionConfig) *retention {
	return &retention{shared: sh, faults: faults{lg: sh.log}, cfg: cfg}
}

// Start starts the sweep, which listens to nothing: its timer is the
// next expiry.
func (s *retention) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}

// Stop stops the sweep; safe to call twice.
func (s *retention) Stop() { s.life.Stop(nil) }

// gain takes over: retention acts at the first step.
func (s *retention) gain(context.Context, time.Time) error {
	s.tm = retentionTerm{}
	return nil
}

// next is when retention acts next.
func (s *retention) next() time.Time {
	var e earliest
	e.at(s.tm.at)
	e.at(s.tm.waysAt)
	return e.t
}

// step serves the retention timers: the runs' and the ways in's.
func (s *retention) step(ctx context.Context) {
	s.stepRuns(ctx)
	s.stepWaysIn(ctx)
}

// stepRuns deletes a batch when runs are due and reads when the next
// ones will be.
func (s *retention) stepRuns(ctx context.Context) {
	t := &s.tm
	now := s.clock.Now()
	if t.at.After(now) || ctx.Err() != nil {
		return
	}
	acted := false
	if t.due {
		n, err := s.deleteExpired(ctx, now)
		if err != nil {
			if ctx.Err() == nil {
				s.failed("delete expired runs", err)
			}
			t.at = now.Add(retryAfter)
			return
		}
		t.pass += n
		if n >= int64(s.cfg.RetentionBatch) {
			// More are due. The next batch waits at least as long as
			// this one took (and RetentionPause): the cleanup holds a
			// connection half the time at most, and the statements of
			// the hot path never queue behind a stream of deletions.
			took := s.clock.Now().Sub(now)
			t.at, t.busy = now.Add(max(s.cfg.RetentionPause, took)), 0
			if now.Sub(t.readAt) >= retentionRefresh {
				_, _ = s.readExpiry(ctx, now)
			}
			return
		}
		acted = true
		if t.pass > 0 {
			s.log.Info("expired runs deleted", "runs", t.pass)
		}
		t.pass = 0
	}
	exp, err := s.readExpiry(ctx, now)
	if err != nil {
		t.at = now.Add(retryAfter)
		return
	}
	// A run that finishes from now on expires no sooner than the shortest
	// period from now: reading again then (or within the hour) misses
	// none.
	bound := now.Add(retentionRecheck)
	if exp.ShortestKeep > 0 && exp.ShortestKeep < retentionRecheck {
		bound = now.Add(exp.ShortestKeep)
	}
	switch {
	case exp.Next == nil || exp.Next.After(bound):
		t.at, t.due, t.busy = bound, false, 0
	case exp.Next.After(now):
		at := *exp.Next
		if acted {
			at = later(at, now.Add(retentionCoalesce))
		}
		t.at, t.due, t.busy = at, true, 0
	case acted:
		// Due runs the batch could not take: another transaction held
		// them or their parent (a retry, a child's end). Look again after
		// a backoff, not in a loop.
		t.busy = min(max(2*t.busy, recheck), retentionBusyMax)
		t.at, t.due = now.Add(t.busy), true
	default:
		t.at, t.due = now, true
		s.stepRuns(ctx)
	}
}

// deleteExpired deletes one batch in a transaction fenced by the leader's
// term.
func (s *retention) deleteExpired(ctx context.Context, now time.Time) (int64, error) {
	n, err := fenced(ctx, s.shared, func(st *store.Store) (int64, error) {
		n, err := st.RunsDeleteExpired(ctx, store.RunsDeleteExpiredParams{Now: now, Limit: s.cfg.RetentionBatch})
		if err == nil && s.onBatch != nil {
			s.onBatch(ctx, st)
		}
		return n, err
	})
	if err != nil {
		return 0, err
	}
	s.c.batches.Add(1)
	s.c.deleted.Add(n)
	if n > 0 && s.onDeleted != nil {
		s.onDeleted()
	}
	s.log.Debug("expired runs deleted", "runs", n)
	return n, nil
}

// readExpiry reads the next expiry and keeps it for the gauges.
func (s *retention) readExpiry(ctx context.Context, now time.Time) (store.RunsExpiry, error) {
	s.c.queries.Add(1)
	exp, err := s.st.RunsNextExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("next expiry", err)
		}
		return exp, err
	}
	s.tm.readAt = now
	s.mu.Lock()
	s.expiry = &exp
	s.mu.Unlock()
	return exp, nil
}

// forgetExpiry drops what the leader read: a standby exports no retention
// gauge.
func (s *retention) forgetExpiry() {
	s.mu.Lock()
	s.expiry = nil
	s.mu.Unlock()
}

// ages are the retention gauges at now: how long ago the oldest
// finished run finished, and how long the most overdue run has been due
// (0: none is). ok is false where no leader's read is at hand.
func (s *retention) ages(now time.Time) (oldest, overdue time.Duration, ok bool) {
	s.mu.Lock()
	exp := s.expiry
	s.mu.Unlock()
	if exp == nil {
		return 0, 0, false
	}
	if exp.OldestFinished != nil {
		oldest = max(now.Sub(*exp.OldestFinished), 0)
	}
	if exp.Next != nil {
		overdue = max(now.Sub(*exp.Next), 0)
	}
	return oldest, overdue, true
}
