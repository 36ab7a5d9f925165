package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Taking runs back from holders that went away, failing runs past their
// deadlines, and persisting the heartbeats that keep leases alive.

// recoverFrom computes, per run r, whether its attempts are exhausted and the
// backoff delay, from its retry policy with the defaults of package retry. It
// mirrors retry.Policy.Delay (jitter included) in SQL so a whole batch moves
// in one statement.
const recoverFrom = `
	CROSS JOIN LATERAL (
		SELECT coalesce((r.retry_policy->>'max_attempts')::int, 5) AS max_attempts,
		       coalesce((r.retry_policy->>'initial_interval_ms')::float8, 1000) AS initial_ms,
		       coalesce((r.retry_policy->>'backoff_coefficient')::float8, 2) AS coef,
		       coalesce((r.retry_policy->>'max_interval_ms')::float8, 60000) AS max_ms,
		       coalesce((r.retry_policy->>'jitter')::float8, 0.2) AS jitter
	) pol
	CROSS JOIN LATERAL (
		SELECT (pol.max_attempts > 0 AND r.attempts >= pol.max_attempts) AS exhausted,
		       -- Past e^600 the max interval is reached long since; power()
		       -- would overflow float8 (an error that fails the whole batch).
		       CASE WHEN greatest(r.attempts - 1, 0) * ln(greatest(pol.coef, 1)) >= 600 THEN pol.max_ms
		            ELSE least(pol.initial_ms * power(pol.coef, greatest(r.attempts - 1, 0)), pol.max_ms) END
		         * (1 + greatest(pol.jitter, 0) * (2 * random() - 1)) AS delay_ms
	) x`

// lostSet takes runs back from a holder that went away (recoverRunsSQL;
// @error is the error message): retried with the policy's backoff while attempts
// remain, failed once exhausted. Only a run its holder is known to have
// received — t.held: a heartbeat of the holder listed it since the claim —
// counts the lost attempt, and may fail as exhausted. A run that never
// reached its holder (the dispatcher died between claim and delivery, or
// the worker died with a request the dispatcher then served) goes back to
// PENDING, claimable at once, its attempts and error unchanged.
const lostSet = `
	locked_by = NULL, lease_expires_at = NULL, held = false,
	error = CASE WHEN t.held THEN @error ELSE r0.error END,
	status = CASE WHEN t.held AND x.exhausted THEN 'FAILED' ELSE 'PENDING' END,
	finished_at = CASE WHEN t.held AND x.exhausted THEN now() END,
	attempts = CASE WHEN t.held AND NOT x.exhausted THEN r0.attempts + 1 ELSE r0.attempts END,
	available_at = CASE WHEN NOT t.held THEN now() WHEN x.exhausted THEN NULL
		ELSE now() + x.delay_ms * interval '1 millisecond' END`

// RecoveredRun is a run taken back from a lost holder.
type RecoveredRun struct {
	Namespace string
	RunID     uuid.UUID
	Queue     string
	Status    RunStatus // PENDING (retried) or FAILED (attempts exhausted)
	// AvailableAt is when the retry is due (nil when failed).
	AvailableAt *time.Time
	// Undelivered is true for a run its holder never confirmed receiving
	// (no heartbeat listed it): it is PENDING again, claimable at once,
	// without counting an attempt.
	Undelivered bool
}

// recoverHead and recoverTail make a statement that takes back the
// running runs a condition between them picks (see lostSet): the runs
// @received lists were received by their holder, whatever their held flag.
const (
	recoverHead = `t AS (
	SELECT run_id, held OR run_id = ANY(@received::uuid[]) AS held FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' AND `
	recoverTail = ` FOR UPDATE SKIP LOCKED
), u AS (
	UPDATE kagzi.workflow_runs r0 SET ` + lostSet + `
	FROM t JOIN kagzi.workflow_runs r ON r.run_id = t.run_id ` + recoverFrom + `
	WHERE r0.run_id = t.run_id
	RETURNING r0.namespace_id, r0.run_id, r0.task_queue, r0.status, r0.available_at, r0.parent_run_id, r0.parent_step_id, r0.error,
		NOT t.held AS undelivered
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status = 'FAILED'
), touched AS (
	SELECT run_id FROM u
), ` + parentWakeCTEs + `
SELECT namespace_id, run_id, task_queue, status, available_at, undelivered FROM u`
)

// leaseHolders is a CTE, h, that walks the lease index (locked_by,
// lease_expires_at over running runs) by a loose scan: one probe per
// worker that holds running runs, each yielding the worker and its
// earliest lease expiry (the first entry of its range). Workers holding
// runs are few next to the runs they hold, and every running run has a
// holder (workflow_runs_running_holder_check), so the walk sees them all.
const leaseHolders = `h AS (
	(SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' ORDER BY locked_by, lease_expires_at LIMIT 1)
	UNION ALL
	SELECT n.locked_by, n.first FROM h CROSS JOIN LATERAL (
		SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
		WHERE status = 'RUNNING' AND locked_by > h.locked_by
		ORDER BY locked_by, lease_expires_at LIMIT 1) n
)`

var (
	runsRecoverWorkerSQL = stmt("RunsRecoverWorker")
	// The expired leases are, for each holder whose earliest lease expired,
	// a range of its entries in the lease index.
	runsExpireLeasesSQL    = stmt("RunsExpireLeases")
	runsNextLeaseExpirySQL = stmt("RunsNextLeaseExpiry")
)

func (s *Store) recoverRuns(ctx context.Context, what string, q *namedSQL, args pgx.NamedArgs) ([]RecoveredRun, error) {
	rows, err := q.query(ctx, s.db, args)
	if err != nil {
		return nil, mapErr(what, err)
	}
	defer rows.Close()
	var out []RecoveredRun
	for rows.Next() {
		var rr RecoveredRun
		if err := rows.Scan(&rr.Namespace, &rr.RunID, &rr.Queue, &rr.Status, &rr.AvailableAt, &rr.Undelivered); err != nil {
			return nil, mapErr(what, err)
		}
		out = append(out, rr)
	}
	return out, mapErr(what, rows.Err())
}

// RunsRecoverWorker takes back every run the worker holds: each it had
// received is retried with backoff if attempts remain, else failed; each it
// never received is claimable again at once, without an attempt counted
// (see lostSet). A run is received when a persisted heartbeat marked it
// held, or when it is among received: the runs the worker's last heartbeat
// listed, which the caller heard (a flush may have skipped marking them).
func (s *Store) RunsRecoverWorker(ctx context.Context, workerID uuid.UUID, received ...uuid.UUID) ([]RecoveredRun, error) {
	if received == nil {
		received = []uuid.UUID{}
	}
	return s.recoverRuns(ctx, "recover worker runs", runsRecoverWorkerSQL,
		pgx.NamedArgs{"error": "worker " + workerID.String() + " lost", "worker_id": workerID, "received": received})
}

// RunsExpireLeases takes back every running run whose lease expired at or
// before now, like RunsRecoverWorker (a run is received when held).
func (s *Store) RunsExpireLeases(ctx context.Context, now time.Time) ([]RecoveredRun, error) {
	return s.recoverRuns(ctx, "expire leases", runsExpireLeasesSQL,
		pgx.NamedArgs{"error": "lease expired", "now": now, "received": []uuid.UUID{}})
}

// RunsNextLeaseExpiry returns the earliest lease expiry of a running run, or
// nil when none runs.
func (s *Store) RunsNextLeaseExpiry(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextLeaseExpirySQL.queryRow(ctx, s.db, pgx.NamedArgs{}).Scan(&t)
	return t, mapErr("next lease expiry", err)
}

// DeadlineError is the error recorded on a run that missed its deadline.
const DeadlineError = "deadline exceeded"

// runsFailPastDeadlineSQL is the statement of RunsFailPastDeadline.
var runsFailPastDeadlineSQL = stmt("RunsFailPastDeadline")

// RunsFailPastDeadline fails every live run whose deadline is at or before
// now, whatever its state, and returns them.
func (s *Store) RunsFailPastDeadline(ctx context.Context, now time.Time) ([]Run, error) {
	rows, err := runsFailPastDeadlineSQL.query(ctx, s.db, pgx.NamedArgs{"now": now, "error": DeadlineError})
	if err != nil {
		return nil, mapErr("fail past deadline", err)
	}
	runs, err := collectRuns(rows)
	return runs, mapErr("fail past deadline", err)
}

// runsNextDeadlineSQL is the statement of RunsNextDeadline.
var runsNextDeadlineSQL = stmt("RunsNextDeadline")

// RunsNextDeadline returns the earliest deadline of a live run, or nil.
func (s *Store) RunsNextDeadline(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextDeadlineSQL.queryRowPos(ctx, s.db).Scan(&t)
	return t, mapErr("next deadline", err)
}

// RunsExtendLeasesParams: one live worker's heartbeat, as the reaper
// persists it.
type RunsExtendLeasesParams struct {
	WorkerID uuid.UUID
	// RunIDs are the runs the worker says it holds.
	RunIDs []uuid.UUID
	Until  time.Time
}

// runsExtendLeasesSQL is RunsExtendLeases' statement.
var runsExtendLeasesSQL = stmt("RunsExtendLeases")

// RunsExtendLeases persists heartbeats in one statement: the leases of the
// runs each worker lists are extended to its Until, and those runs are
// marked held (received by their worker, so a lost attempt counts: see
// lostSet); a run locked to one of
// these workers that it no longer lists (a delivery lost on the way) is
// released, claimable at once, if its lease was last set more than grace
// before the heartbeat (so a delivery still in flight when the heartbeat was
// sent is left alone). It returns the number extended and released.
func (s *Store) RunsExtendLeases(ctx context.Context, hbs []RunsExtendLeasesParams, grace time.Duration) (extended, released int64, err error) {
	if len(hbs) == 0 {
		return 0, 0, nil
	}
	var workers, runWorkers, runs []uuid.UUID
	var untils []time.Time
	for _, hb := range hbs {
		workers = append(workers, hb.WorkerID)
		untils = append(untils, hb.Until)
		for _, r := range hb.RunIDs {
			runWorkers = append(runWorkers, hb.WorkerID)
			runs = append(runs, r)
		}
	}
	// Rows a report transaction holds are skipped rather than waited for:
	// that transaction is about to move the run on anyway, and waiting
	// would let its row locks and ours, taken in different orders,
	// deadlock. A skipped lease is extended by the next heartbeat's flush,
	// long before it expires.
	err = runsExtendLeasesSQL.queryRow(ctx, s.db, pgx.NamedArgs{"worker_ids": workers, "untils": untils,
		"run_worker_ids": runWorkers, "run_ids": runs, "grace_ms": grace.Milliseconds()}).Scan(&extended, &released)
	if err != nil {
		return 0, 0, mapErr("extend leases", err)
	}
	return extended, released, nil
}
