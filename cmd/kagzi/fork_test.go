package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

// failWithSteps starts a run of typ, records completed steps a and b and a
// failed step c as a worker would, and fails the run.
func (c *cli) failWithSteps(typ string) uuid.UUID {
	c.t.Helper()
	var s startJSON
	c.okJSON(&s, "run", "start", typ, "--input", `{"n":1}`)
	id := uuid.MustParse(s.RunID)
	st := c.store()
	ctx := context.Background()
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: typ}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].ID != id {
		c.t.Fatalf("claim: %v %v", claimed, err)
	}
	l := store.Lease{Namespace: "default", RunID: id, Token: claimed[0].LeaseToken}
	for _, sp := range []store.StepsRecordParams{
		{StepID: "a", Status: store.StepCompleted, Output: []byte(`1`)},
		{StepID: "b", Status: store.StepCompleted, Output: []byte(`2`)},
		{StepID: "c", Status: store.StepFailed, Error: "boom", ErrorType: "Boom", NonRetryable: true},
	} {
		sp.Lease, sp.Attempt, sp.Kind = l, 1, store.StepFunction
		if err := st.StepsRecord(ctx, sp); err != nil {
			c.t.Fatal(err)
		}
	}
	if _, err := st.RunsFailAttempt(ctx, l, "boom", "Boom", true); err != nil {
		c.t.Fatal(err)
	}
	return id
}

func TestRunFork(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.failWithSteps("Flaky")

	out := c.ok("run", "fork", id.String(), "--step", "c")
	mustContain(t, "run fork", out, "Forked run", "from "+id.String(), "at step c", "PENDING")
	var f forkJSON
	c.okJSON(&f, "run", "fork", id.String(), "--step", "c")
	if f.Created || f.ForkedFrom != id || f.Step != "c" || f.Run.Status != store.StatusPending || f.Run.Type != "Flaky" ||
		compact(f.Run.Input) != `{"n":1}` {
		t.Fatalf("fork again: %+v", f)
	}
	out = c.ok("run", "fork", id.String(), "--step", "c")
	mustContain(t, "run fork again", out, "already forked", f.RunID.String())

	var show runShowJSON
	c.okJSON(&show, "run", "show", f.RunID.String())
	if show.ForkedFrom == nil || *show.ForkedFrom != id || show.ForkedAtStep == nil || *show.ForkedAtStep != "c" ||
		len(show.Steps) != 2 || show.Steps[0].StepID != "a" || show.Steps[1].StepID != "b" {
		t.Fatalf("show fork: %+v", show)
	}
	mustContain(t, "run show fork", c.ok("run", "show", f.RunID.String()), "Forked from:", id.String()+" at step c")
	c.okJSON(&show, "run", "show", id.String())
	if show.ForkedFrom != nil || len(show.Forks) != 1 || show.Forks[0].RunID != f.RunID || show.Status != store.StatusFailed {
		t.Fatalf("show old: %+v", show)
	}
	mustContain(t, "run show old", c.ok("run", "show", id.String()), "Forks:", f.RunID.String()+" at step c (PENDING)")

	// From the start: no step.
	out = c.ok("run", "fork", id.String())
	mustContain(t, "run fork from start", out, "at the start")

	_, errOut := c.fails(cliutil.ExitUsage, "run", "fork", id.String(), "--step", "nope")
	mustContain(t, "unknown step", errOut, "nope")
	_, errOut = c.fails(cliutil.ExitFailed, "run", "fork", uuid.NewString())
	mustContain(t, "unknown run", errOut, "not found")
	c.fails(cliutil.ExitUsage, "run", "fork", "nope")
}

func TestRunForkMany(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ids []uuid.UUID
	for range 3 {
		ids = append(ids, c.failWithSteps("Bulk"))
	}
	c.failWithSteps("Other")

	var res forkManyJSON
	c.okJSON(&res, "run", "fork-many", "--type", "Bulk", "--from-failed-step", "--error-type", "Boom", "--since", "1h")
	if res.Matched != 3 || res.Forked != 3 || res.AlreadyForked != 0 || len(res.Forks) != 3 {
		t.Fatalf("first: %+v", res)
	}
	for _, f := range res.Forks {
		if f.Step != "c" || !f.Created {
			t.Fatalf("fork %+v", f)
		}
	}
	out := c.ok("run", "fork-many", "--type", "Bulk", "--from-failed-step")
	mustContain(t, "fork-many again", out, "Matched 3 runs: forked 0, already forked 3")
	c.okJSON(&res, "run", "fork-many", "--step", "zz", "--limit", "2")
	if res.Matched != 2 || res.Skipped != 2 || res.Forked != 0 {
		t.Fatalf("unknown step: %+v", res)
	}
	c.okJSON(&res, "run", "fork-many", "--type", "Bulk", "--until", "1h")
	if res.Matched != 0 {
		t.Fatalf("until an hour ago: %+v", res)
	}

	c.fails(cliutil.ExitUsage, "run", "fork-many", "--step", "a", "--from-failed-step")
	c.fails(cliutil.ExitUsage, "run", "fork-many", "--limit", "0")
	c.fails(cliutil.ExitUsage, "run", "fork-many", "--since", "yesterday")
	c.fails(cliutil.ExitUsage, "run", "fork-many", "--status", "BOGUS")
}
