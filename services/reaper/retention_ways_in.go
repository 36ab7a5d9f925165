package reaper

import (
	"context"

	"github.com/kagzi/kagzi/pkg/store"
)

// Retention of the ways in: the retention sweep also deletes the
// published events fanned out more than KAGZI_EVENT_RETENTION ago (with
// their trigger firings and webhook deliveries) and the wait tokens used
// or expired that long ago. These rows do not announce when they expire
// and nothing waits on their deletion, so the sweep deletes a batch of
// each at its hourly look (and at the take-over), and the next batch a
// pause later while the batches come back full. A row goes at most an hour
// after its period; nothing is read in between.

// stepWaysIn deletes a batch of expired events and wait tokens when its
// timer is due.
func (s *retention) stepWaysIn(ctx context.Context) {
	t := &s.tm
	now := s.clock.Now()
	if s.cfg.EventRetention == 0 || t.waysAt.After(now) || ctx.Err() != nil {
		return
	}
	before := now.Add(-s.cfg.EventRetention)
	limit := s.cfg.RetentionBatch
	n, err := fenced(ctx, s.shared, func(st *store.Store) ([2]int64, error) {
		ev, err := st.PublishedEventsDeleteExpired(ctx, before, limit)
		if err != nil {
			return [2]int64{}, err
		}
		tok, err := st.WaitTokensDeleteExpired(ctx, before, limit)
		return [2]int64{ev, tok}, err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.failed("delete expired events and wait tokens", err)
		}
		t.waysAt = now.Add(retryAfter)
		return
	}
	s.c.events.Add(n[0])
	s.c.tokens.Add(n[1])
	if n[0] > 0 || n[1] > 0 {
		s.log.Debug("expired events and wait tokens deleted", "events", n[0], "wait_tokens", n[1])
	}
	if n[0] >= int64(limit) || n[1] >= int64(limit) {
		// More are due: the next batch after a pause, as a backlog of runs.
		t.waysAt = now.Add(max(s.cfg.RetentionPause, s.clock.Now().Sub(now)))
		return
	}
	t.waysAt = now.Add(retentionRecheck)
}
