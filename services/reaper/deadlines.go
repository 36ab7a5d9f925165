package reaper

import (
	"context"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// Deadlines: runs past their deadline are failed, at the earliest
// deadline the leader read, which wakeups make it read again.

// deadlines serves the deadline timer and re-reads the next deadline when
// asked (by wakeups, at most once a second).
func (r *Reaper) deadlines(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if !r.deadlineCheck.IsZero() && !r.deadlineCheck.After(now) {
		r.deadlineCheck = time.Time{}
		t.deadlineQueryAt = now
	}
	r.mu.Unlock()
	acted := false
	if !t.deadlineAt.IsZero() && !t.deadlineAt.After(now) {
		runs, err := fenced(ctx, r, func(st *store.Store) ([]store.Run, error) { return st.RunsFailPastDeadline(ctx, now) })
		if err != nil {
			if ctx.Err() == nil {
				r.failed("fail runs past their deadline", err)
			}
			t.deadlineAt = now.Add(retryAfter)
			return
		}
		acted = true
		t.deadlineQueryAt = now
		for _, run := range runs {
			r.log.Info("run missed its deadline", "run_id", run.ID, "ns", run.Namespace)
		}
		r.c.deadlines.Add(int64(len(runs)))
	}
	if t.deadlineQueryAt.IsZero() || t.deadlineQueryAt.After(now) {
		return
	}
	r.c.deadlineQ.Add(1)
	next, err := r.st.RunsNextDeadline(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("next deadline", err)
		}
		t.deadlineQueryAt = now.Add(retryAfter)
		return
	}
	r.mu.Lock()
	r.lastDeadlineQuery = now
	r.mu.Unlock()
	t.deadlineQueryAt = time.Time{}
	switch {
	case next == nil:
		t.deadlineAt = time.Time{}
	case acted && !next.After(now):
		t.deadlineAt = now.Add(recheck)
	default:
		t.deadlineAt = *next
	}
}
