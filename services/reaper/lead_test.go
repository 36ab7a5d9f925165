package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// Two reapers on one clock: killing the leader's lock connection hands
// leadership to the standby within 2 s, and the new leader gives every
// worker it did not hear one timeout on the clock before it marks it
// OFFLINE.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const timeout = 10 * time.Second
	kn := reaper.Knobs{Clock: clock.NewFake(time.Now())}
	set := func(c *reaper.Config) { c.WorkerTimeout = timeout }
	a, b := h.clockedOn(kn, testLogger(t), set), h.clockedOn(kn, testLogger(t), set)
	c := a.c
	leader, standby := a, b
	if waitLeader(t, a.r, b.r) == b.r {
		leader, standby = b, a
	}
	// A live worker with a run: it must sail through the failover (as must
	// late, registered during it).
	alive := h.fake()
	held := h.claimed(alive.id, 1, 0, time.Hour)[0]
	alive.register()
	h.flush()
	eventually(t, 5*time.Second, "live worker registered", func() bool {
		_, ok := h.worker(alive.id)
		return ok
	})
	// A worker only the database knows (as after a crash of the old
	// leader before it noticed): alive as of the failover, for one timeout.
	ghost, err := h.st.WorkersRegister(context.Background(), store.WorkersRegisterParams{WorkerID: uuid.New(),
		Namespace: "default", Queue: "q", MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	if n, err := h.st.LockHolderTerminate(context.Background(), reaper.LockKey); err != nil || n != 1 {
		t.Fatalf("terminate the leader's session: %d, %v", n, err)
	}
	late := h.fake()
	late.register()
	h.flush()
	took := eventually(t, 2*time.Second, "standby acts", func() bool {
		_, ok := h.worker(late.id)
		return standby.r.IsLeader() && ok
	})
	t.Logf("standby took over and wrote a registration %v after the kill", took.Sub(killed))
	eventually(t, 2*time.Second, "old leader steps down", func() bool { return !leader.r.IsLeader() })
	tookOver := c.Now()

	beat := func(n int64) {
		t.Helper()
		alive.beat(false, held.ID)
		late.beat(false)
		h.flush()
		settled(t, standby.r, "the live worker heard", func(s reaper.Stats) bool { return s.Heartbeats >= n })
		standby.settle()
	}
	beat(2)
	c.Set(tookOver.Add(timeout - time.Second))
	beat(4)
	if w, _ := h.worker(ghost.ID); w.Status != store.WorkerOnline || standby.r.Stats().WorkersLost != 0 {
		t.Fatalf("a worker the new leader never heard is %s a second before one timeout after the failover", w.Status)
	}
	c.Set(tookOver.Add(timeout + time.Second))
	settled(t, standby.r, "the ghost worker lost", func(s reaper.Stats) bool { return s.WorkersLost == 1 })
	if w, _ := h.worker(ghost.ID); w.Status != store.WorkerOffline {
		t.Fatalf("ghost worker is %s one timeout after the failover, want OFFLINE", w.Status)
	}
	if w, _ := h.worker(alive.id); w.Status != store.WorkerOnline {
		t.Fatalf("live worker is %s after the failover", w.Status)
	}
	if run := h.run(held.ID); run.Status != store.StatusRunning || run.Attempts != 1 || run.LockedBy == nil || *run.LockedBy != alive.id {
		t.Fatalf("live worker's run after the failover: %s attempts %d", run.Status, run.Attempts)
	}
	if st := standby.r.Stats(); st.RunsRetried+st.RunsFailed != 0 || st.Terms != 1 {
		t.Fatalf("new leader's stats: %+v", st)
	}
}
