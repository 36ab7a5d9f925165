package reaper_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// A lease nobody extends expires when the reaper's clock passes it, not
// before, and the run is claimable again.
func TestLeaseExpiresOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.claimed(uuid.New(), 1, 3, time.Hour)[0] // a worker the reaper does not track
	k := h.clocked(nil)
	r, c := k.r, k.c
	c.Set(run.LeaseExpiresAt.Add(-time.Second))
	k.settle()
	if st := r.Stats(); st.LeasesExpired != 0 || h.run(run.ID).Status != store.StatusRunning {
		t.Fatalf("before the lease's end: %d expired, run %s", st.LeasesExpired, h.run(run.ID).Status)
	}
	c.Set(run.LeaseExpiresAt.Add(time.Second))
	settled(t, r, "the lease expired", func(s reaper.Stats) bool { return s.LeasesExpired == 1 })
	if got := h.run(run.ID); got.Status != store.StatusPending || got.LockedBy != nil {
		t.Fatalf("after its lease expired: run %s locked by %v, want PENDING and unlocked", got.Status, got.LockedBy)
	}
}
