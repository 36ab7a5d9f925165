package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/store"
)

// Reports reach the runs they name by primary key, whatever the
// statistics say of the running runs: statistics taken while few runs
// ran (a fresh database, or a quiet hour) made the reports' join with
// workflow_runs read every running run through the lease index, a
// quarter of the report's cost at 500 running runs (docs/BENCHMARKS.md,
// "Reports by primary key").
func TestReportsReachRunsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := oneSession(t)
	const running = 2000
	ps := make([]store.RunsCreateParams, running)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
	}
	if _, err := s.RunsCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// Statistics with no run running, then every run running.
	if _, err := pool.Exec(ctx, "ANALYZE kagzi.workflow_runs"); err != nil {
		t.Fatal(err)
	}
	var items []store.RunsCompleteItem
	for len(items) < running {
		_, more := claimToComplete(t, s, 500)
		items = append(items, more...)
	}
	report := func(what string, fn func([]store.RunsCompleteItem) error) {
		t.Helper()
		batch := items[:70]
		items = items[70:]
		before := leaseIndexRead(t, pool)
		if err := fn(batch); err != nil {
			t.Fatal(err)
		}
		if read := leaseIndexRead(t, pool) - before; read > 0 {
			t.Errorf("%s of 70 runs read %d entries of the lease index (%d runs running)", what, read, len(items)+70)
		}
	}
	steps := func(batch []store.RunsCompleteItem) []store.StepsRecordParams {
		var ss []store.StepsRecordParams
		for _, it := range batch {
			ss = append(ss, store.StepsRecordParams{Lease: it.Lease, StepID: "s", Attempt: 1, Kind: store.StepFunction,
				Status: store.StepCompleted, Output: []byte(`1`)})
		}
		return ss
	}
	report("a step report", func(batch []store.RunsCompleteItem) error {
		res, err := s.StepsRecordBatch(ctx, steps(batch))
		for _, r := range res {
			if err == nil && r.Err != nil {
				err = r.Err
			}
		}
		return err
	})
	report("a completion", func(batch []store.RunsCompleteItem) error {
		return completed(s.RunsCompleteBatch(ctx, batch))
	})
	report("a release", func(batch []store.RunsCompleteItem) error {
		leases := make([]store.Lease, len(batch))
		for i := range batch {
			leases[i] = batch[i].Lease
		}
		n, err := s.RunsReleaseMany(ctx, leases)
		if err == nil && n != int64(len(batch)) {
			err = fmt.Errorf("released %d of %d", n, len(batch))
		}
		return err
	})
	report("a completion with its step", func(batch []store.RunsCompleteItem) error {
		ss := steps(batch)
		for i := range batch {
			batch[i].Steps = ss[i : i+1]
		}
		return completed(s.RunsCompleteBatch(ctx, batch))
	})
}

func completed(out []store.RunsCompleteOutcome, err error) error {
	if err != nil {
		return err
	}
	for _, o := range out {
		if o.Err != nil {
			return o.Err
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("no outcome")
	}
	return nil
}

// leaseIndexRead is how many entries scans of the lease index have read.
func leaseIndexRead(t *testing.T, pool *pgxpool.Pool) int64 {
	return statCount(t, pool, "SELECT coalesce(idx_tup_read, 0) FROM pg_stat_user_indexes WHERE schemaname = 'kagzi' AND indexrelname = 'workflow_runs_lease_idx'")
}

// Reports are planned once per session and the plan kept: reports of one
// run each (a low rate) were otherwise planned afresh at each execution
// whenever Postgres judged a plan for one element cheaper than the generic
// plan (0.3 ms a report, as much as running it). The session's prepared
// report statements must have run on their generic plans only.
func TestReportsPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := oneSession(t)
	ps := make([]store.RunsCreateParams, 16)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
	}
	if _, err := s.RunsCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		_, items := claimToComplete(t, s, 1)
		if i%2 == 1 {
			items[0].Steps = []store.StepsRecordParams{{Lease: items[0].Lease, StepID: "s", Attempt: 1, Kind: store.StepFunction,
				Status: store.StepCompleted, Output: []byte(`1`)}}
		}
		if err := completed(s.RunsCompleteBatch(ctx, items)); err != nil {
			t.Fatal(err)
		}
	}
	plans := preparedPlans(t, pool, "%AS running FROM unnest%")
	for _, p := range plans {
		if p.custom != 0 || p.generic != 8 {
			t.Errorf("a report statement ran on %d generic and %d custom plans, want 8 generic and none custom:\n%s", p.generic, p.custom, p.sql)
		}
	}
	if len(plans) != 2 {
		t.Fatalf("found %d prepared report statements, want 2 (with and without steps)", len(plans))
	}
}

// preparedPlan is how often one of a session's prepared statements ran on
// its generic plan and on plans made for its arguments.
type preparedPlan struct {
	sql             string
	generic, custom int64
}

// preparedPlans reads the session's prepared statements whose text is
// LIKE pattern (the pool has one connection: see oneSession).
func preparedPlans(t *testing.T, pool *pgxpool.Pool, pattern string) []preparedPlan {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE $1 AND statement NOT LIKE '%pg_prepared_statements%'`, pattern)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (preparedPlan, error) {
		var p preparedPlan
		return p, r.Scan(&p.sql, &p.generic, &p.custom)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
