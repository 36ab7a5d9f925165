package reaper_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testlog"
)

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

// flushStatements is what a flush costs: one transaction of BEGIN, the
// leader's fence (store.Fenced), the heartbeats, the leases and COMMIT.
const flushStatements = 5

// The heartbeats of many workers, and the leases of the runs they hold,
// cost two statements per flush (in one fenced transaction), not one per
// worker.
func TestHeartbeatsOfManyWorkersTakeTwoStatementsPerFlush(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 40
	fakes := make([]*fake, n)
	runs := make([][]store.ClaimedRun, n)
	for i := range fakes {
		fakes[i] = h.fake()
		runs[i] = h.claimed(fakes[i].id, 1, 0, 30*time.Second)
	}
	type flush struct {
		workers int
		stmts   int64
	}
	flushes := make(chan flush, 1000)
	r := h.reaper(reaper.Knobs{}, func(c *reaper.Config) { c.FlushInterval, c.WorkerTimeout = 100*time.Millisecond, 10*time.Second }, func(workers int) {
		flushes <- flush{workers, h.stmts.Load()}
	})
	waitLeader(t, r)
	for _, f := range fakes {
		f.register()
	}
	h.flush()
	var stops []func() time.Time
	for i, f := range fakes {
		stops = append(stops, f.beatEvery(50*time.Millisecond, runs[i][0].ID))
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	// Once the leader has read its backlog (the next lease expiry and
	// deadline, right after its first flush), and from the first flush that
	// wrote every worker (all registered by then), count the statements
	// between consecutive flushes.
	eventually(t, 10*time.Second, "backlog read", func() bool {
		st := r.Stats()
		return st.LeaseQueries >= 1 && st.DeadlineQueries >= 1
	})
	for len(flushes) > 0 {
		<-flushes
	}
	var first flush
	for first.workers != n {
		select {
		case first = <-flushes:
		case <-time.After(10 * time.Second):
			t.Fatalf("no flush wrote all %d workers", n)
		}
	}
	prev, total := first, 0
	for i := 0; i < 10; i++ {
		var f flush
		select {
		case f = <-flushes:
		case <-time.After(5 * time.Second):
			t.Fatal("flushes stopped")
		}
		// One transaction: BEGIN, the leader's fence, the heartbeats, the
		// leases, COMMIT.
		if d := f.stmts - prev.stmts; d != flushStatements {
			t.Fatalf("flush %d wrote %d workers with %d statements, want %d", i, f.workers, d, flushStatements)
		}
		if f.workers < 2 {
			t.Fatalf("flush %d wrote %d workers: nothing is batched", i, f.workers)
		}
		total += f.workers
		prev = f
	}
	t.Logf("10 flushes wrote %d heartbeats of %d workers with %d statements", total, n, 10*flushStatements)
	// What the flushes wrote: every heartbeat and every lease moved on.
	ctx := context.Background()
	for i, f := range fakes {
		w, ok := h.worker(f.id)
		if !ok || w.Status != store.WorkerOnline || !w.LastHeartbeatAt.After(w.RegisteredAt) {
			t.Fatalf("worker %d: %+v", i, w)
		}
		run, err := h.st.RunsGet(ctx, "default", runs[i][0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.LeaseExpiresAt == nil || !run.LeaseExpiresAt.After(*runs[i][0].LeaseExpiresAt) {
			t.Fatalf("run %d: lease %v not extended past the claim's %v", i, run.LeaseExpiresAt, runs[i][0].LeaseExpiresAt)
		}
	}
	if st := r.Stats(); st.WorkersLost != 0 || st.Registered != n {
		t.Fatalf("stats: %+v", st)
	}
}

// A worker that stops heartbeating is marked OFFLINE once the timeout has
// passed on the reaper's clock, not before, and every run it held is
// recovered at once: retried while attempts remain, failed when they are
// exhausted. Heard again, it registers afresh.
func TestSilentWorkerIsMarkedOfflineAndItsRunsRecovered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const timeout = 10 * time.Second
	f := h.fake()
	retried := h.claimed(f.id, 1, 0, time.Hour)[0]
	exhausted := h.claimed(f.id, 1, 1, time.Hour)[0]
	k := h.clocked(func(c *reaper.Config) { c.WorkerTimeout = timeout })
	r, c := k.r, k.c
	f.register()
	h.flush()
	eventually(t, 10*time.Second, "the worker registered", func() bool { _, ok := h.worker(f.id); return ok })
	f.beat(false, retried.ID, exhausted.ID)
	h.flush()
	settled(t, r, "the heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 })
	k.settle()

	c.Advance(timeout - time.Second)
	k.settle()
	if st := r.Stats(); st.WorkersLost != 0 || h.run(retried.ID).Status != store.StatusRunning {
		t.Fatalf("a second before the timeout: %+v, run %s", st, h.run(retried.ID).Status)
	}
	c.Advance(2 * time.Second)
	settled(t, r, "one worker lost, one run retried, one failed, no lease expired", func(st reaper.Stats) bool {
		return st.WorkersLost == 1 && st.RunsRetried == 1 && st.RunsFailed == 1 && st.LeasesExpired == 0
	})
	w, _ := h.worker(f.id)
	if w.Status != store.WorkerOffline || w.DeregisteredAt != nil {
		t.Fatalf("silent worker: %s, deregistered %v; want OFFLINE without a deregistration", w.Status, w.DeregisteredAt)
	}
	a := h.run(retried.ID)
	if a.Status != store.StatusPending || a.Attempts != 2 || a.LockedBy != nil || a.AvailableAt == nil || !strings.Contains(a.Error, "lost") {
		t.Fatalf("run with attempts left: %s attempts %d locked %v available %v error %q", a.Status, a.Attempts, a.LockedBy, a.AvailableAt, a.Error)
	}
	b := h.run(exhausted.ID)
	if b.Status != store.StatusFailed || b.Attempts != 1 || b.FinishedAt == nil || !strings.Contains(b.Error, "lost") {
		t.Fatalf("exhausted run: %s attempts %d error %q", b.Status, b.Attempts, b.Error)
	}

	// It comes back without registering: its next heartbeat registers it
	// again, with what it registered before; its lost run stays lost.
	f.beat(false, retried.ID)
	h.flush()
	eventually(t, 5*time.Second, "worker registered again", func() bool {
		w, _ := h.worker(f.id)
		return w.Status == store.WorkerOnline
	})
	w, _ = h.worker(f.id)
	if w.Hostname != "fake" || len(w.Types) != 1 || w.Types[0].Type != "T" || w.MaxConcurrency != 4 {
		t.Fatalf("re-registered worker lost its registration: %+v", w)
	}
	if a := h.run(retried.ID); a.Status != store.StatusPending || a.LockedBy != nil {
		t.Fatalf("the returning worker got its lost run back: %s locked by %v", a.Status, a.LockedBy)
	}
}

// A deregistering worker is OFFLINE with its deregistration time, and
// nothing of it is recovered.
func TestDeregisterRecoversNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	f := h.fake()
	held := h.claimed(f.id, 1, 0, time.Hour)[0]
	const timeout = 10 * time.Second
	k := h.clocked(func(c *reaper.Config) { c.WorkerTimeout, c.FlushInterval = timeout, time.Second })
	r, c := k.r, k.c
	f.register()
	f.beat(false, held.ID)
	h.flush()
	eventually(t, 5*time.Second, "worker registered", func() bool {
		_, ok := h.worker(f.id)
		return ok
	})
	settled(t, r, "the first heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 })
	c.Advance(time.Second) // heartbeats are apart in time
	k.settle()
	f.beat(true, held.ID)
	h.flush()
	settled(t, r, "the draining heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 2 })
	c.Advance(2 * time.Second) // a flush is due
	k.settle()
	if w, _ := h.worker(f.id); w.Status != store.WorkerDraining {
		t.Fatalf("worker is %s after its draining heartbeat was flushed, want DRAINING", w.Status)
	}
	f.deregister()
	h.flush()
	eventually(t, 5*time.Second, "worker deregistered", func() bool {
		w, _ := h.worker(f.id)
		return w.Status == store.WorkerOffline && w.DeregisteredAt != nil
	})
	// Well past the timeout, the run it (wrongly) still holds is untouched:
	// only its lease expiry may take it back.
	settled(t, r, "the deregistration counted", func(s reaper.Stats) bool { return s.Deregistered == 1 })
	c.Advance(2 * timeout)
	k.settle()
	if run := h.run(held.ID); run.Status != store.StatusRunning || run.Attempts != 1 {
		t.Fatalf("run of a deregistered worker: %s attempts %d", run.Status, run.Attempts)
	}
	if st := r.Stats(); st.WorkersLost != 0 || st.RunsRetried+st.RunsFailed != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// Malformed messages on the liveness subjects are counted and dropped;
// what follows is served.
func TestMalformedLivenessMessagesAreDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.reaper(reaper.Knobs{}, nil, nil)
	waitLeader(t, r)
	bad := []struct{ subject, data string }{
		{protocol.SubjectWorkerRegister("default"), `{"v":1,"worker_id":"not-a-uuid"}`},
		{protocol.SubjectWorkerRegister("default"), `{"v":1,"worker_id":"0190a0a0-0000-7000-8000-000000000001","ns":"default","queue":"q","types":[],"max_concurrency":1}`},
		{protocol.SubjectWorkerHeartbeat("default"), `{"v":1,"worker_id":"0190a0a0-0000-7000-8000-000000000001","ns":"default","queue":"q"}`},
		{protocol.SubjectWorkerHeartbeat("default"), `garbage`},
		{protocol.SubjectWorkerDeregister("default"), `{"v":2,"worker_id":"0190a0a0-0000-7000-8000-000000000001","ns":"default"}`},
		{protocol.SubjectWorkerDeregister("default"), `{"v":1,"worker_id":"0190a0a0-0000-7000-8000-000000000001","ns":"default","extra":1}`},
	}
	// Well-formed, but naming another namespace than their subject's: NATS
	// permissions let a worker publish on its own namespace's subjects only.
	other := uuid.New()
	for _, m := range []struct {
		subject string
		msg     protocol.Message
	}{
		{protocol.SubjectWorkerRegister("default"), &protocol.WorkerRegister{WorkerID: other, Namespace: "other", Queue: "q",
			Hostname: "h", PID: 1, Types: []protocol.TypeVersion{{Type: "T"}}, MaxConcurrency: 1}},
		{protocol.SubjectWorkerHeartbeat("default"), &protocol.Heartbeat{WorkerID: other, Namespace: "other", Queue: "q", SentAt: time.Now().UTC()}},
		{protocol.SubjectWorkerDeregister("default"), &protocol.WorkerDeregister{WorkerID: other, Namespace: "other"}},
	} {
		data, err := protocol.Encode(m.msg)
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, struct{ subject, data string }{m.subject, string(data)})
	}
	for _, m := range bad {
		if err := h.pub.Publish(m.subject, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	f := h.fake()
	f.register()
	h.flush()
	eventually(t, 5*time.Second, "valid registration after the malformed ones", func() bool {
		_, ok := h.worker(f.id)
		return ok
	})
	st := r.Stats()
	if st.Malformed != int64(len(bad)) || st.Registers != 1 || st.Heartbeats != 0 || st.Deregisters != 0 {
		t.Fatalf("stats: %+v; want %d malformed and only the valid registration", st, len(bad))
	}
	if st.Workers != 1 {
		t.Fatalf("%d workers tracked, want 1", st.Workers)
	}
}

// Liveness messages NATS dropped are missed heartbeats, not absent ones:
// like a reconnect, the drop gives every worker a full timeout to be heard
// again. A worker silent since before the drop is marked OFFLINE one
// timeout after the drop, not one timeout after it was last heard.
func TestDroppedHeartbeatsAreNotDeath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const timeout = 10 * time.Second
	// The liveness handler logs a malformed message: it is held there while
	// messages pile up behind it.
	st := testlog.NewStall(t, "dropping malformed message")
	c := clock.NewFake(time.Now())
	k := h.clockedOn(reaper.Knobs{PendingLimit: 1, Clock: c}, slog.New(st), func(c *reaper.Config) { c.WorkerTimeout = timeout })
	t.Cleanup(st.Release)
	r := k.r
	waitLeader(t, r)
	w := h.fake()
	w.register()
	w.beat(false)
	h.flush()
	settled(t, r, "the heartbeat heard", func(s reaper.Stats) bool { return s.Heartbeats >= 1 })
	k.settle()
	heard := c.Now()
	eventually(t, 5*time.Second, "worker registered", func() bool {
		_, ok := h.worker(w.id)
		return ok
	})
	// Half a timeout later, hold the liveness handler and drop a heartbeat
	// (of another worker: any liveness message may have been w's).
	c.Advance(timeout / 2)
	k.settle()
	if err := h.pub.Publish(protocol.SubjectWorkerHeartbeat("default"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	h.flush()
	<-st.Entered()
	other := h.fake()
	dropped := c.Now()
	other.beat(false) // waits in the channel
	other.beat(false) // dropped
	h.flush()
	settled(t, r, "the drop seen", func(s reaper.Stats) bool { return s.Drops > 0 })

	// A timeout after it was last heard, but not after the drop: alive.
	c.Set(heard.Add(timeout + time.Second))
	k.settle()
	if s, _ := h.worker(w.id); s.Status != store.WorkerOnline || r.Stats().WorkersLost != 0 {
		t.Fatalf("worker %s %v after it was last heard and %v after the drop, want ONLINE until a timeout (%v) after the drop",
			s.Status, c.Now().Sub(heard), c.Now().Sub(dropped), timeout)
	}
	c.Set(dropped.Add(timeout + time.Second))
	settled(t, r, "the silent worker lost", func(s reaper.Stats) bool { return s.WorkersLost == 1 })
	if s, _ := h.worker(w.id); s.Status != store.WorkerOffline {
		t.Fatalf("lost worker is %s, want OFFLINE", s.Status)
	}
}
