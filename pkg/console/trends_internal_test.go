package console

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// BenchmarkHubMoves is the hub's share of a run's life: the three moves
// it applies (new PENDING, RUNNING, COMPLETED) for runs spread over 4
// queues, the trends' part included.
func BenchmarkHubMoves(b *testing.B) {
	h := &hub{}
	st := &nsState{counts: map[store.RunStatus]int64{}, live: map[uuid.UUID]store.LiveRun{},
		recent: map[uuid.UUID]recentRun{}, baselineAt: time.Now().Add(-time.Hour)}
	queues := []string{"default", "orders", "mail", "reports"}
	now := time.Now()
	ids := make([]uuid.UUID, b.N)
	for i := range ids {
		ids[i] = uuid.New()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := store.Run{ID: ids[i], Queue: queues[i%len(queues)], CreatedAt: now}
		for _, s := range []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusCompleted} {
			r.Status = s
			h.applyLocked(st, &r, now)
		}
	}
}

// BenchmarkTrendMoves is the trends' part of BenchmarkHubMoves alone: the
// same three moves of a run, in its queue's minute.
func BenchmarkTrendMoves(b *testing.B) {
	st := &nsState{}
	queues := []string{"default", "orders", "mail", "reports"}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := queues[i%len(queues)]
		st.trendLocked(q, "", store.StatusPending, now)
		st.trendLocked(q, store.StatusPending, store.StatusRunning, now)
		st.trendLocked(q, store.StatusRunning, store.StatusCompleted, now)
	}
}

// The ring keeps 60 minutes: a minute 60 later reuses the slot, and a
// minute nothing moved in keeps the depth of the one before.
func TestTrendRing(t *testing.T) {
	st := &nsState{}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	st.trendLocked("q", "", store.StatusPending, t0)
	st.trendLocked("q", "", store.StatusPending, t0)
	st.trendLocked("q", store.StatusPending, store.StatusCompleted, t0.Add(time.Minute))
	got := st.trendsLocked(t0.Add(3 * time.Minute))[0]
	if n := len(got.Depth); n != trendMinutes {
		t.Fatalf("%d minutes, want %d", n, trendMinutes)
	}
	// Minute 1 began at 2 and ended at 1; minutes 2 and 3 kept 1.
	if d := got.Depth[56:]; d[0] != 2 || d[1] != 2 || d[2] != 1 || d[3] != 1 {
		t.Fatalf("depth of the last 4 minutes %v, want [2 2 1 1]", d)
	}
	if c := got.Completed[57]; c != 1 {
		t.Fatalf("completed in minute 1: %d", c)
	}
	// An hour on, the old minutes are gone; the depth carries on.
	st.trendLocked("q", store.StatusPending, store.StatusFailed, t0.Add(61*time.Minute))
	got = st.trendsLocked(t0.Add(61 * time.Minute))[0]
	var completed, failed int64
	for i := range got.Completed {
		completed += got.Completed[i]
		failed += got.Failed[i]
	}
	// The minute began at 1 pending run and ended at none: its depth
	// (the most) is 1.
	if completed != 0 || failed != 1 || got.Depth[59] != 1 || st.trends["q"].depth != 0 {
		t.Fatalf("an hour on: %d completed, %d failed, depth %d (now %d); want 0, 1, 1 (0)", completed, failed, got.Depth[59], st.trends["q"].depth)
	}
}
