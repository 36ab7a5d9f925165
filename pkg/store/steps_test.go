package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// leasedRun creates a run of type T on a queue of its own in ns and claims
// it, returning its lease and queue.
func leasedRun(t *testing.T, s *store.Store, ns string) (store.Lease, string) {
	t.Helper()
	ctx := context.Background()
	q := "q-" + uuid.NewString()[:8]
	run, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: ns, Queue: q, Type: "T", ExternalID: "ext-" + q})
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return claimAgain(t, s, ns, q, run.ID), q
}

// claimAgain claims the due run id on queue q of ns and returns its lease.
func claimAgain(t *testing.T, s *store.Store, ns, q string, id uuid.UUID) store.Lease {
	t.Helper()
	got, err := s.RunsClaim(context.Background(), store.RunsClaimParams{Namespace: ns, Queue: q, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim %s: %+v %v", id, got, err)
	}
	return store.Lease{Namespace: ns, RunID: id, Token: got[0].LeaseToken}
}

// reclaimedRun leases a run, releases it and claims it again: stale is the
// first lease, current the second.
func reclaimedRun(t *testing.T, s *store.Store, ns string) (stale, current store.Lease) {
	t.Helper()
	stale, q := leasedRun(t, s, ns)
	if err := s.RunsRelease(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	return stale, claimAgain(t, s, ns, q, stale.RunID)
}

func ptime(t time.Time) *time.Time { return &t }

func TestStepsRecordAndList(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	started := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	finished := started.Add(1500 * time.Millisecond)
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "charge", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted, Input: []byte(`{"amount":3}`), Output: []byte(`"ok"`), StartedAt: &started, FinishedAt: &finished}); err != nil {
		t.Fatal(err)
	}
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "email", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepFailed, Error: "smtp down"}); err != nil {
		t.Fatal(err)
	}
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Fatalf("want 2 steps, got %+v", steps)
	}
	c := steps[0]
	if c.StepID != "charge" || c.RunID != l.RunID || c.Namespace != "ns" || c.Attempt != 1 || c.Kind != store.StepFunction ||
		c.Status != store.StepCompleted || !c.IsLatest || string(c.Input) != `{"amount":3}` || string(c.Output) != `"ok"` ||
		c.StartedAt == nil || !c.StartedAt.Equal(started) || c.FinishedAt == nil || !c.FinishedAt.Equal(finished) || c.CreatedAt.IsZero() {
		t.Fatalf("charge step: %+v", c)
	}
	e := steps[1]
	if e.StepID != "email" || e.Status != store.StepFailed || e.Error != "smtp down" || e.FinishedAt == nil || e.Output != nil {
		t.Fatalf("email step (finished_at defaults to now): %+v", e)
	}
	latest, err := s.StepsLatest(ctx, "ns", []uuid.UUID{l.RunID})
	if err != nil {
		t.Fatal(err)
	}
	got := latest[l.RunID]
	if len(got) != 2 || got[0].StepID != "charge" || string(got[0].Output) != `"ok"` || got[1].StepID != "email" || got[1].Error != "smtp down" {
		t.Fatalf("latest: %+v", got)
	}
}

func TestStepsRecordRetriedReportIsNoop(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	p := store.StepsRecordParams{Lease: l, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("1")}
	for i := 0; i < 3; i++ {
		if err := s.StepsRecord(ctx, p); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	// A different output for the same finished attempt does not overwrite:
	// the first recorded result wins.
	p2 := p
	p2.Output = []byte("2")
	if err := s.StepsRecord(ctx, p2); err != nil {
		t.Fatalf("same status, other output: %v", err)
	}
	p3 := p
	p3.Status, p3.Error = store.StepFailed, "boom"
	if err := s.StepsRecord(ctx, p3); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("other final status: want ErrConflict, got %v", err)
	}
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || string(steps[0].Output) != "1" || steps[0].Status != store.StepCompleted || steps[0].Error != "" {
		t.Fatalf("steps: %+v", steps)
	}
}

func TestStepsRecordConcurrentIdenticalReports(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	p := store.StepsRecordParams{Lease: l, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("x")}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.StepsRecord(ctx, p)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps: %+v %v", steps, err)
	}
}

func TestStepsRecordIsLatestFlips(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	rec := func(attempt int, st store.StepStatus) {
		t.Helper()
		if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "flaky", Attempt: attempt, Kind: store.StepFunction,
			Status: st, Output: []byte{byte('0' + attempt)}, RetryAt: ptime(time.Now().Add(time.Second))}); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	rec(1, store.StepFailed)
	rec(2, store.StepFailed)
	rec(3, store.StepCompleted)
	// A late retry of attempt 2's report changes nothing.
	rec(2, store.StepFailed)
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("want 3 attempts, got %+v", steps)
	}
	for _, st := range steps {
		if st.IsLatest != (st.Attempt == 3) {
			t.Fatalf("attempt %d is_latest=%v", st.Attempt, st.IsLatest)
		}
		if st.RetryAt == nil {
			t.Fatalf("attempt %d lost its retry time", st.Attempt)
		}
	}
	latest, err := s.StepsLatest(ctx, "ns", []uuid.UUID{l.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if got := latest[l.RunID]; len(got) != 1 || got[0].Attempt != 3 || got[0].Status != store.StepCompleted || string(got[0].Output) != "3" {
		t.Fatalf("latest: %+v", got)
	}
	// A report of an attempt older than the latest, never seen before, is
	// kept for the record but does not become latest.
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "other", Attempt: 2, Kind: store.StepFunction,
		Status: store.StepCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "other", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepFailed}); err != nil {
		t.Fatal(err)
	}
	latest, _ = s.StepsLatest(ctx, "ns", []uuid.UUID{l.RunID})
	if got := latest[l.RunID]; len(got) != 2 || got[1].StepID != "other" || got[1].Attempt != 2 {
		t.Fatalf("latest after out-of-order report: %+v", got)
	}
}

func TestStepsRecordStaleLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	old, cur := reclaimedRun(t, s, "ns")
	if cur.Token == old.Token {
		t.Fatalf("re-claim kept token %d", cur.Token)
	}
	err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: old, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale lease: want ErrLeaseLost, got %v", err)
	}
	if steps, err := s.StepsList(ctx, "ns", old.RunID); err != nil || len(steps) != 0 {
		t.Fatalf("stale report wrote %+v (%v)", steps, err)
	}
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: cur, StepID: "s", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted}); err != nil {
		t.Fatalf("current lease: %v", err)
	}
	// The same report under the old lease, now that the row exists, is
	// still refused: it is another holder's result.
	err = s.StepsRecord(ctx, store.StepsRecordParams{Lease: old, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale lease after write: want ErrLeaseLost, got %v", err)
	}
}

func TestStepsRecordAfterRunMovedOn(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	p := store.StepsRecordParams{Lease: l, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("o")}
	if err := s.StepsRecord(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.RunsComplete(ctx, l, []byte("done")); err != nil {
		t.Fatal(err)
	}
	if err := s.StepsRecord(ctx, p); err != nil {
		t.Fatalf("retried report after completion: %v", err)
	}
	err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "new", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted})
	if !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "COMPLETED") {
		t.Fatalf("new report after completion: want ErrLeaseLost naming the status, got %v", err)
	}
}

func TestStepsRecordUnknownRun(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	for _, bad := range []store.Lease{{Namespace: "ns", RunID: uuid.New(), Token: 1}, {Namespace: "other", RunID: l.RunID, Token: l.Token}} {
		err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: bad, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted})
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%+v: want ErrNotFound, got %v", bad, err)
		}
	}
	if steps, _ := s.StepsList(ctx, "ns", l.RunID); len(steps) != 0 {
		t.Fatalf("wrote %+v", steps)
	}
}

func TestStepsRecordWaitThenFinish(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	child := uuid.New()
	p := store.StepsRecordParams{Lease: l, StepID: "child", Attempt: 1, Kind: store.StepChild, Status: store.StepRunning, ChildRunID: &child,
		Input: []byte("in"), StartedAt: ptime(time.Now().Add(-time.Minute))}
	if err := s.StepsRecord(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.StepsRecord(ctx, p); err != nil {
		t.Fatalf("retried wait: %v", err)
	}
	done := store.StepsRecordParams{Lease: l, StepID: "child", Attempt: 1, Kind: store.StepChild, Status: store.StepCompleted, Output: []byte("out")}
	if err := s.StepsRecord(ctx, done); err != nil {
		t.Fatal(err)
	}
	// A late retry of the wait report does not undo the result.
	if err := s.StepsRecord(ctx, p); err != nil {
		t.Fatalf("late wait report: %v", err)
	}
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 {
		t.Fatalf("steps: %+v", steps)
	}
	st := steps[0]
	if st.Status != store.StepCompleted || string(st.Output) != "out" || string(st.Input) != "in" || st.ChildRunID == nil ||
		*st.ChildRunID != child || st.StartedAt == nil || !st.StartedAt.Before(time.Now().Add(-30*time.Second)) || st.FinishedAt == nil {
		t.Fatalf("finished wait: %+v", st)
	}
}

func TestStepsRecordValidation(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := withLimits(t, store.New(pool, store.Options{}), 8, 16)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	ok := store.StepsRecordParams{Lease: l, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted}
	cases := []struct {
		name  string
		edit  func(p *store.StepsRecordParams)
		want  error
		field string
	}{
		{"attempt 0", func(p *store.StepsRecordParams) { p.Attempt = 0 }, store.ErrInvalidArgument, "attempt"},
		{"empty step id", func(p *store.StepsRecordParams) { p.StepID = "" }, store.ErrInvalidArgument, "step id"},
		{"long step id", func(p *store.StepsRecordParams) { p.StepID = strings.Repeat("x", 201) }, store.ErrInvalidArgument, "step id"},
		{"bad kind", func(p *store.StepsRecordParams) { p.Kind = "LOOP" }, store.ErrInvalidArgument, "kind"},
		{"bad status", func(p *store.StepsRecordParams) { p.Status = "DONE" }, store.ErrInvalidArgument, "status"},
		{"big output", func(p *store.StepsRecordParams) { p.Output = bytes.Repeat([]byte("x"), 17) }, store.ErrPayloadTooLarge, "step output"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		err := s.StepsRecord(ctx, p)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: want %v naming %q, got %v", c.name, c.want, c.field, err)
		}
	}
	long := ok
	long.StepID = strings.Repeat("x", 200)
	if err := s.StepsRecord(ctx, long); err != nil {
		t.Fatalf("200-byte step id: %v", err)
	}
	if steps, _ := s.StepsList(ctx, "ns", l.RunID); len(steps) != 1 {
		t.Fatalf("invalid reports wrote rows: %+v", steps)
	}
}

func TestStepsListAndLatestScoping(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	a, _ := leasedRun(t, s, "a")
	b, _ := leasedRun(t, s, "a")
	c, _ := leasedRun(t, s, "other")
	empty, _ := leasedRun(t, s, "a")
	for i, l := range []store.Lease{a, b, c} {
		for _, id := range []string{"x", "y"} {
			if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: id, Attempt: 1, Kind: store.StepFunction,
				Status: store.StepCompleted, Output: []byte{byte('0' + i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.StepsList(ctx, "a", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if _, err := s.StepsList(ctx, "a", c.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run of another namespace: %v", err)
	}
	if steps, err := s.StepsList(ctx, "a", empty.RunID); err != nil || steps == nil || len(steps) != 0 {
		t.Fatalf("run without steps: %#v %v", steps, err)
	}
	latest, err := s.StepsLatest(ctx, "a", []uuid.UUID{a.RunID, b.RunID, c.RunID, empty.RunID, uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 || len(latest[a.RunID]) != 2 || len(latest[b.RunID]) != 2 || string(latest[b.RunID][0].Output) != "1" {
		t.Fatalf("latest: %+v", latest)
	}
	if _, ok := latest[c.RunID]; ok {
		t.Fatal("latest leaked a run of another namespace")
	}
	if m, err := s.StepsLatest(ctx, "a", nil); err != nil || len(m) != 0 {
		t.Fatalf("no runs: %v %v", m, err)
	}
}

func TestStepsReplayedOnClaim(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, q := leasedRun(t, s, "ns")
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "a", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepFailed, Error: "e1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "a", Attempt: 2, Kind: store.StepFunction,
		Status: store.StepCompleted, Output: []byte("A")}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunsRelease(ctx, l); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: q, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if st := got[0].Steps; len(st) != 1 || st[0].Attempt != 2 || string(st[0].Output) != "A" {
		t.Fatalf("claimed steps: %+v", st)
	}
}

func TestStepsRecordMany(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	a, _ := leasedRun(t, s, "ns")
	b, b2 := reclaimedRun(t, s, "ns")
	ps := []store.StepsRecordParams{
		{Lease: a, StepID: "one", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("1")},
		{Lease: a, StepID: "two", Attempt: 0, Kind: store.StepFunction, Status: store.StepCompleted},
		{Lease: b, StepID: "stale", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		{Lease: b2, StepID: "fresh", Attempt: 1, Kind: store.StepSleep, Status: store.StepCompleted},
		{Lease: a, StepID: "one", Attempt: 2, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("2")},
	}
	errs, err := s.StepsRecordMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], store.ErrInvalidArgument) || !errors.Is(errs[2], store.ErrLeaseLost) || errs[3] != nil ||
		errs[4] != nil {
		t.Fatalf("errs: %v", errs)
	}
	latest, err := s.StepsLatest(ctx, "ns", []uuid.UUID{a.RunID, b.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if got := latest[a.RunID]; len(got) != 1 || got[0].Attempt != 2 || string(got[0].Output) != "2" {
		t.Fatalf("run a: %+v", got)
	}
	if got := latest[b.RunID]; len(got) != 1 || got[0].StepID != "fresh" {
		t.Fatalf("run b: %+v", got)
	}
	// Retrying the whole batch is safe.
	errs, err = s.StepsRecordMany(ctx, ps)
	if err != nil || errs[0] != nil || errs[3] != nil || errs[4] != nil {
		t.Fatalf("retried batch: %v %v", errs, err)
	}
	if errs, err := s.StepsRecordMany(ctx, nil); err != nil || len(errs) != 0 {
		t.Fatalf("empty batch: %v %v", errs, err)
	}
}

// tracedStore is a Store on a fresh test database whose statements, batched
// ones included, are counted by the returned tally.
func tracedStore(t *testing.T) (*store.Store, *stmtcount.Tally) {
	t.Helper()
	tally := stmtcount.NewTally()
	pool, err := store.ConnectTraced(context.Background(), testdb.New(t), tally)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool, store.Options{}), tally
}

// statementsSince returns the statements counted since before, by text,
// without the pool's liveness pings.
func statementsSince(tally *stmtcount.Tally, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for sql, n := range tally.Snapshot() {
		if d := n - before[sql]; d > 0 && sql != stmtcount.PingStatement {
			out[sql] = d
		}
	}
	return out
}

// withoutPlannerSettings returns stmts without the planner settings a
// statement that reaches runs by key is sent with (in its round trip),
// and how many of those there were.
func withoutPlannerSettings(stmts map[string]int64) (map[string]int64, int64) {
	out := map[string]int64{}
	var n int64
	for sql, c := range stmts {
		if strings.Contains(sql, "set_config('enable_seqscan'") || strings.Contains(sql, "set_config('plan_cache_mode'") {
			n += c
			continue
		}
		out[sql] = c
	}
	return out, n
}

// stepInserts counts the step-writing statements among stmts.
func stepInserts(stmts map[string]int64) int64 {
	var n int64
	for sql, c := range stmts {
		if strings.Contains(sql, "INSERT INTO kagzi.step_runs") {
			n += c
		}
	}
	return n
}

func TestStepsRecordManyOneStatement(t *testing.T) {
	t.Parallel()
	s, tally := tracedStore(t)
	ctx := context.Background()
	const n = 20
	leases := make([]store.Lease, n)
	ids := make([]uuid.UUID, n)
	for i := range leases {
		leases[i], _ = leasedRun(t, s, "ns")
		ids[i] = leases[i].RunID
	}
	started := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	finished := started.Add(time.Second)
	retryAt := started.Add(time.Hour)
	child := uuid.New()
	ps := make([]store.StepsRecordParams, n)
	for i, l := range leases {
		ps[i] = store.StepsRecordParams{Lease: l, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted,
			Input: []byte("in"), Output: []byte{byte('a' + i)}}
	}
	// Every column travels, NULLs included.
	ps[1] = store.StepsRecordParams{Lease: leases[1], StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepFailed,
		Error: "boom", ErrorType: "Boom", StartedAt: &started, FinishedAt: &finished, RetryAt: &retryAt}
	ps[2] = store.StepsRecordParams{Lease: leases[2], StepID: "s", Attempt: 1, Kind: store.StepChild, Status: store.StepPending,
		Input: []byte("child input"), StartedAt: &started, ChildRunID: &child}

	// The payload limits are read once per store, before its first check.
	if _, err := s.Limits(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := tally.Snapshot()
	recordAllOK(t, s, ps)
	if stmts, settings := withoutPlannerSettings(statementsSince(tally, before)); len(stmts) != 1 || stepInserts(stmts) != 1 || settings != 2 {
		t.Fatalf("want one statement and its planner settings, sent %v and %d settings", stmts, settings)
	}

	// A few reports go one statement each: the set statement would be
	// planned afresh for so few.
	few := make([]store.StepsRecordParams, 3)
	for i := range few {
		few[i] = store.StepsRecordParams{Lease: leases[i], StepID: "t", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted}
	}
	before = tally.Snapshot()
	if errs, err := s.StepsRecordMany(ctx, few); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("few reports: %v %v", errs, err)
	}
	if n := stepInserts(statementsSince(tally, before)); n != 3 {
		t.Fatalf("%d step statements for 3 reports", n)
	}

	for i, id := range ids {
		steps, err := s.StepsList(ctx, "ns", id)
		if i < len(few) {
			if err != nil || len(steps) != 2 || steps[1].StepID != "t" {
				t.Fatalf("run %d: %+v %v", i, steps, err)
			}
			steps = steps[:1]
		}
		if err != nil || len(steps) != 1 {
			t.Fatalf("run %d: %+v %v", i, steps, err)
		}
		st := steps[0]
		if st.StepID != "s" || st.Attempt != 1 || !st.IsLatest || st.Namespace != "ns" || st.RunAttempt != 1 {
			t.Fatalf("run %d: %+v", i, st)
		}
		switch i {
		case 1:
			if st.Status != store.StepFailed || st.Error != "boom" || st.ErrorType != "Boom" || st.Input != nil || st.Output != nil ||
				!st.StartedAt.Equal(started) || !st.FinishedAt.Equal(finished) || st.RetryAt == nil || !st.RetryAt.Equal(retryAt) ||
				st.ChildRunID != nil {
				t.Fatalf("failed step: %+v", st)
			}
		case 2:
			if st.Kind != store.StepChild || st.Status != store.StepPending || string(st.Input) != "child input" || st.Output != nil ||
				st.FinishedAt != nil || st.ChildRunID == nil || *st.ChildRunID != child || st.Error != "" || st.ErrorType != "" {
				t.Fatalf("child step: %+v", st)
			}
		default:
			if st.Status != store.StepCompleted || string(st.Input) != "in" || !bytes.Equal(st.Output, []byte{byte('a' + i)}) ||
				st.FinishedAt == nil || st.StartedAt != nil || st.RetryAt != nil || st.Error != "" {
				t.Fatalf("completed step %d: %+v", i, st)
			}
		}
	}
}

func TestStepsRecordManyMixedOutcomes(t *testing.T) {
	t.Parallel()
	s, tally := tracedStore(t)
	ctx := context.Background()
	a, _ := leasedRun(t, s, "ns")
	b, b2 := reclaimedRun(t, s, "ns")
	c, _ := leasedRun(t, s, "ns")
	record := func(p store.StepsRecordParams) {
		t.Helper()
		if err := s.StepsRecord(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	done := store.StepsRecordParams{Lease: c, StepID: "done", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("1")}
	record(done)
	record(
		store.StepsRecordParams{Lease: c, StepID: "conflict", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("c")},
	)
	record(store.StepsRecordParams{Lease: c, StepID: "retry", Attempt: 1, Kind: store.StepFunction, Status: store.StepFailed, Error: "e1"})
	record(store.StepsRecordParams{Lease: c, StepID: "event:x#1", Attempt: 1, Kind: store.StepEvent, Status: store.StepPending, Input: []byte("x")})
	doneBefore, err := s.StepsList(ctx, "ns", c.RunID)
	if err != nil {
		t.Fatal(err)
	}

	ps := []store.StepsRecordParams{
		{Lease: a, StepID: "new", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("n")},
		{Lease: b, StepID: "stale", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		{Lease: a, StepID: "invalid", Attempt: 0, Kind: store.StepFunction, Status: store.StepCompleted},
		done,
		{Lease: c, StepID: "conflict", Attempt: 1, Kind: store.StepFunction, Status: store.StepFailed, Error: "late"},
		{Lease: c, StepID: "retry", Attempt: 2, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("r2")},
		{Lease: c, StepID: "event:x#1", Attempt: 1, Kind: store.StepEvent, Status: store.StepCompleted, Output: []byte("payload")},
		{Lease: b2, StepID: "fresh", Attempt: 1, Kind: store.StepSleep, Status: store.StepCompleted},
	}
	// Enough reports for one statement.
	for i := 0; i < 4; i++ {
		ps = append(
			ps,
			store.StepsRecordParams{Lease: a, StepID: fmt.Sprint("more-", i), Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		)
	}
	before := tally.Snapshot()
	errs, err := s.StepsRecordMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if n := stepInserts(statementsSince(tally, before)); n != 1 {
		t.Fatalf("%d step statements, want 1", n)
	}
	if errs[0] != nil || !errors.Is(errs[1], store.ErrLeaseLost) || !errors.Is(errs[2], store.ErrInvalidArgument) || errs[3] != nil ||
		!errors.Is(errs[4], store.ErrConflict) || errs[5] != nil || errs[6] != nil || errs[7] != nil ||
		errs[8] != nil || errs[9] != nil || errs[10] != nil || errs[11] != nil {
		t.Fatalf("errs: %v", errs)
	}
	// Each outcome is the one StepsRecord gives the same report (now a
	// retry of it).
	for i, p := range ps {
		if got, want := fmt.Sprint(errs[i]), fmt.Sprint(s.StepsRecord(ctx, p)); got != want {
			t.Errorf("report %d: StepsRecordMany says %s, StepsRecord says %s", i, got, want)
		}
	}

	byStep := func(run uuid.UUID) map[string][]store.Step {
		t.Helper()
		steps, err := s.StepsList(ctx, "ns", run)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]store.Step{}
		for _, st := range steps {
			m[st.StepID] = append(m[st.StepID], st)
		}
		return m
	}
	ra := byStep(a.RunID)
	if len(ra) != 5 || len(ra["new"]) != 1 || !ra["new"][0].IsLatest || string(ra["new"][0].Output) != "n" || len(ra["more-3"]) != 1 {
		t.Fatalf("run a: %+v", ra)
	}
	rb := byStep(b.RunID)
	if len(rb) != 1 || len(rb["fresh"]) != 1 {
		t.Fatalf("run b (the stale report wrote nothing): %+v", rb)
	}
	rc := byStep(c.RunID)
	var old store.Step
	for _, st := range doneBefore {
		if st.StepID == "done" {
			old = st
		}
	}
	if d := rc["done"]; len(d) != 1 || string(d[0].Output) != "1" || !d[0].FinishedAt.Equal(*old.FinishedAt) || !d[0].IsLatest {
		t.Fatalf("retried report changed the attempt: %+v, was %+v", d, old)
	}
	if cf := rc["conflict"]; len(cf) != 1 || cf[0].Status != store.StepCompleted || string(cf[0].Output) != "c" || cf[0].Error != "" {
		t.Fatalf("conflicting report changed the attempt: %+v", cf)
	}
	r := rc["retry"]
	if len(r) != 2 || r[0].Attempt != 1 || r[0].IsLatest || r[0].Status != store.StepFailed ||
		r[1].Attempt != 2 || !r[1].IsLatest || r[1].Status != store.StepCompleted || string(r[1].Output) != "r2" {
		t.Fatalf("retried step: %+v", r)
	}
	if ev := rc["event:x#1"]; len(ev) != 1 || ev[0].Status != store.StepCompleted || string(ev[0].Input) != "x" ||
		string(ev[0].Output) != "payload" || ev[0].FinishedAt == nil || !ev[0].IsLatest {
		t.Fatalf("finished wait: %+v", ev)
	}
}

func TestStepsRecordManySameStepTwice(t *testing.T) {
	t.Parallel()
	s, tally := tracedStore(t)
	ctx := context.Background()
	a, _ := leasedRun(t, s, "ns")
	b, _ := leasedRun(t, s, "ns")
	ps := []store.StepsRecordParams{
		{Lease: a, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepFailed, Error: "e1"},
		{Lease: b, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("b")},
		{Lease: a, StepID: "s", Attempt: 2, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("a2")},
		{Lease: a, StepID: "s", Attempt: 2, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte("a2")},
	}
	// Enough reports for one statement, were the steps distinct.
	for i := 0; i < 10; i++ {
		ps = append(
			ps,
			store.StepsRecordParams{Lease: b, StepID: fmt.Sprint("other-", i), Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		)
	}
	before := tally.Snapshot()
	recordAllOK(t, s, ps)
	if n := stepInserts(statementsSince(tally, before)); n != int64(len(ps)) {
		t.Fatalf("%d step statements, want one per report", n)
	}
	steps, err := s.StepsList(ctx, "ns", a.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Attempt != 1 || steps[0].IsLatest || steps[0].Error != "e1" ||
		steps[1].Attempt != 2 || !steps[1].IsLatest || string(steps[1].Output) != "a2" {
		t.Fatalf("run a: %+v", steps)
	}
	latest, err := s.StepsLatest(ctx, "ns", []uuid.UUID{b.RunID})
	if err != nil || len(latest[b.RunID]) != 11 || latest[b.RunID][10].StepID != "s" || string(latest[b.RunID][10].Output) != "b" {
		t.Fatalf("run b: %+v %v", latest, err)
	}
}

// recordAllOK records ps in one StepsRecordMany call and fails the test
// unless every report was applied.
func recordAllOK(t *testing.T, s *store.Store, ps []store.StepsRecordParams) {
	t.Helper()
	errs, err := s.StepsRecordMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("report %d: %v", i, e)
		}
	}
}
