package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/internal/reaper"
	"github.com/kagzi/kagzi/pkg/store"
)

// These tests move the reaper's clock instead of waiting: an hour-long
// lease or deadline passes at once, and nothing happens before the clock
// says so.

// armed waits until the reaper armed a timer on c for later than the
// clock's time: the leader has served what was due and read what it
// waits for next. It returns the earliest.
func armed(t *testing.T, c *clock.Fake) time.Time {
	t.Helper()
	for {
		changed := c.Changed()
		if a := c.Armed(); len(a) > 0 && a[0].After(c.Now()) {
			return a[0]
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatal("the reaper armed no timer")
		}
	}
}

// A lease nobody extends expires when the reaper's clock passes it, not
// before, and the run is claimable again.
func TestLeaseExpiresOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.claimed(uuid.New(), 1, 3, time.Hour)[0] // a worker the reaper does not track
	c := clock.NewFake(time.Now())
	r := h.reaper(reaper.Config{Clock: c}, nil)
	waitLeader(t, r)
	armed(t, c)
	c.Set(run.LeaseExpiresAt.Add(-time.Second))
	armed(t, c)
	if st := r.Stats(); st.LeasesExpired != 0 || h.run(run.ID).Status != store.StatusRunning {
		t.Fatalf("before the lease's end: %d expired, run %s", st.LeasesExpired, h.run(run.ID).Status)
	}
	c.Set(run.LeaseExpiresAt.Add(time.Second))
	settled(t, r, "the lease expired", func(s reaper.Stats) bool { return s.LeasesExpired == 1 })
	if got := h.run(run.ID); got.Status != store.StatusPending || got.LockedBy != nil {
		t.Fatalf("after its lease expired: run %s locked by %v, want PENDING and unlocked", got.Status, got.LockedBy)
	}
}

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
	c := clock.NewFake(time.Now())
	r := h.reaper(reaper.Config{Clock: c}, nil)
	waitLeader(t, r)
	armed(t, c)
	c.Set(deadline.Add(-time.Second))
	armed(t, c)
	if st := r.Stats(); st.DeadlinesMissed != 0 || h.run(created.ID).Status != store.StatusPending {
		t.Fatalf("a second before the deadline: %d missed, run %s", st.DeadlinesMissed, h.run(created.ID).Status)
	}
	c.Set(deadline.Add(time.Second))
	settled(t, r, "the deadline missed", func(s reaper.Stats) bool { return s.DeadlinesMissed == 1 })
	if got := h.run(created.ID); got.Status != store.StatusFailed {
		t.Fatalf("past its deadline: run %s, want FAILED", got.Status)
	}
}

// A worker silent for the timeout on the reaper's clock is lost and its
// runs taken back; heard again before, it is not.
func TestSilentWorkerIsLostOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := clock.NewFake(time.Now())
	r := h.reaper(reaper.Config{Clock: c, WorkerTimeout: 10 * time.Second}, nil)
	waitLeader(t, r)
	f := h.fake()
	f.register()
	h.flush()
	eventually(t, 10*time.Second, "the worker registered", func() bool { _, ok := h.worker(f.id); return ok })
	run := h.claimed(f.id, 1, 3, time.Hour)[0]
	f.beat(false, run.ID)
	h.flush()
	settled(t, r, "the heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 })

	c.Advance(9 * time.Second) // within the timeout: a flush, no death
	f.beat(false, run.ID)
	h.flush()
	settled(t, r, "the second heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 2 })
	c.Advance(9 * time.Second) // 18 s since the first beat, 9 s since the last
	armed(t, c)
	if st := r.Stats(); st.WorkersLost != 0 {
		t.Fatalf("a worker heard 9 s ago on a 10 s timeout was lost: %+v", st)
	}

	c.Advance(2 * time.Second) // 11 s of silence
	settled(t, r, "the worker lost", func(s reaper.Stats) bool { return s.WorkersLost == 1 })
	eventually(t, 10*time.Second, "its run taken back", func() bool { return h.run(run.ID).Status != store.StatusRunning })
	if w, _ := h.worker(f.id); w.Status != "OFFLINE" {
		t.Fatalf("lost worker is %s, want OFFLINE", w.Status)
	}
}
