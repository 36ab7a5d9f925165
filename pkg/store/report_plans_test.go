package store_test

import (
	"context"
	"fmt"
	"testing"

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
