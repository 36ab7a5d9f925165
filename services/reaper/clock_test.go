package reaper_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// These tests move the reaper's clock instead of waiting: an hour-long
// lease or deadline passes at once, and nothing happens before the clock
// says so.

// clocked is a reaper on a fake clock, whose leader's steps the test
// follows.
type clocked struct {
	t *testing.T
	r *reaper.Reaper
	c *clock.Fake

	mu      sync.Mutex
	last    time.Time // the clock's time before the last step
	stepped chan struct{}
}

func (h *harness) clocked(set func(c *reaper.Config)) *clocked {
	h.t.Helper()
	k := h.clockedOn(reaper.Knobs{Clock: clock.NewFake(time.Now())}, testLogger(h.t), set)
	waitLeader(h.t, k.r)
	return k
}

// clockedOn is clocked on kn.Clock (a *clock.Fake, which several reapers
// may share) with its own logger.
func (h *harness) clockedOn(kn reaper.Knobs, log *slog.Logger, set func(c *reaper.Config)) *clocked {
	h.t.Helper()
	k := &clocked{t: h.t, c: kn.Clock.(*clock.Fake), stepped: make(chan struct{})}
	k.r = reaper.NewWith(h.config(set), kn, h.rst, h.ns.Connect(h.t), log)
	reaper.SetStepHook(k.r, func(at time.Time) {
		k.mu.Lock()
		k.last = at
		close(k.stepped)
		k.stepped = make(chan struct{})
		k.mu.Unlock()
	})
	if err := k.r.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(k.r.Stop)
	return k
}

// settle makes the leader take a step at the clock's time and waits until
// it did: whatever was due by then is done.
func (k *clocked) settle() {
	k.t.Helper()
	target := k.c.Now()
	reaper.Kick(k.r)
	for {
		k.mu.Lock()
		done, stepped := !k.last.Before(target), k.stepped
		k.mu.Unlock()
		if done {
			return
		}
		select {
		case <-stepped:
		case <-time.After(20 * time.Second):
			k.t.Fatal("the leader took no step")
		}
	}
}

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

// A worker silent for the timeout on the reaper's clock is lost and its
// runs taken back; heard again before, it is not.
func TestSilentWorkerIsLostOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	k := h.clocked(func(c *reaper.Config) { c.WorkerTimeout = 10 * time.Second })
	r, c := k.r, k.c
	f := h.fake()
	f.register()
	h.flush()
	eventually(t, 10*time.Second, "the worker registered", func() bool { _, ok := h.worker(f.id); return ok })
	run := h.claimed(f.id, 1, 3, time.Hour)[0]
	f.beat(false, run.ID)
	h.flush()
	settled(t, r, "the heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 })

	c.Advance(9 * time.Second) // within the timeout: a flush, no death
	k.settle()
	f.beat(false, run.ID)
	h.flush()
	settled(t, r, "the second heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 2 })
	c.Advance(9 * time.Second) // 18 s since the first beat, 9 s since the last
	k.settle()
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

// A NATS outage is not death, however long it lasts on the reaper's
// clock: after the reconnect every worker has one full timeout to be
// heard, and one silent past it is lost.
func TestNATSOutageIsNotDeath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const timeout = 10 * time.Second
	k := h.clocked(func(c *reaper.Config) { c.WorkerTimeout = timeout })
	r, c := k.r, k.c
	f := h.fake()
	f.register()
	h.flush()
	eventually(t, 10*time.Second, "the worker registered", func() bool { _, ok := h.worker(f.id); return ok })
	run := h.claimed(f.id, 1, 3, time.Hour)[0]
	f.beat(false, run.ID)
	h.flush()
	settled(t, r, "the heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 && s.NATSUp })

	h.ns.Stop()
	settled(t, r, "the outage seen", func(s reaper.Stats) bool { return !s.NATSUp })
	c.Advance(4 * timeout)
	k.settle()
	h.ns.Restart(t)
	eventually(t, 20*time.Second, "the reconnect seen", func() bool { return r.Stats().NATSUp })

	c.Advance(timeout - time.Second) // silent since before the outage, within a timeout of the reconnect
	k.settle()
	if st := r.Stats(); st.WorkersLost != 0 {
		t.Fatalf("a worker was lost to the outage: %+v", st)
	}
	if w, _ := h.worker(f.id); w.Status != store.WorkerOnline {
		t.Fatalf("worker is %s after the outage", w.Status)
	}
	if got := h.run(run.ID); got.Status != store.StatusRunning || got.Attempts != 1 {
		t.Fatalf("run after the outage: %s attempts %d", got.Status, got.Attempts)
	}
	c.Advance(2 * time.Second)
	settled(t, r, "the silent worker lost", func(s reaper.Stats) bool { return s.WorkersLost == 1 })
}
