package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// sameOutcome fails unless the single and batch forms of a report gave the
// same error, the runs they name aside.
func sameOutcome(t *testing.T, what string, single, batch error, singleRun, batchRun uuid.UUID, want error) {
	t.Helper()
	if want == nil && (single != nil || batch != nil) || want != nil && (!errors.Is(single, want) || !errors.Is(batch, want)) {
		t.Fatalf("%s: single %v, batch %v, want %v", what, single, batch, want)
	}
	norm := func(err error, run uuid.UUID) string {
		return strings.ReplaceAll(fmt.Sprint(err), run.String(), "RUN")
	}
	if s, b := norm(single, singleRun), norm(batch, batchRun); s != b {
		t.Fatalf("%s: single says %q, batch says %q", what, s, b)
	}
}

// A completion and a release mean the same whether reported alone or in a
// batch: current lease, repeated report, lost lease, an output over the
// limit, an unknown run, a run that ended otherwise.
func TestRunsCompleteAndReleaseOneOrMany(t *testing.T) {
	t.Parallel()
	s := withLimits(t, testdb.Store(t), 100, 1000)
	ctx := context.Background()
	status := func(l store.Lease) store.RunStatus {
		t.Helper()
		r, err := s.RunsGet(ctx, l.Namespace, l.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	completeMany := func(l store.Lease, out []byte) error {
		errs, types, err := s.RunsCompleteMany(ctx, []store.RunsCompleteItem{{Lease: l, Output: out}})
		if err != nil {
			return err
		}
		if len(errs) != 1 || len(types) != 1 {
			t.Fatalf("%d errors, %d types for one item", len(errs), len(types))
		}
		return errs[0]
	}
	cases := []struct {
		name string
		// setup returns the lease the report names.
		setup  func() store.Lease
		output []byte
		want   error
		after  store.RunStatus
	}{
		{"current", func() store.Lease { l, _ := leasedRun(t, s, "ns"); return l }, []byte("out"), nil, store.StatusCompleted},
		{"repeated", func() store.Lease {
			l, _ := leasedRun(t, s, "ns")
			if err := s.RunsComplete(ctx, l, []byte("out")); err != nil {
				t.Fatal(err)
			}
			return l
		}, []byte("out"), nil, store.StatusCompleted},
		{"lost lease", func() store.Lease { stale, _ := reclaimedRun(t, s, "ns"); return stale }, nil, store.ErrLeaseLost, store.StatusRunning},
		{
			"too large",
			func() store.Lease { l, _ := leasedRun(t, s, "ns"); return l },
			make([]byte, 1001),
			store.ErrPayloadTooLarge,
			store.StatusRunning,
		},
		{"failed before", func() store.Lease {
			l, _ := leasedRun(t, s, "ns")
			if err := s.RunsFail(ctx, l, "boom"); err != nil {
				t.Fatal(err)
			}
			return l
		}, nil, store.ErrLeaseLost, store.StatusFailed},
		{"unknown run", func() store.Lease { return store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1} }, nil, store.ErrNotFound, ""},
	}
	for _, c := range cases {
		one, many := c.setup(), c.setup()
		sameOutcome(t, "complete "+c.name, s.RunsComplete(ctx, one, c.output), completeMany(many, c.output), one.RunID, many.RunID, c.want)
		if c.after != "" {
			if a, b := status(one), status(many); a != c.after || b != c.after {
				t.Fatalf("complete %s: runs are %s and %s, want %s", c.name, a, b, c.after)
			}
		}
	}

	// A release alone tells a repeated report from a lost lease; the batch
	// form releases what it can and counts it.
	one, _ := leasedRun(t, s, "ns")
	many, _ := leasedRun(t, s, "ns")
	if err := s.RunsRelease(ctx, one); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RunsReleaseMany(ctx, []store.Lease{many}); err != nil || n != 1 {
		t.Fatalf("release many: %d %v", n, err)
	}
	if a, b := status(one), status(many); a != store.StatusPending || b != store.StatusPending {
		t.Fatalf("released runs are %s and %s", a, b)
	}
	if err := s.RunsRelease(ctx, one); err != nil {
		t.Fatalf("repeated release: %v", err)
	}
	if n, err := s.RunsReleaseMany(ctx, []store.Lease{many}); err != nil || n != 0 {
		t.Fatalf("repeated release many: %d %v", n, err)
	}
	stale, current := reclaimedRun(t, s, "ns")
	wantErr(t, s.RunsRelease(ctx, stale), store.ErrLeaseLost)
	if n, err := s.RunsReleaseMany(ctx, []store.Lease{stale}); err != nil || n != 0 {
		t.Fatalf("stale release many: %d %v", n, err)
	}
	if st := status(current); st != store.StatusRunning {
		t.Fatalf("a stale release moved the run to %s", st)
	}
}

// A step report means the same alone as in a batch large enough for the
// set statement: an output over the limit, an unknown run, a lost lease.
func TestStepsRecordOneOrManyEdgeCases(t *testing.T) {
	t.Parallel()
	s := withLimits(t, testdb.Store(t), 100, 1000)
	ctx := context.Background()
	okLease, _ := leasedRun(t, s, "ns")
	stale, _ := reclaimedRun(t, s, "ns")
	unknown := store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}
	edge := []struct {
		p    store.StepsRecordParams
		want error
	}{
		{
			store.StepsRecordParams{
				Lease:   okLease,
				StepID:  "big",
				Attempt: 1,
				Kind:    store.StepFunction,
				Status:  store.StepCompleted,
				Output:  make([]byte, 1001),
			},
			store.ErrPayloadTooLarge,
		},
		{store.StepsRecordParams{Lease: unknown, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted}, store.ErrNotFound},
		{store.StepsRecordParams{Lease: stale, StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted}, store.ErrLeaseLost},
	}
	var ps []store.StepsRecordParams
	for _, e := range edge {
		ps = append(ps, e.p)
	}
	// Enough valid reports for the set statement.
	for i := 0; i < 10; i++ {
		ps = append(
			ps,
			store.StepsRecordParams{Lease: okLease, StepID: fmt.Sprint("ok-", i), Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		)
	}
	errs, err := s.StepsRecordMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range edge {
		single := s.StepsRecord(ctx, e.p)
		sameOutcome(t, fmt.Sprint("report ", i), single, errs[i], e.p.Lease.RunID, e.p.Lease.RunID, e.want)
	}
	for i := len(edge); i < len(ps); i++ {
		if errs[i] != nil {
			t.Fatalf("report %d: %v", i, errs[i])
		}
	}
	steps, err := s.StepsList(ctx, "ns", okLease.RunID)
	if err != nil || len(steps) != 10 {
		t.Fatalf("run's steps: %d %v (the oversized report wrote?)", len(steps), err)
	}
}

// A completion that carries the run's last steps records them in its
// statement, and completes the run only if each is recorded as reported: a
// step that conflicts with its recorded result, or whose lease is lost,
// leaves the run as it was; a repeated report is a success again; the steps
// of other items are not held up by one item's refusal.
func TestRunsCompleteBatchWithSteps(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	step := func(id string, st store.StepStatus, out string) store.StepsRecordParams {
		return store.StepsRecordParams{StepID: id, Attempt: 1, Kind: store.StepFunction, Status: st, Output: []byte(out)}
	}
	ok, _ := leasedRun(t, s, "ns")
	conflict, _ := leasedRun(t, s, "ns")
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: conflict, StepID: "a", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepFailed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	stale, _ := reclaimedRun(t, s, "ns")
	items := []store.RunsCompleteItem{
		{
			Lease:  ok,
			Output: []byte(`"done"`),
			Steps:  []store.StepsRecordParams{step("a", store.StepCompleted, "1"), step("b", store.StepCompleted, "2")},
		},
		{Lease: conflict, Output: []byte(`"done"`), Steps: []store.StepsRecordParams{step("a", store.StepCompleted, "1")}},
		{Lease: stale, Output: []byte(`"done"`), Steps: []store.StepsRecordParams{step("a", store.StepCompleted, "1")}},
	}
	out, err := s.RunsCompleteBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[0].Type == "" || out[0].Steps[0].Err != nil || out[0].Steps[1].Err != nil {
		t.Fatalf("current lease: %+v", out[0])
	}
	if !errors.Is(out[1].Steps[0].Err, store.ErrConflict) || !errors.Is(out[1].Err, store.ErrConflict) {
		t.Fatalf("conflicting step: %+v", out[1])
	}
	if !errors.Is(out[2].Steps[0].Err, store.ErrLeaseLost) || !errors.Is(out[2].Err, store.ErrLeaseLost) {
		t.Fatalf("stale lease: %+v", out[2])
	}
	for _, c := range []struct {
		l     store.Lease
		want  store.RunStatus
		steps int
	}{{ok, store.StatusCompleted, 2}, {conflict, store.StatusRunning, 1}, {stale, store.StatusRunning, 0}} {
		r, err := s.RunsGet(ctx, c.l.Namespace, c.l.RunID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := s.StepsList(ctx, c.l.Namespace, c.l.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != c.want || len(steps) != c.steps {
			t.Fatalf("run %s is %s with %d steps, want %s with %d", c.l.RunID, r.Status, len(steps), c.want, c.steps)
		}
	}
	// The reply was lost and the worker sends the report again.
	again, err := s.RunsCompleteBatch(ctx, items[:1])
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Err != nil || again[0].Type != "" || again[0].Steps[0].Err != nil || again[0].Steps[1].Err != nil {
		t.Fatalf("repeated report: %+v", again[0])
	}
}
