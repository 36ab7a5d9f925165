package store_test

import (
	"context"
	"testing"

	"github.com/kagzi/kagzi/pkg/store"
)

// A start is planned once per session and the plan kept: one run at a
// time (a start at a low rate), Postgres would otherwise plan the insert
// afresh at every execution (a plan for one element looks cheaper than
// the generic plan, which assumes arrays of ten), 0.28 ms a start. The
// session's prepared insert must have run on its generic plan only.
func TestRunsCreatePlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := oneSession(t)
	for range 8 {
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
			t.Fatal(err)
		}
	}
	// Many at once reuse the same plan.
	ps := make([]store.RunsCreateParams, 300)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
	}
	if _, err := s.RunsCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	plans := preparedPlans(t, pool, "%INSERT INTO kagzi.workflow_runs AS r%")
	if len(plans) != 1 || plans[0].custom != 0 || plans[0].generic < 9 {
		t.Fatalf("the start's insert ran on %+v, want one statement with 9 or more generic plans and no custom one", plans)
	}
	n, err := s.RunsCount(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if n[store.StatusPending] != 308 {
		t.Fatalf("pending runs: %v, want 308", n)
	}
}
