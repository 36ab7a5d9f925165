package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkClaimParts splits the claim of one run at a low start rate (the
// claim hop of dispatch latency) into what any claim of it must pay. Each
// sub-benchmark creates a due run untimed and times one statement on one
// connection, planning, execution and commit:
//
//   - round-trip: SELECT 1, the network and protocol alone;
//   - narrow-update: a one-row update of a two-column table, which adds
//     a write and its commit's WAL flush;
//   - lease-by-key: the lease a claim writes, on the run named by its
//     primary key (no search, no guards, no steps read);
//   - lease-by-key/no-triggers, /no-flush, /neither: the same with the
//     statement triggers off for the session (session_replication_role),
//     with the commit not waiting for its flush (synchronous_commit), or
//     both;
//   - claim-by-key: the claim's own update and the run's columns it
//     returns (the input whole, not capped), on the run named by its
//     primary key, with the claim's namespace, queue, type and version
//     tests but not its search, its limit, pause and rate guards, or the
//     read of the run's steps: what the claim of a run named in its
//     wakeup would at least cost;
//   - claim: the claim the dispatcher makes (RunsClaimStats).
//
// The differences are the parts: the flush, the triggers, the width and
// indexes of workflow_runs, and the claim's search and reads:
//
//	go test -run '^$' -bench BenchmarkClaimParts -benchtime 2000x ./pkg/store/
func BenchmarkClaimParts(b *testing.B) {
	const lease = `UPDATE kagzi.workflow_runs r SET status = 'RUNNING', locked_by = $2, lease_token = r.lease_token + 1,
	lease_expires_at = now() + interval '1 minute', available_at = NULL, waiting_on = NULL, held = false,
	attempts = greatest(r.attempts, 1), started_at = coalesce(r.started_at, now())
WHERE r.run_id = $1 AND r.status IN ('PENDING', 'SLEEPING')`
	const byKey = `UPDATE kagzi.workflow_runs r SET status = 'RUNNING', locked_by = $2, lease_token = r.lease_token + 1,
	lease_expires_at = now() + interval '1 minute', available_at = NULL, waiting_on = NULL, limited = false, held = false,
	attempts = greatest(r.attempts, 1), started_at = coalesce(r.started_at, now()), cancel_delivered = r.cancel_requested_at IS NOT NULL,
	version = CASE WHEN r.version = '' THEN ($5::text[])[array_position($4::text[], r.workflow_type)] ELSE r.version END
WHERE r.run_id = $1 AND r.namespace_id = $3 AND r.task_queue = $7 AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
	AND r.workflow_type = ANY($4::text[]) AND (r.version = '' OR r.workflow_type || '@' || r.version = ANY($6::text[]))
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, r.input, r.event_seq`
	leaseArgs := func(run, worker uuid.UUID) []any { return []any{run, worker} }
	byKeyArgs := func(run, worker uuid.UUID) []any {
		return []any{run, worker, benchNamespace, []string{"T"}, []string{""}, []string{"T@"}, oneQueue}
	}
	for _, v := range []struct {
		name     string
		settings []string
		write    string
		args     func(run, worker uuid.UUID) []any // write's arguments, if any
	}{
		{"round-trip", nil, `SELECT 1`, nil},
		{"narrow-update", nil, `UPDATE bench_narrow SET v = v + 1 WHERE id = 1`, nil},
		{"lease-by-key", nil, lease, leaseArgs},
		{"lease-by-key/no-triggers", []string{`SET session_replication_role = replica`}, lease, leaseArgs},
		{"lease-by-key/no-flush", []string{`SET synchronous_commit = off`}, lease, leaseArgs},
		{"lease-by-key/neither", []string{`SET session_replication_role = replica`, `SET synchronous_commit = off`}, lease, leaseArgs},
		{"claim-by-key", nil, byKey, byKeyArgs},
		{"claim", nil, "", nil},
	} {
		b.Run(v.name, func(b *testing.B) { benchClaimPart(b, v.settings, v.write, v.args) })
	}
}

// benchClaimPart times write (or, when empty, the store's claim) once per
// run created, on a connection with settings applied; args, if set, gives
// write's arguments for the run created and the worker claiming it.
func benchClaimPart(b *testing.B, settings []string, write string, args func(run, worker uuid.UUID) []any) {
	s, pool := benchStore(b)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	for _, q := range append([]string{`CREATE TABLE bench_narrow (id int PRIMARY KEY, v int NOT NULL)`,
		`INSERT INTO bench_narrow VALUES (1, 0)`}, settings...) {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	worker := uuid.New()
	p := claimOneParams(worker)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run := createOneUntimed(ctx, b, s)
		var n int64
		if write == "" {
			runs, _, err := s.RunsClaimStats(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			n = int64(len(runs))
		} else {
			var a []any
			if args != nil {
				a = args(run.ID, worker)
			}
			tag, err := conn.Exec(ctx, write, a...)
			if err != nil {
				b.Fatal(err)
			}
			n = tag.RowsAffected()
		}
		if n != 1 {
			b.Fatalf("%d rows, want 1", n)
		}
	}
}
