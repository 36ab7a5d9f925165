package store_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// failedRun makes a run of type typ that recorded steps (in this order)
// and then failed: the steps are "id:COMPLETED" or "id:FAILED".
func (e *env) failedRun(typ string, input string, steps ...store.StepsRecordParams) store.Run {
	e.t.Helper()
	r := e.create(store.RunsCreateParams{Type: typ, Input: []byte(input)})
	c := e.claimOne(claimParams(uuid.New(), 1, store.TypeVersion{Type: typ, Version: "v1"}), r.ID)
	for _, sp := range steps {
		sp.Lease, sp.Kind = leaseOf(c), store.StepFunction
		if err := e.s.StepsRecord(e.ctx, sp); err != nil {
			e.t.Fatalf("record step %s/%d: %v", sp.StepID, sp.Attempt, err)
		}
	}
	if err := e.s.RunsFail(e.ctx, leaseOf(c), "step c failed: 42"); err != nil {
		e.t.Fatal(err)
	}
	return e.get("ns", r.ID)
}

func (e *env) stepIDs(id uuid.UUID) []string {
	e.t.Helper()
	steps, err := e.s.StepsList(e.ctx, "ns", id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range steps {
		out = append(out, s.StepID)
	}
	return out
}

func threeSteps() []store.StepsRecordParams {
	return []store.StepsRecordParams{
		{StepID: "a", Attempt: 1, Status: store.StepCompleted, Output: []byte(`"A"`)},
		{StepID: "b", Attempt: 1, Status: store.StepFailed, Error: "flaky"},
		{StepID: "b", Attempt: 2, Status: store.StepCompleted, Output: []byte(`"B"`)},
		{StepID: "c", Attempt: 1, Status: store.StepFailed, Error: "boom", ErrorType: "Boom", NonRetryable: true},
	}
}

func TestRunsFork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.failedRun("T", `{"x":1}`, threeSteps()...)
	before := e.rawRow(old.ID)
	oldSteps := e.stepIDs(old.ID)

	f, err := e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Step: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Created || f.From != old.ID || f.Step != "c" || f.Run.ID == old.ID || string(f.Run.Input) != `{"x":1}` {
		t.Fatalf("fork %+v", f)
	}
	fr := e.get("ns", f.Run.ID)
	if fr.Status != store.StatusPending || fr.AvailableAt == nil || fr.Type != "T" || fr.Queue != "q" ||
		fr.Version != "v1" || string(fr.Input) != `{"x":1}` || fr.Error != "" || fr.TraceContext == "" ||
		fr.TraceContext == old.TraceContext {
		t.Fatalf("fork run %+v", fr)
	}
	// Only the completed steps before c are copied, one latest row each.
	steps, err := e.s.StepsList(e.ctx, "ns", f.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].StepID != "a" || steps[1].StepID != "b" || steps[1].Attempt != 2 ||
		string(steps[1].Output) != `"B"` || !steps[1].IsLatest || steps[1].RunAttempt != 0 {
		t.Fatalf("fork steps %+v", steps)
	}
	// The old run is untouched.
	if got := e.rawRow(old.ID); got != before {
		t.Fatalf("old run changed:\n%s\n%s", before, got)
	}
	if got := e.stepIDs(old.ID); !slices.Equal(got, oldSteps) {
		t.Fatalf("old steps %v, were %v", got, oldSteps)
	}

	// The same (run, step) again returns the fork.
	again, err := e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Step: "c"})
	if err != nil || again.Created || again.Run.ID != f.Run.ID {
		t.Fatalf("fork again: %+v, %v", again, err)
	}
	// From b: a only. From the start: nothing.
	fb, err := e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Step: "b"})
	if err != nil || !fb.Created {
		t.Fatalf("fork at b: %+v, %v", fb, err)
	}
	if got := e.stepIDs(fb.Run.ID); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("fork at b steps %v", got)
	}
	fs, err := e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Version: "v2"})
	if err != nil || !fs.Created || fs.Run.Version != "v2" {
		t.Fatalf("fork from start: %+v, %v", fs, err)
	}
	if got := e.stepIDs(fs.Run.ID); len(got) != 0 {
		t.Fatalf("fork from start steps %v", got)
	}

	// The claim delivers the copied steps for replay.
	c := e.claimOne(claimParams(uuid.New(), 1, store.TypeVersion{Type: "T", Version: "v1"}), f.Run.ID)
	if len(c.Steps) != 2 || c.Steps[0].StepID != "a" || c.Steps[1].StepID != "b" || c.Steps[1].Status != store.StepCompleted {
		t.Fatalf("claimed steps %+v", c.Steps)
	}

	// Links both ways.
	l, err := e.s.RunsForkLinks(e.ctx, "ns", old.ID)
	if err != nil || l.ForkedFrom != nil || len(l.Forks) != 3 || l.Forks[0].RunID != f.Run.ID || l.Forks[0].Step != "c" ||
		l.Forks[0].Status != store.StatusRunning || l.Forks[2].Step != "" {
		t.Fatalf("links of old: %+v, %v", l, err)
	}
	l, err = e.s.RunsForkLinks(e.ctx, "ns", f.Run.ID)
	if err != nil || l.ForkedFrom == nil || *l.ForkedFrom != old.ID || l.ForkedAtStep != "c" || len(l.Forks) != 0 {
		t.Fatalf("links of fork: %+v, %v", l, err)
	}

	// Errors.
	_, err = e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: uuid.New()})
	wantErr(t, err, store.ErrNotFound)
	_, err = e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "other", RunID: old.ID})
	wantErr(t, err, store.ErrNotFound)
	_, err = e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Step: "nope"})
	wantErr(t, err, store.ErrInvalidArgument, "nope")
	_, err = e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: e.insertTemplate("ns", "q", "T")})
	wantErr(t, err, store.ErrNotFound)
	_, err = e.s.RunsForkLinks(e.ctx, "ns", uuid.New())
	wantErr(t, err, store.ErrNotFound)
}

func TestRunsForkConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.failedRun("T", `1`, threeSteps()...)
	const n = 8
	var wg sync.WaitGroup
	forks := make([]store.Fork, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forks[i], errs[i] = e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: old.ID, Step: "b"})
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if forks[i].Run.ID != forks[0].Run.ID {
			t.Fatalf("two forks: %s and %s", forks[i].Run.ID, forks[0].Run.ID)
		}
		if forks[i].Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d requests created the fork", created)
	}
	var count int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.workflow_runs WHERE forked_from = $1`, old.ID).Scan(&count); err != nil || count != 1 {
		t.Fatalf("%d forks, %v", count, err)
	}
}

func TestRunsForkMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var failed []uuid.UUID
	for range 3 {
		failed = append(failed, e.failedRun("F", `1`, threeSteps()...).ID)
	}
	// Another type, and one of F that failed without a failed step.
	e.failedRun("G", `1`, threeSteps()...)
	bare := e.failedRun("F", `1`)

	res, err := e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Type: "F", FromFailedStep: true, ErrorType: "Boom"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 3 || res.Forked != 3 || res.AlreadyForked != 0 || res.Skipped != 0 || len(res.Forks) != 3 {
		t.Fatalf("first: %+v", res)
	}
	for _, f := range res.Forks {
		if !slices.Contains(failed, f.From) || f.Step != "c" || !f.Created {
			t.Fatalf("fork %+v", f)
		}
		if got := e.stepIDs(f.Run.ID); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("fork steps %v", got)
		}
	}
	res, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Type: "F", FromFailedStep: true, ErrorType: "Boom"})
	if err != nil || res.Matched != 3 || res.Forked != 0 || res.AlreadyForked != 3 {
		t.Fatalf("second: %+v, %v", res, err)
	}
	// Without the error type, the bare run is forked from the start.
	res, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Type: "F", FromFailedStep: true})
	if err != nil || res.Matched != 4 || res.Forked != 1 || res.AlreadyForked != 3 {
		t.Fatalf("third: %+v, %v", res, err)
	}
	for _, f := range res.Forks {
		if f.Created && (f.From != bare.ID || f.Step != "") {
			t.Fatalf("bare fork %+v", f)
		}
	}
	// A step some runs did not record skips them; a limit bounds.
	res, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Step: "a", Limit: 2})
	if err != nil || res.Matched != 2 || res.Forked+res.Skipped != 2 {
		t.Fatalf("step a: %+v, %v", res, err)
	}
	// The dead-letter grouping selects as the view groups.
	groups, err := e.s.RunsDeadLetters(e.ctx, "ns")
	if err != nil || len(groups) == 0 {
		t.Fatalf("groups %v, %v", groups, err)
	}
	res, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Type: "G", ErrorGroup: groups[0].Fingerprint, Step: "b"})
	if err != nil || res.Matched != 1 || res.Forked != 1 {
		t.Fatalf("group: %+v, %v", res, err)
	}
	res, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", ErrorGroup: "no such error"})
	if err != nil || res.Matched != 0 {
		t.Fatalf("no group: %+v, %v", res, err)
	}

	_, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Step: "a", FromFailedStep: true})
	wantErr(t, err, store.ErrInvalidArgument)
	_, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Status: store.StatusScheduled})
	wantErr(t, err, store.ErrInvalidArgument)
	_, err = e.s.RunsForkMany(e.ctx, store.RunsForkManyParams{Namespace: "ns", Limit: store.MaxForkMany + 1})
	wantErr(t, err, store.ErrInvalidArgument)
}

// The query language's error_type is the error type of the run's failed
// step, the one fork-many's ErrorType selects by: one field, one meaning.
func TestQueryErrorTypeIsTheFailedStepsType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boom := e.failedRun("F", `1`, threeSteps()...)
	bare := e.failedRun("F", `1`)
	retried := e.failedRun("F", `1`, store.StepsRecordParams{StepID: "b", Attempt: 1, Status: store.StepFailed, Error: "flaky", ErrorType: "Flaky"},
		store.StepsRecordParams{StepID: "b", Attempt: 2, Status: store.StepCompleted, Output: []byte(`"B"`)})
	for q, want := range map[string][]uuid.UUID{
		`error_type = 'Boom'`:              {boom.ID},
		`error_type IS NULL`:               {retried.ID, bare.ID},
		`error_type STARTS_WITH 'B'`:       {boom.ID},
		`error_type IN ('Flaky', 'Nope')`:  {},
		`type = 'F' AND error_type != 'X'`: {boom.ID},
	} {
		got := e.query(q)
		slices.SortFunc(got, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		slices.SortFunc(want, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", q, got, want)
		}
	}
	_, groups, err := e.s.RunsCountQuery(e.ctx, "ns", "", "error_type")
	if err != nil || fmtGroups(groups) != "<none>=2 Boom=1" {
		t.Errorf("count by error_type: %s %v", fmtGroups(groups), err)
	}
}
