package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestRunRetry(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var s startJSON
	c.okJSON(&s, "run", "start", "Flaky", "--deadline", "1h")
	id := uuid.MustParse(s.RunID)

	// Only a failed run can be retried.
	_, errOut := c.fails(cliutil.ExitFailed, "run", "retry", s.RunID)
	mustContain(t, "stderr", errOut, "only a FAILED run", "PENDING")
	c.fails(cliutil.ExitUsage, "run", "retry", "nope")
	_, errOut = c.fails(cliutil.ExitFailed, "run", "retry", uuid.NewString())
	mustContain(t, "stderr", errOut, "not found")

	// Fail it as a worker that ran out of attempts would.
	st := c.store()
	ctx := context.Background()
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Flaky"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := st.RunsFailAttempt(ctx, store.Lease{Namespace: "default", RunID: id, Token: claimed[0].LeaseToken}, "boom", "E", true); err != nil {
		t.Fatal(err)
	}
	var page runsPage
	c.okJSON(&page, "run", "list", "--status", "FAILED")
	if len(page.Runs) != 1 || page.Runs[0].RunID != id {
		t.Fatalf("dead letters: %+v", page.Runs)
	}

	out := c.ok("run", "retry", s.RunID)
	mustContain(t, "run retry", out, "Retrying run", s.RunID, "PENDING")
	r, err := st.RunsGet(ctx, "default", id)
	if err != nil || r.Status != store.StatusPending || r.Attempts != 0 || r.Error != "" || r.FinishedAt != nil || r.DeadlineAt == nil {
		t.Fatalf("after retry: %+v %v", r, err)
	}
	// JSON output, and a second retry of the now pending run fails.
	_, errOut = c.fails(cliutil.ExitFailed, "--json", "run", "retry", s.RunID)
	mustContain(t, "stderr", errOut, "only a FAILED run")
}

func TestLimits(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("limit", "list")
	mustContain(t, "empty list", out, "No concurrency limits")
	out = c.ok("limit", "set", "ProcessOrder", "10", "--queue", "orders")
	mustContain(t, "limit set", out, "At most 10", "ProcessOrder", "orders")
	var l ops.LimitJSON
	c.okJSON(&l, "limit", "set", "Report", "0")
	if l.Queue != "default" || l.Type != "Report" || l.MaxRunning != 0 || l.UpdatedAt.IsZero() {
		t.Fatalf("limit set --json: %+v", l)
	}
	var ls []ops.LimitJSON
	c.okJSON(&ls, "limit", "list")
	if len(ls) != 2 || ls[0].Queue != "default" || ls[1].Type != "ProcessOrder" || ls[1].MaxRunning != 10 {
		t.Fatalf("limit list: %+v", ls)
	}
	c.fails(cliutil.ExitUsage, "limit", "set", "Report", "-1")
	c.fails(cliutil.ExitUsage, "limit", "set", "Report", "many")
	c.fails(cliutil.ExitUsage, "limit", "set", "Report")
	c.ok("limit", "remove", "ProcessOrder", "--queue", "orders")
	_, errOut := c.fails(cliutil.ExitFailed, "limit", "rm", "ProcessOrder", "--queue", "orders")
	mustContain(t, "stderr", errOut, "not found")
}
