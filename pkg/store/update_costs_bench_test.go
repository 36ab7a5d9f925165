package store_test

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkRunsUpdateFixedCosts splits what one statement writing a single
// row of workflow_runs costs Postgres besides its row: the CHECK
// constraints, stored as text, which Postgres reads back and prepares once
// per statement, and the statement triggers (kagzi.notify_runs,
// kagzi.cancellations). (Row triggers with a WHEN clause, prepared the
// same way, were folded into kagzi.notify_runs by migration 039.) At a low
// start rate every claim and completion is such a statement, so these are
// paid once per run there; at saturation a statement carries a hundred
// runs and they vanish. Each sub-benchmark times single-row updates of
// running runs inside one server-side loop, so neither the network nor a
// commit is in the figure, on a database of its own where one part is
// removed; its difference from "as-is" is that part's cost:
//
//	go test -run '^$' -bench BenchmarkRunsUpdateFixedCosts -benchtime 20000x ./pkg/store/
func BenchmarkRunsUpdateFixedCosts(b *testing.B) {
	const (
		checks   = `DO $$ DECLARE c text; BEGIN FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'kagzi.workflow_runs'::regclass AND contype = 'c' LOOP EXECUTE format('ALTER TABLE kagzi.workflow_runs DROP CONSTRAINT %I', c); END LOOP; END $$`
		stmtTrig = `ALTER TABLE kagzi.workflow_runs DISABLE TRIGGER workflow_runs_notify_update, DISABLE TRIGGER workflow_runs_cancellations`
	)
	// extend moves the lease's expiry (a heartbeat; the claim writes the
	// row as much); end completes the run, which also sends its done
	// notification and probes for live children. Each is a DO loop over
	// the first %d runs of the bench namespace (a DO block takes no
	// parameters), and each moves the lease's expiry, which
	// benchOneRowWrites checks.
	writes := []struct{ name, loop string }{
		{"extend", `DO $$ DECLARE r record; BEGIN
	FOR r IN SELECT run_id FROM kagzi.workflow_runs WHERE namespace_id = 'bench' ORDER BY run_id LIMIT %d LOOP
		UPDATE kagzi.workflow_runs SET lease_expires_at = now() + interval '1 minute' WHERE run_id = r.run_id;
	END LOOP; END $$`},
		{"end", `DO $$ DECLARE r record; BEGIN
	FOR r IN SELECT run_id FROM kagzi.workflow_runs WHERE namespace_id = 'bench' ORDER BY run_id LIMIT %d LOOP
		UPDATE kagzi.workflow_runs SET status = 'COMPLETED', finished_at = now(), locked_by = NULL,
			lease_expires_at = now() + interval '1 minute' WHERE run_id = r.run_id;
	END LOOP; END $$`},
	}
	for _, v := range []struct {
		name    string
		removed []string
	}{
		{"as-is", nil},
		{"without-checks", []string{checks}},
		{"without-statement-triggers", []string{stmtTrig}},
		{"bare", []string{checks, stmtTrig}},
	} {
		for _, w := range writes {
			b.Run(w.name+"/"+v.name, func(b *testing.B) { benchOneRowWrites(b, w.loop, v.removed) })
		}
	}
}

// benchOneRowWrites runs loop over b.N running runs, on a database of its
// own from which the statements of removed took something away.
func benchOneRowWrites(b *testing.B, loop string, removed []string) {
	s, pool := benchStore(b)
	ctx := context.Background()
	createDue(ctx, b, s, "q", b.N)
	if _, err := pool.Exec(ctx, `UPDATE kagzi.workflow_runs SET status = 'RUNNING', locked_by = gen_random_uuid(),
		available_at = NULL, lease_expires_at = now() WHERE namespace_id = $1`, benchNamespace); err != nil {
		b.Fatal(err)
	}
	for _, q := range append(removed, "VACUUM ANALYZE kagzi.workflow_runs") {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if _, err := pool.Exec(ctx, fmt.Sprintf(loop, b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kagzi.workflow_runs
		WHERE namespace_id = $1 AND lease_expires_at > now() + interval '50 seconds'`, benchNamespace).Scan(&n); err != nil || n != b.N {
		b.Fatalf("updated %d of %d runs: %v", n, b.N, err)
	}
}
