package reaper_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

const day = 24 * time.Hour

// finish makes a run of typ in namespace "default" with steps completed
// steps and an event, ended in status (COMPLETED or FAILED); p may set
// the id and external id.
func (h *harness) finish(p store.RunsCreateParams, status store.RunStatus, steps int) store.Run {
	h.t.Helper()
	ctx := context.Background()
	p.Namespace, p.Queue = "default", "q"
	if p.Type == "" {
		p.Type = "T"
	}
	if p.Input == nil {
		p.Input = []byte(`null`)
	}
	run, _, err := h.st.RunsCreate(ctx, p)
	if err != nil {
		h.t.Fatal(err)
	}
	l := h.claimOnly(run)
	for i := 0; i < steps; i++ {
		if err := h.st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: fmt.Sprintf("s%d", i), Attempt: 1,
			Kind: store.StepFunction, Status: store.StepCompleted, Output: fmt.Appendf(nil, `"memo-%d"`, i)}); err != nil {
			h.t.Fatal(err)
		}
	}
	if _, err := h.st.EventsSend(ctx, store.EventsSendParams{Namespace: "default", RunID: run.ID, Name: "ping", Payload: []byte(`1`)}); err != nil {
		h.t.Fatal(err)
	}
	if status == store.StatusFailed {
		err = h.st.RunsFail(ctx, l, "boom")
	} else {
		err = h.st.RunsComplete(ctx, l, []byte(`"done"`))
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return h.run(run.ID)
}

// claimOnly claims run (and only it: the others claimed on the way are
// released) and returns its lease.
func (h *harness) claimOnly(run store.Run) store.Lease {
	h.t.Helper()
	ctx := context.Background()
	got, err := h.st.RunsClaim(ctx, store.RunsClaimParams{Namespace: run.Namespace, Queue: run.Queue, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: run.Type}}, Limit: 100, Lease: time.Hour})
	if err != nil {
		h.t.Fatal(err)
	}
	var out *store.Lease
	for _, c := range got {
		l := store.Lease{Namespace: c.Namespace, RunID: c.ID, Token: c.LeaseToken}
		if c.ID == run.ID {
			out = &l
		} else if err := h.st.RunsRelease(ctx, l); err != nil {
			h.t.Fatal(err)
		}
	}
	if out == nil {
		h.t.Fatalf("run %s not claimable", run.ID)
	}
	return *out
}

// stored tells whether run id is stored, failing the test if it is only
// partly: its row without its steps or payload, or the other way round.
func (h *harness) stored(id uuid.UUID, steps int) bool {
	h.t.Helper()
	ctx := context.Background()
	run, err := h.st.RunsGet(ctx, "default", id)
	if err != nil {
		o, oerr := h.st.RunsOrphans(ctx)
		if oerr != nil || o != (store.Orphans{}) {
			h.t.Fatalf("run %s is gone, leaving rows behind: %+v %v", id, o, oerr)
		}
		return false
	}
	got, err := h.st.StepsList(ctx, "default", id)
	if err != nil || len(got) != steps || run.Input == nil {
		h.t.Fatalf("run %s is partly there: %d steps (want %d), input %q, %v", id, len(got), steps, run.Input, err)
	}
	if evs, err := h.st.EventsList(ctx, "default", id); err != nil || len(evs) != 1 {
		h.t.Fatalf("run %s is partly there: events %v %v", id, evs, err)
	}
	return true
}

func (h *harness) noOrphans() {
	h.t.Helper()
	o, err := h.st.RunsOrphans(context.Background())
	if err != nil || o != (store.Orphans{}) {
		h.t.Fatalf("rows without their run: %+v %v", o, err)
	}
}

// The leader deletes a finished run when the clock passes its expiry,
// not before; between two expiries it reads nothing, short of its hourly
// look (a policy may have changed).
func TestRetentionDeletesOnTheClock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	done := h.finish(store.RunsCreateParams{}, store.StatusCompleted, 2)
	failed := h.finish(store.RunsCreateParams{}, store.StatusFailed, 1)
	k := h.clocked(nil)
	r, c := k.r, k.c
	k.settle()
	expires := done.FinishedAt.Add(store.DefaultKeepCompleted)
	st := r.Stats()
	if st.NextExpiry == nil || !st.NextExpiry.Equal(expires) || st.OldestFinished == nil || !st.OldestFinished.Equal(*done.FinishedAt) {
		t.Fatalf("leader read next expiry %v, oldest %v; want %v, %v", st.NextExpiry, st.OldestFinished, expires, done.FinishedAt)
	}
	reads := st.RetentionQueries

	// Half an hour on: no statement about retention.
	c.Advance(30 * time.Minute)
	k.settle()
	if st := r.Stats(); st.RetentionQueries != reads || st.RetentionBatches != 0 {
		t.Fatalf("half an hour on: %d reads, %d batches; want %d, 0", st.RetentionQueries, st.RetentionBatches, reads)
	}
	// The hourly look.
	c.Advance(31 * time.Minute)
	k.settle()
	if st := r.Stats(); st.RetentionQueries != reads+1 {
		t.Fatalf("an hour on: %d reads, want %d", st.RetentionQueries, reads+1)
	}

	c.Set(expires.Add(-time.Second))
	k.settle()
	if st := r.Stats(); st.RunsDeleted != 0 || !h.stored(done.ID, 2) {
		t.Fatalf("a second before its expiry: %d deleted", st.RunsDeleted)
	}
	c.Set(expires.Add(time.Second))
	next := failed.FinishedAt.Add(store.DefaultKeepFailed)
	settled(t, r, "the completed run deleted, the failed run's expiry next", func(s reaper.Stats) bool {
		return s.RunsDeleted == 1 && s.NextExpiry != nil && s.NextExpiry.Equal(next)
	})
	if h.stored(done.ID, 2) || !h.stored(failed.ID, 1) {
		t.Fatal("after a week: want the completed run gone, the failed one kept")
	}
	c.Set(failed.FinishedAt.Add(store.DefaultKeepFailed + time.Second))
	settled(t, r, "the failed run deleted, nothing left", func(s reaper.Stats) bool {
		return s.RunsDeleted == 2 && s.NextExpiry == nil && s.OldestFinished == nil
	})
	if h.stored(failed.ID, 1) {
		t.Fatal("after 30 days: the failed run is there")
	}
	h.noOrphans()
}

// A backlog goes a batch per transaction, the next one a pause later.
func TestRetentionBatchesAreBoundedAndPaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	finished := time.Now()
	if _, err := h.st.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "default", Queue: "q", Type: "T",
		Count: 8, Before: finished}); err != nil {
		t.Fatal(err)
	}
	const pause = 5 * time.Second
	k := h.clocked(func(c *reaper.Config) { c.RetentionBatch, c.RetentionPause = 3, pause })
	r, c := k.r, k.c
	c.Set(finished.Add(store.DefaultKeepCompleted + time.Minute))
	for i, want := range []int64{3, 6, 8} {
		k.settle()
		if st := r.Stats(); st.RunsDeleted != want || st.RetentionBatches != int64(i+1) {
			t.Fatalf("step %d: %d runs deleted in %d batches, want %d in %d", i, st.RunsDeleted, st.RetentionBatches, want, i+1)
		}
		// Nothing more before the pause is over.
		c.Advance(pause - time.Millisecond)
		k.settle()
		if st := r.Stats(); st.RunsDeleted != want {
			t.Fatalf("within the pause after batch %d: %d deleted, want %d", i, st.RunsDeleted, want)
		}
		c.Advance(time.Millisecond)
	}
	k.settle()
	if st := r.Stats(); st.RetentionBatches != 3 || st.NextExpiry != nil {
		t.Fatalf("backlog done: %d batches, next %v", st.RetentionBatches, st.NextExpiry)
	}
	h.noOrphans()
}

// What the leader never deletes, whatever the clock: live runs, a finished
// child of a parent that has not finished, runs a policy keeps for ever;
// and what a type's policy and the failed runs' period make it delete.
func TestRetentionPoliciesThroughTheReaper(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	live, _, err := h.st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	parent, _, err := h.st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "P"})
	if err != nil {
		t.Fatal(err)
	}
	pl := h.claimOnly(parent)
	child := uuid.NewSHA1(parent.ID, []byte("c"))
	if err := h.st.RunsStartChild(ctx, store.RunsStartChildParams{Lease: pl, StepID: "c", Attempt: 1, ChildRunID: child, Type: "C"}); err != nil {
		t.Fatal(err)
	}
	cl := h.claimOnly(h.run(child))
	if err := h.st.RunsComplete(ctx, cl, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	keep, short := time.Duration(0), 2*time.Hour
	if _, err := h.st.RetentionSet(ctx, store.RetentionSetParams{Namespace: "default", Type: "Kept", KeepCompleted: &keep, KeepFailed: &keep}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.RetentionSet(ctx, store.RetentionSetParams{Namespace: "default", Type: "Short", KeepCompleted: &short}); err != nil {
		t.Fatal(err)
	}
	kept := h.finish(store.RunsCreateParams{Type: "Kept"}, store.StatusCompleted, 1)
	shortDone := h.finish(store.RunsCreateParams{Type: "Short"}, store.StatusCompleted, 1)
	shortFailed := h.finish(store.RunsCreateParams{Type: "Short"}, store.StatusFailed, 1)

	k := h.clocked(nil)
	r, c := k.r, k.c
	c.Advance(3 * time.Hour)
	settled(t, r, "the Short type's completed run deleted", func(s reaper.Stats) bool { return s.RunsDeleted == 1 })
	if h.stored(shortDone.ID, 1) || !h.stored(shortFailed.ID, 1) {
		t.Fatal("after 3 hours: want Short's completed run gone, its failed one kept (30 days)")
	}
	c.Advance(31 * day)
	settled(t, r, "the Short type's failed run deleted", func(s reaper.Stats) bool { return s.RunsDeleted == 2 })
	c.Advance(1000 * day)
	k.settle()
	if st := r.Stats(); st.RunsDeleted != 2 || st.NextExpiry != nil {
		t.Fatalf("1000 days on: %d deleted, next %v; want 2 and none", st.RunsDeleted, st.NextExpiry)
	}
	if !h.stored(kept.ID, 1) {
		t.Fatal("a run its policy keeps for ever is gone")
	}
	for _, id := range []uuid.UUID{live.ID, parent.ID, child} {
		if _, err := h.st.RunsGet(ctx, "default", id); err != nil {
			t.Fatalf("run %s (live, or a child of a live parent): %v", id, err)
		}
	}
	// The parent ends (its lease expired on the way: it is PENDING): the
	// child goes with it, at the next look.
	if _, err := h.st.RunsTerminate(ctx, "default", parent.ID, "done"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	settled(t, r, "parent and child deleted", func(s reaper.Stats) bool { return s.RunsDeleted == 4 })
	h.noOrphans()
}

// The DBOS #769 case through the reaper: the session of the leader's
// batch is killed after its deletion and before its commit. Every run is
// left whole; the leader tries again and deletes them whole; and a run
// started afterwards with the same id and external id starts from
// nothing.
func TestRetentionKilledBatchLeavesNoPartialRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 5
	var runs []store.Run
	for i := 0; i < n; i++ {
		runs = append(runs, h.finish(store.RunsCreateParams{RunID: uuid.Must(uuid.NewV7()), ExternalID: fmt.Sprintf("order-%d", i),
			Input: []byte(`"first"`)}, store.StatusCompleted, 3))
	}
	var kills atomic.Int32
	k := h.clockedWith(nil, func(r *reaper.Reaper) {
		reaper.SetRetentionHook(r, func(ctx context.Context, tx *store.Store) {
			if kills.Add(1) != 1 {
				return
			}
			pid, err := tx.SessionPID(ctx)
			if err == nil {
				_, err = h.st.SessionTerminate(context.Background(), pid)
			}
			if err != nil {
				t.Errorf("kill the batch's session: %v", err)
			}
		})
	})
	r, c := k.r, k.c
	c.Set(runs[n-1].FinishedAt.Add(store.DefaultKeepCompleted + time.Second))
	k.settle()
	if got := kills.Load(); got != 1 {
		t.Fatalf("%d batches reached their commit, want the one killed", got)
	}
	if st := r.Stats(); st.RunsDeleted != 0 || st.Errors == 0 {
		t.Fatalf("after the kill: %d deleted, %d errors", st.RunsDeleted, st.Errors)
	}
	for _, run := range runs {
		if !h.stored(run.ID, 3) {
			t.Fatalf("run %s gone with a killed batch", run.ID)
		}
	}
	h.noOrphans()

	c.Advance(2 * time.Second) // past the retry's wait
	settled(t, r, "the batch retried", func(s reaper.Stats) bool { return s.RunsDeleted == n })
	for _, run := range runs {
		if h.stored(run.ID, 3) {
			t.Fatalf("run %s still there", run.ID)
		}
	}
	h.noOrphans()
	for i, run := range runs {
		again, created, err := h.st.RunsCreate(ctx, store.RunsCreateParams{RunID: run.ID, Namespace: "default", Queue: "q", Type: "T",
			ExternalID: fmt.Sprintf("order-%d", i), Input: []byte(`"second"`)})
		if err != nil || !created {
			t.Fatalf("start %s again: created %v, %v", run.ID, created, err)
		}
		got, err := h.st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "q", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
		if err != nil || len(got) != 1 || got[0].ID != again.ID {
			t.Fatalf("claim %s: %v %v", again.ID, got, err)
		}
		if len(got[0].Steps) != 0 || string(got[0].Input) != `"second"` {
			t.Fatalf("run %s started again replays %d steps, input %s; want a fresh run", run.ID, len(got[0].Steps), got[0].Input)
		}
		if err := h.st.RunsComplete(ctx, store.Lease{Namespace: "default", RunID: again.ID, Token: got[0].LeaseToken}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// clockedWith is clocked with setup called on the reaper before it starts
// (to set test hooks).
func (h *harness) clockedWith(set func(c *reaper.Config), setup func(*reaper.Reaper)) *clocked {
	h.t.Helper()
	c := clock.NewFake(time.Now())
	k := &clocked{t: h.t, c: c, stepped: make(chan struct{})}
	k.r = reaper.NewWith(h.config(set), reaper.Knobs{Clock: c}, h.rst, h.ns.Connect(h.t), testLogger(h.t))
	reaper.SetStepHook(k.r, func(at time.Time) {
		k.mu.Lock()
		k.last = at
		close(k.stepped)
		k.stepped = make(chan struct{})
		k.mu.Unlock()
	})
	setup(k.r)
	if err := k.r.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(k.r.Stop)
	waitLeader(h.t, k.r)
	return k
}

// Runs expiring one after the other (they finished a few milliseconds
// apart, as runs do all the time) go together: after a batch, the next
// waits a second, not for the next expiry a millisecond on, and then takes
// every run expired by then.
func TestRetentionCoalescesExpiries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var runs []store.Run
	for range 3 {
		runs = append(runs, h.finish(store.RunsCreateParams{}, store.StatusCompleted, 0))
	}
	last := runs[len(runs)-1].FinishedAt
	if !last.After(*runs[0].FinishedAt) {
		t.Fatalf("runs finished at the same instant: %v", last)
	}
	k := h.clocked(nil)
	r, c := k.r, k.c
	k.settle()
	// The first run's expiry: one batch, that run.
	c.Set(runs[0].FinishedAt.Add(store.DefaultKeepCompleted + time.Microsecond))
	settled(t, r, "the first run deleted", func(s reaper.Stats) bool { return s.RunsDeleted == 1 })
	batchAt := c.Now()
	// The others expire within the next second: nothing before it is over.
	c.Set(reaper.Later(last.Add(store.DefaultKeepCompleted), batchAt.Add(500*time.Millisecond)))
	k.settle()
	if st := r.Stats(); st.RunsDeleted != 1 || st.RetentionBatches != 1 {
		t.Fatalf("within a second of the first batch: %d deleted in %d batches, want 1 in 1", st.RunsDeleted, st.RetentionBatches)
	}
	c.Set(reaper.Later(c.Now(), batchAt.Add(time.Second)))
	settled(t, r, "the other two deleted in one batch", func(s reaper.Stats) bool { return s.RunsDeleted == 3 })
	if st := r.Stats(); st.RetentionBatches != 2 {
		t.Fatalf("%d batches, want 2", st.RetentionBatches)
	}
	h.noOrphans()
}
