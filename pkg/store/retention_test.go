package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// ---- helpers ---------------------------------------------------------------

const day = 24 * time.Hour

// claimIn claims run id of type typ in its namespace and queue (releasing
// the others it claims on the way).
func (e *env) claimIn(ns, queue, typ string, id uuid.UUID) store.ClaimedRun {
	e.t.Helper()
	got := e.claim(store.RunsClaimParams{Namespace: ns, Queue: queue, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: typ}}, Limit: 100, Lease: time.Minute})
	var out *store.ClaimedRun
	for i, c := range got {
		if c.ID == id {
			out = &got[i]
		} else if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
			e.t.Fatal(err)
		}
	}
	if out == nil {
		e.t.Fatalf("run %s was not claimable", id)
	}
	return *out
}

// steps records n completed FUNCTION steps (s0, s1, …) under l and sends
// the run an event, so the run has rows in every table that belongs to it.
func (e *env) history(l store.Lease, n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: l, StepID: fmt.Sprintf("s%d", i), Attempt: 1,
			Kind: store.StepFunction, Status: store.StepCompleted, Output: fmt.Appendf(nil, `"memo-%d"`, i)}); err != nil {
			e.t.Fatalf("record step: %v", err)
		}
	}
	if _, err := e.s.EventsSend(e.ctx, store.EventsSendParams{Namespace: l.Namespace, RunID: l.RunID, Name: "ping",
		Payload: []byte(`1`)}); err != nil {
		e.t.Fatalf("send event: %v", err)
	}
}

// finished makes a run of p with n steps and an event, ended in status
// (COMPLETED, FAILED or CANCELLED), and returns it as it is now.
func (e *env) finished(p store.RunsCreateParams, status store.RunStatus, n int) store.Run {
	e.t.Helper()
	r := e.create(p)
	c := e.claimIn(r.Namespace, r.Queue, r.Type, r.ID)
	l := leaseOf(c)
	e.history(l, n)
	var err error
	switch status {
	case store.StatusCompleted:
		err = e.s.RunsComplete(e.ctx, l, []byte(`"done"`))
	case store.StatusFailed:
		err = e.s.RunsFail(e.ctx, l, "boom")
	case store.StatusCancelled:
		_, err = e.s.RunsTerminate(e.ctx, r.Namespace, r.ID, "enough")
	}
	if err != nil {
		e.t.Fatalf("end run %s: %v", status, err)
	}
	got := e.get(r.Namespace, r.ID)
	if got.Status != status || got.FinishedAt == nil {
		e.t.Fatalf("run %s, finished %v; want %s", got.Status, got.FinishedAt, status)
	}
	return got
}

// rows counts what is stored of run id: its run row (which holds its
// payloads), step rows and events.
func (e *env) rows(id uuid.UUID) [3]int {
	e.t.Helper()
	var n [3]int
	err := e.pool.QueryRow(e.ctx, `
SELECT (SELECT count(*) FROM kagzi.workflow_runs WHERE run_id = $1),
	(SELECT count(*) FROM kagzi.step_runs WHERE run_id = $1),
	(SELECT count(*) FROM kagzi.workflow_events WHERE run_id = $1)`, id).Scan(&n[0], &n[1], &n[2])
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// gone fails unless nothing of run id is stored.
func (e *env) gone(id uuid.UUID) {
	e.t.Helper()
	if n := e.rows(id); n != [3]int{} {
		e.t.Fatalf("run %s: %d run, %d step, %d event rows left; want none", id, n[0], n[1], n[2])
	}
}

// whole fails unless run id is stored with steps steps and one event.
func (e *env) whole(id uuid.UUID, steps int) {
	e.t.Helper()
	if n, want := e.rows(id), [3]int{1, steps, 1}; n != want {
		e.t.Fatalf("run %s: %d run, %d step, %d event rows; want %v", id, n[0], n[1], n[2], want)
	}
}

// expire runs one batch of RunsDeleteExpired as of at.
func (e *env) expire(at time.Time, limit int) int64 {
	e.t.Helper()
	n, err := e.s.RunsDeleteExpired(e.ctx, store.RunsDeleteExpiredParams{Now: at, Limit: limit})
	if err != nil {
		e.t.Fatalf("delete expired: %v", err)
	}
	return n
}

func (e *env) noOrphans() {
	e.t.Helper()
	o, err := e.s.RunsOrphans(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if o != (store.Orphans{}) {
		e.t.Fatalf("rows without their run: %+v", o)
	}
}

func dur(d time.Duration) *time.Duration { return &d }

// ---- tests -----------------------------------------------------------------

// Finished runs go with every row of theirs once their period is over
// (completed and cancelled after a week, failed after 30 days); live runs
// and schedule templates never go.
func TestRetentionDeletesExpiredRunsWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	done := e.finished(store.RunsCreateParams{}, store.StatusCompleted, 2)
	cancelled := e.finished(store.RunsCreateParams{}, store.StatusCancelled, 1)
	failed := e.finished(store.RunsCreateParams{}, store.StatusFailed, 3)
	pending := e.create(store.RunsCreateParams{})
	running := e.create(store.RunsCreateParams{Type: "R"})
	rc := e.claimIn("ns", "q", "R", running.ID)
	e.history(leaseOf(rc), 1)
	sleeping := e.create(store.RunsCreateParams{Type: "S"})
	sc := e.claimIn("ns", "q", "S", sleeping.ID)
	e.history(leaseOf(sc), 1)
	if err := e.s.RunsSleep(e.ctx, leaseOf(sc), nil); err != nil {
		t.Fatal(err)
	}
	tpl := e.insertTemplate("ns", "q", "T")
	now := e.dbNow()

	if n := e.expire(now.Add(7*day-time.Minute), 100); n != 0 {
		t.Fatalf("before a week: deleted %d runs", n)
	}
	if n := e.expire(now.Add(7*day+time.Minute), 100); n != 2 {
		t.Fatalf("after a week: deleted %d runs, want 2 (completed, cancelled)", n)
	}
	e.gone(done.ID)
	e.gone(cancelled.ID)
	e.whole(failed.ID, 3)
	if n := e.expire(now.Add(30*day+time.Minute), 100); n != 1 {
		t.Fatalf("after 30 days: deleted %d runs, want the failed one", n)
	}
	e.gone(failed.ID)
	if n := e.expire(now.Add(10000*day), 100); n != 0 {
		t.Fatalf("live runs and templates: deleted %d", n)
	}
	for _, id := range []uuid.UUID{pending.ID, running.ID, sleeping.ID, tpl} {
		if n := e.rows(id); n[0] != 1 {
			t.Fatalf("run %s: rows %v, want it kept", id, n)
		}
	}
	if n := e.rows(running.ID); n[1] != 1 || n[2] != 1 {
		t.Fatalf("running run: rows %v, want its step and event kept", n)
	}
	e.noOrphans()
}

// A finished child stays while its parent has not finished, however old;
// it goes once the parent has (on its own period, before the parent's
// when that is longer). A child whose parent is gone goes too.
func TestRetentionSparesChildrenOfLiveParents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pl := leaseOf(e.claimIn("ns", "q", "P", parent.ID))
	child := e.startChild(pl, "c", `1`)
	cl := leaseOf(e.claimIn("ns", "q", "C", child))
	e.history(cl, 1)
	if err := e.s.RunsComplete(e.ctx, cl, []byte(`"child"`)); err != nil {
		t.Fatal(err)
	}
	now := e.dbNow()
	later := now.Add(365 * day)
	if n := e.expire(later, 100); n != 0 {
		t.Fatalf("child of a running parent: deleted %d runs", n)
	}
	e.whole(child, 1)
	exp, err := e.s.RunsNextExpiry(e.ctx)
	if err != nil || exp.Next != nil || exp.OldestFinished == nil {
		t.Fatalf("next expiry with only a spared child: %+v %v; want no next, an oldest", exp, err)
	}

	// The parent fails: a dead letter kept 30 days, its completed child a
	// week.
	if err := e.s.RunsFail(e.ctx, pl, "boom"); err != nil {
		t.Fatal(err)
	}
	if n := e.expire(now.Add(8*day), 100); n != 1 {
		t.Fatalf("child of a failed parent after a week: deleted %d, want 1", n)
	}
	e.gone(child)
	if n := e.rows(parent.ID); n[0] != 1 || n[1] != 1 {
		t.Fatalf("failed parent: rows %v, want it and its CHILD step kept", n)
	}

	// A child outliving its parent (abandoned) goes once the parent is
	// gone.
	p2 := e.create(store.RunsCreateParams{Type: "P"})
	p2l := leaseOf(e.claimIn("ns", "q", "P", p2.ID))
	orphan := e.startChildWith(p2l, "c", `2`, store.ParentCloseAbandon)
	if err := e.s.RunsComplete(e.ctx, p2l, []byte(`null`)); err != nil {
		t.Fatal(err)
	}
	if n := e.expire(e.dbNow().Add(8*day), 100); n != 1 {
		t.Fatalf("completed parent of a live child: deleted %d, want the parent", n)
	}
	ol := leaseOf(e.claimIn("ns", "q", "C", orphan))
	if err := e.s.RunsComplete(e.ctx, ol, []byte(`"late"`)); err != nil {
		t.Fatal(err)
	}
	if n := e.expire(e.dbNow().Add(8*day), 100); n != 1 {
		t.Fatalf("child whose parent is gone: deleted %d, want 1", n)
	}
	e.gone(orphan)
	e.noOrphans()
}

// A namespace's policy, a type's policy within it and the default each
// apply to their runs; a NULL period inherits; zero keeps for ever.
func TestRetentionPolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := e.ctx
	set := func(p store.RetentionSetParams) store.RetentionPolicy {
		t.Helper()
		pol, err := e.s.RetentionSet(ctx, p)
		if err != nil {
			t.Fatalf("set %+v: %v", p, err)
		}
		return pol
	}
	// Namespace ns2: completed a day, failed inherited (30 days). Type
	// Report in ns: completed 2 hours, failed kept for ever.
	set(store.RetentionSetParams{Namespace: "ns2", KeepCompleted: dur(day)})
	set(store.RetentionSetParams{Namespace: "ns", Type: "Report", KeepCompleted: dur(2 * time.Hour), KeepFailed: dur(0)})

	pols, err := e.s.RetentionList(ctx, "ns")
	if err != nil || len(pols) != 2 || pols[0].Namespace != "" || pols[1].Type != "Report" {
		t.Fatalf("list ns: %+v %v", pols, err)
	}
	if got := store.RetentionFor(pols, "ns", "Report"); got != (store.Retention{KeepCompleted: 2 * time.Hour}) {
		t.Fatalf("ns/Report: %+v", got)
	}
	defaults := store.Retention{KeepCompleted: store.DefaultKeepCompleted, KeepFailed: store.DefaultKeepFailed}
	if got := store.RetentionFor(pols, "ns", "Other"); got != defaults {
		t.Fatalf("ns/Other: %+v", got)
	}
	pols2, _ := e.s.RetentionList(ctx, "ns2")
	if got := store.RetentionFor(pols2, "ns2", ""); got != (store.Retention{KeepCompleted: day, KeepFailed: store.DefaultKeepFailed}) {
		t.Fatalf("ns2: %+v", got)
	}

	report := e.finished(store.RunsCreateParams{Type: "Report"}, store.StatusCompleted, 1)
	reportFailed := e.finished(store.RunsCreateParams{Type: "Report"}, store.StatusFailed, 1)
	other := e.finished(store.RunsCreateParams{Type: "Other"}, store.StatusCompleted, 1)
	ns2 := e.finished(store.RunsCreateParams{Namespace: "ns2"}, store.StatusCompleted, 1)
	ns2Failed := e.finished(store.RunsCreateParams{Namespace: "ns2"}, store.StatusFailed, 1)
	now := e.dbNow()

	if n := e.expire(now.Add(3*time.Hour), 100); n != 1 {
		t.Fatalf("after 3 hours: deleted %d, want the Report run", n)
	}
	e.gone(report.ID)
	if n := e.expire(now.Add(25*time.Hour), 100); n != 1 {
		t.Fatalf("after a day: deleted %d, want ns2's completed run", n)
	}
	e.gone(ns2.ID)
	if n := e.expire(now.Add(8*day), 100); n != 1 {
		t.Fatalf("after a week: deleted %d, want ns's Other run", n)
	}
	e.gone(other.ID)
	if n := e.expire(now.Add(31*day), 100); n != 1 {
		t.Fatalf("after 30 days: deleted %d, want ns2's failed run (the Report one is kept)", n)
	}
	e.gone(ns2Failed.ID)
	if n := e.expire(now.Add(10000*day), 100); n != 0 {
		t.Fatalf("failed Report run kept for ever: deleted %d", n)
	}
	e.whole(reportFailed.ID, 1)

	// Changing one period keeps the other; removing a policy inherits again.
	pol := set(store.RetentionSetParams{Namespace: "ns", Type: "Report", KeepFailed: dur(40 * day)})
	if pol.KeepCompleted == nil || *pol.KeepCompleted != 2*time.Hour || *pol.KeepFailed != 40*day {
		t.Fatalf("changed Report policy: %+v", pol)
	}
	if err := e.s.RetentionDelete(ctx, "ns", "Report"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RetentionDelete(ctx, "ns", "Report"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if n := e.expire(now.Add(31*day), 100); n != 1 {
		t.Fatalf("Report policy removed: deleted %d, want its failed run (30 days)", n)
	}

	// The default is changed, never removed; a type's policy needs a
	// namespace; periods are bounded.
	set(store.RetentionSetParams{KeepCompleted: dur(14 * day)})
	pols, _ = e.s.RetentionList(ctx, "ns")
	if got := store.RetentionFor(pols, "ns", ""); got != (store.Retention{KeepCompleted: 14 * day, KeepFailed: store.DefaultKeepFailed}) {
		t.Fatalf("default changed: %+v", got)
	}
	for _, p := range []store.RetentionSetParams{
		{Namespace: "ns"},
		{Type: "Report", KeepCompleted: dur(day)},
		{Namespace: "ns", KeepCompleted: dur(time.Second)},
		{Namespace: "ns", KeepFailed: dur(-time.Hour)},
		{Namespace: "ns", KeepFailed: dur(200 * 365 * day)},
		{Namespace: "a.b", KeepFailed: dur(day)},
	} {
		if _, err := e.s.RetentionSet(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("set %+v: %v, want ErrInvalidArgument", p, err)
		}
	}
	if err := e.s.RetentionDelete(ctx, "", ""); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("remove the default: %v", err)
	}
	e.noOrphans()
}

// A batch takes at most its limit, oldest first within a group, and each
// batch deletes whole runs.
func TestRetentionBatchesAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs []uuid.UUID
	for i := 0; i < 12; i++ {
		runs = append(runs, e.finished(store.RunsCreateParams{}, store.StatusCompleted, 2).ID)
	}
	at := e.dbNow().Add(8 * day)
	for i, want := range []int64{5, 5, 2, 0} {
		if n := e.expire(at, 5); n != want {
			t.Fatalf("batch %d: deleted %d, want %d", i, n, want)
		}
		deleted := 0
		for _, id := range runs {
			switch e.rows(id) {
			case [3]int{}:
				deleted++
			case [3]int{1, 2, 1}:
			default:
				t.Fatalf("after batch %d: run %s is partly there: %v", i, id, e.rows(id))
			}
		}
		if got := min(5*(i+1), 12); deleted != got {
			t.Fatalf("after batch %d: %d runs gone, want %d", i, deleted, got)
		}
		if i == 0 {
			// The oldest five went first.
			for _, id := range runs[:5] {
				e.gone(id)
			}
		}
	}
	tooMany := store.RunsDeleteExpiredParams{Now: at, Limit: store.MaxDeleteBatch + 1}
	if _, err := e.s.RunsDeleteExpired(e.ctx, tooMany); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("batch above the maximum: %v", err)
	}
	e.noOrphans()
}

// The DBOS #769 case: a cleanup killed in the middle of its batch — its
// session ended while the statement deletes, or after it and before the
// commit — leaves every run whole: no step row without its run, no run
// without its steps. A run started afterwards under the same id and
// external id, once the cleanup went through, starts from nothing: no
// memoized step output is replayed.
func TestRetentionKilledMidBatchLeavesNoPartialRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 6
	var runs []store.Run
	for i := 0; i < n; i++ {
		// Ids chosen by the caller, as an application that derives them
		// from its own keys would: reused below.
		runs = append(runs, e.finished(store.RunsCreateParams{RunID: uuid.Must(uuid.NewV7()),
			ExternalID: fmt.Sprintf("order-%d", i), Input: []byte(`"first"`)}, store.StatusCompleted, 3))
	}
	at := e.dbNow().Add(8 * day)
	intact := func(when string) {
		t.Helper()
		for _, r := range runs {
			if got := e.rows(r.ID); got != [3]int{1, 3, 1} {
				t.Fatalf("%s: run %s has rows %v, want it whole", when, r.ID, got)
			}
		}
		e.noOrphans()
	}

	// 1. Killed inside the statement: the step rows' deletion waits on a
	// lock the test holds (the runs are deleted by then, in the
	// statement), and the session is ended there.
	e.exec(`CREATE FUNCTION kagzi.test_block() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock(769); RETURN OLD; END $$`)
	e.exec(`CREATE TRIGGER test_block BEFORE DELETE ON kagzi.step_runs FOR EACH ROW EXECUTE FUNCTION kagzi.test_block()`)
	holder, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(e.ctx, `SELECT pg_advisory_xact_lock(769)`); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := e.s.RunsDeleteExpired(context.Background(), store.RunsDeleteExpiredParams{Now: at, Limit: 100})
		res <- err
	}()
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		err := e.pool.QueryRow(e.ctx, `SELECT coalesce(min(pid), 0) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleanup never reached the deletion of steps")
		}
	}
	if ok, err := e.s.SessionTerminate(e.ctx, pid); err != nil || !ok {
		t.Fatalf("terminate the cleanup's session: %v %v", ok, err)
	}
	if err := <-res; err == nil {
		t.Fatal("the killed cleanup reported success")
	}
	if err := holder.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.exec(`DROP TRIGGER test_block ON kagzi.step_runs`)
	intact("killed inside the statement")

	// 2. Killed after the statement, before the commit: the batch ran in
	// a caller's transaction (as the reaper's fenced one) whose session
	// dies.
	var inner error
	err = e.s.InTx(e.ctx, func(tx *store.Store) error {
		got, err := tx.RunsDeleteExpired(e.ctx, store.RunsDeleteExpiredParams{Now: at, Limit: 100})
		if err != nil || got != n {
			inner = fmt.Errorf("in the transaction: deleted %d, %v; want %d", got, err, n)
			return inner
		}
		pid, err := tx.SessionPID(e.ctx)
		if err != nil {
			inner = err
			return err
		}
		if ok, err := e.s.SessionTerminate(e.ctx, pid); err != nil || !ok {
			inner = fmt.Errorf("terminate: %v %v", ok, err)
		}
		return inner
	})
	if inner != nil {
		t.Fatal(inner)
	}
	if err == nil {
		t.Fatal("a transaction whose session died committed")
	}
	intact("killed before the commit")

	// 3. The cleanup goes through: everything goes.
	if got := e.expire(at, 100); got != n {
		t.Fatalf("deleted %d, want %d", got, n)
	}
	for _, r := range runs {
		e.gone(r.ID)
	}
	e.noOrphans()

	// The same id and external id start from nothing.
	for i, r := range runs {
		again := e.create(store.RunsCreateParams{RunID: r.ID, ExternalID: fmt.Sprintf("order-%d", i), Input: []byte(`"second"`)})
		c := e.claimIn("ns", "q", "T", again.ID)
		if len(c.Steps) != 0 || string(c.Input) != `"second"` || c.Attempts != 1 {
			t.Fatalf("run %s started again: %d steps replayed, input %s, attempts %d; want a fresh run",
				r.ID, len(c.Steps), c.Input, c.Attempts)
		}
		if evs, err := e.s.EventsList(e.ctx, "ns", r.ID); err != nil || len(evs) != 0 {
			t.Fatalf("run %s started again: events %v %v", r.ID, evs, err)
		}
	}
}

// A dead letter retried while the cleanup runs is either deleted before
// the retry (which then finds nothing) or retried and kept: never both.
func TestRetentionRacesRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.finished(store.RunsCreateParams{}, store.StatusFailed, 1)
	at := e.dbNow().Add(31 * day)
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	retried, err := e.s.WithTx(tx).RunsRetry(e.ctx, "ns", r.ID)
	if err != nil || retried.Status != store.StatusPending {
		t.Fatalf("retry: %v %v", retried.Status, err)
	}
	// The retry holds the row: the cleanup skips it rather than wait.
	if n := e.expire(at, 100); n != 0 {
		t.Fatalf("deleted %d runs a retry holds", n)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.expire(at, 100); n != 0 {
		t.Fatalf("deleted %d retried (live) runs", n)
	}
	if got := e.rows(r.ID); got != [3]int{1, 1, 1} {
		t.Fatalf("retried run: rows %v", got)
	}
}

// RunsNextExpiry says when the first run is due (its finish plus its
// period), the oldest finished run and the shortest period.
func TestRunsNextExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exp, err := e.s.RunsNextExpiry(e.ctx)
	if err != nil || exp.Next != nil || exp.OldestFinished != nil || exp.ShortestKeep != store.DefaultKeepCompleted {
		t.Fatalf("empty: %+v %v", exp, err)
	}
	failed := e.finished(store.RunsCreateParams{}, store.StatusFailed, 0)
	done := e.finished(store.RunsCreateParams{Type: "U"}, store.StatusCompleted, 0)
	exp, err = e.s.RunsNextExpiry(e.ctx)
	if err != nil || exp.Next == nil || !exp.Next.Equal(done.FinishedAt.Add(store.DefaultKeepCompleted)) ||
		exp.OldestFinished == nil || !exp.OldestFinished.Equal(*failed.FinishedAt) {
		t.Fatalf("a failed then a completed run: %+v %v; want next %v, oldest %v", exp, err,
			done.FinishedAt.Add(store.DefaultKeepCompleted), failed.FinishedAt)
	}
	// Keeping completed runs of U for ever leaves the failed one's expiry.
	if _, err := e.s.RetentionSet(e.ctx, store.RetentionSetParams{Namespace: "ns", Type: "U", KeepCompleted: dur(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RetentionSet(e.ctx, store.RetentionSetParams{Namespace: "other", KeepCompleted: dur(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	exp, err = e.s.RunsNextExpiry(e.ctx)
	if err != nil || exp.Next == nil || !exp.Next.Equal(failed.FinishedAt.Add(store.DefaultKeepFailed)) || exp.ShortestKeep != time.Hour {
		t.Fatalf("U kept for ever: %+v %v", exp, err)
	}
}

// RunsExport pages through the runs with everything of theirs, finished
// before a time when asked (what retention is about to delete).
func TestRunsExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var want []uuid.UUID
	for i := 0; i < 5; i++ {
		want = append(want, e.finished(store.RunsCreateParams{Input: fmt.Appendf(nil, "%d", i)}, store.StatusCompleted, 2).ID)
	}
	live := e.create(store.RunsCreateParams{})
	before := e.dbNow().Add(time.Second)
	var got []store.RunRecord
	p := store.RunsExportParams{Namespace: "ns", FinishedBefore: &before, Limit: 2}
	for pages := 0; ; pages++ {
		recs, next, err := e.s.RunsExport(e.ctx, p)
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, recs...)
		if next == nil {
			break
		}
		p.After = next
	}
	if len(got) != 5 {
		t.Fatalf("exported %d runs, want the 5 finished (not the live one %s)", len(got), live.ID)
	}
	for i, rec := range got {
		id := want[len(want)-1-i] // newest first
		if rec.Run.ID != id || string(rec.Run.Input) != fmt.Sprint(len(want)-1-i) || string(rec.Run.Output) != `"done"` ||
			len(rec.Steps) != 2 || string(rec.Steps[1].Output) != `"memo-1"` || len(rec.Events) != 1 || string(rec.Events[0].Payload) != `1` {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
	recs, _, err := e.s.RunsExport(e.ctx, store.RunsExportParams{Namespace: "ns", Statuses: []store.RunStatus{store.StatusPending}})
	if err != nil || len(recs) != 1 || recs[0].Run.ID != live.ID || len(recs[0].Steps) != 0 || recs[0].Events == nil {
		t.Fatalf("pending runs: %+v %v", recs, err)
	}
}

// A schedule template is never deleted; the runs it fired follow their
// period, and the template's history lists what is left.
func TestRetentionKeepsTemplatesNotTheirRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sc, err := e.s.SchedulesCreate(e.ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "0 0 1 1 *",
		Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := e.s.SchedulesTrigger(e.ctx, "ns", sc.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	l := leaseOf(e.claimIn("ns", "q", "T", fired.ID))
	e.history(l, 1)
	if err := e.s.RunsComplete(e.ctx, l, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if n := e.expire(e.dbNow().Add(10000*day), 100); n != 1 {
		t.Fatalf("deleted %d, want the fired run only", n)
	}
	e.gone(fired.ID)
	if _, err := e.s.SchedulesGet(e.ctx, "ns", sc.ID); err != nil {
		t.Fatalf("template after retention: %v", err)
	}
	if h, err := e.s.SchedulesHistory(e.ctx, "ns", sc.ID, 10); err != nil || len(h) != 0 {
		t.Fatalf("history after retention: %v %v", h, err)
	}
	e.noOrphans()
}
