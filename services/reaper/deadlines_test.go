package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// A run past its deadline fails when the reaper's clock passes the
// deadline.
func TestDeadlineFailsOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	deadline := time.Now().Add(time.Hour)
	created, _, err := h.st.RunsCreate(context.Background(), store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T", DeadlineAt: &deadline})
	if err != nil {
		t.Fatal(err)
	}
	k := h.clocked(nil)
	r, c := k.r, k.c
	c.Set(deadline.Add(-time.Second))
	k.settle()
	if st := r.Stats(); st.DeadlinesMissed != 0 || h.run(created.ID).Status != store.StatusPending {
		t.Fatalf("a second before the deadline: %d missed, run %s", st.DeadlinesMissed, h.run(created.ID).Status)
	}
	c.Set(deadline.Add(time.Second))
	settled(t, r, "the deadline missed", func(s reaper.Stats) bool { return s.DeadlinesMissed == 1 })
	if got := h.run(created.ID); got.Status != store.StatusFailed {
		t.Fatalf("past its deadline: run %s, want FAILED", got.Status)
	}
}
