package reaper

import (
	"context"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// Retention: the leader deletes the finished runs older than their
// retention period (store.RunsDeleteExpired), one bounded batch per step
// of its loop, at the moment store.RunsNextExpiry says the next one
// expires. Between two batches of a backlog it pauses; with nothing due,
// its timer waits for the next expiry.

// Defaults of Options.RetentionBatch and Options.RetentionPause.
const (
	// DefaultRetentionBatch is the most runs one batch (one transaction)
	// deletes: with their steps, payloads and events some thousands of
	// rows, tens of milliseconds of a transaction that locks nothing the
	// hot path uses (finished runs only).
	DefaultRetentionBatch = store.DefaultDeleteBatch
	// DefaultRetentionPause is the least time between two batches of a
	// backlog.
	DefaultRetentionPause = 100 * time.Millisecond
)

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

// retention serves the retention timer: it deletes a batch when runs are
// due and reads when the next ones will be.
func (r *Reaper) retention(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	if t.retainAt.After(now) || ctx.Err() != nil {
		return
	}
	acted := false
	if t.retainDue {
		n, err := r.deleteExpired(ctx, now)
		if err != nil {
			if ctx.Err() == nil {
				r.failed("delete expired runs", err)
			}
			t.retainAt = now.Add(retryAfter)
			return
		}
		t.retainPass += n
		if n >= int64(r.cfg.RetentionBatch) {
			// More are due. The next batch waits at least as long as
			// this one took (and RetentionPause): the cleanup holds a
			// connection half the time at most, and the statements of
			// the hot path never queue behind a stream of deletions.
			took := r.cfg.Clock.Now().Sub(now)
			t.retainAt, t.retainBusy = now.Add(max(r.cfg.RetentionPause, took)), 0
			if now.Sub(t.retainReadAt) >= retentionRefresh {
				_, _ = r.readExpiry(ctx, t, now)
			}
			return
		}
		acted = true
		if t.retainPass > 0 {
			r.log.Info("expired runs deleted", "runs", t.retainPass)
		}
		t.retainPass = 0
	}
	exp, err := r.readExpiry(ctx, t, now)
	if err != nil {
		t.retainAt = now.Add(retryAfter)
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
		t.retainAt, t.retainDue, t.retainBusy = bound, false, 0
	case exp.Next.After(now):
		at := *exp.Next
		if acted {
			at = later(at, now.Add(retentionCoalesce))
		}
		t.retainAt, t.retainDue, t.retainBusy = at, true, 0
	case acted:
		// Due runs the batch could not take: another transaction held
		// them or their parent (a retry, a child's end). Look again after
		// a backoff, not in a loop.
		t.retainBusy = min(max(2*t.retainBusy, recheck), retentionBusyMax)
		t.retainAt, t.retainDue = now.Add(t.retainBusy), true
	default:
		t.retainAt, t.retainDue = now, true
		r.retention(ctx, t)
	}
}

// deleteExpired deletes one batch in a transaction fenced by the leader's
// term.
func (r *Reaper) deleteExpired(ctx context.Context, now time.Time) (int64, error) {
	n, err := fenced(ctx, r, func(st *store.Store) (int64, error) {
		n, err := st.RunsDeleteExpired(ctx, store.RunsDeleteExpiredParams{Now: now, Limit: r.cfg.RetentionBatch})
		if err == nil && r.onRetention != nil {
			r.onRetention(ctx, st)
		}
		return n, err
	})
	if err != nil {
		return 0, err
	}
	r.c.retainBatches.Add(1)
	r.c.runsDeleted.Add(n)
	r.log.Debug("expired runs deleted", "runs", n)
	return n, nil
}

// readExpiry reads the next expiry and keeps it for the gauges.
func (r *Reaper) readExpiry(ctx context.Context, t *term, now time.Time) (store.RunsExpiry, error) {
	r.c.retainQ.Add(1)
	exp, err := r.st.RunsNextExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("next expiry", err)
		}
		return exp, err
	}
	t.retainReadAt = now
	r.mu.Lock()
	r.expiry = &exp
	r.mu.Unlock()
	return exp, nil
}

// forgetExpiry drops what the leader read: a standby exports no retention
// gauge.
func (r *Reaper) forgetExpiry() {
	r.mu.Lock()
	r.expiry = nil
	r.mu.Unlock()
}

// retentionAges are the retention gauges at now: how long ago the oldest
// finished run finished, and how long the most overdue run has been due
// (0: none is). ok is false where no leader's read is at hand.
func (r *Reaper) retentionAges(now time.Time) (oldest, overdue time.Duration, ok bool) {
	r.mu.Lock()
	exp := r.expiry
	r.mu.Unlock()
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
