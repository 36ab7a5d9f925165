package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Run transitions made on a worker's report that need more than one of the
// plain lease transitions in runs.go.

// RunsFailAttemptResult says what became of a failed attempt.
type RunsFailAttemptResult struct {
	// Status is PENDING (retried at AvailableAt), FAILED (final) or
	// CANCELLED (cancellation had been requested).
	Status      RunStatus
	AvailableAt *time.Time
	// Type is the run's workflow type, set when this call ended the attempt
	// (empty when a repeated report found it already ended).
	Type string
}

// failAttemptSet ends the attempt of RunsFailAttempt ($1 is the error):
// retried with the policy's backoff in a new retry epoch unless f.final
// (attempts exhausted, the error non-retryable, or cancellation requested,
// which ends the run CANCELLED rather than FAILED).
const failAttemptSet = `
	locked_by = NULL, lease_expires_at = NULL,
	error = $1,
	status = CASE WHEN NOT f.final THEN 'PENDING' WHEN r.cancel_requested_at IS NOT NULL THEN 'CANCELLED' ELSE 'FAILED' END,
	finished_at = CASE WHEN f.final THEN now() END,
	attempts = CASE WHEN f.final THEN r.attempts ELSE r.attempts + 1 END,
	epoch = CASE WHEN f.final THEN r.epoch ELSE r.epoch + 1 END,
	available_at = CASE WHEN f.final THEN NULL ELSE now() + x.delay_ms * interval '1 millisecond' END`

// RunsFailAttempt ends the current attempt with errMsg under the lease: the
// run is retried with its policy's backoff while attempts remain and the
// error is retryable (errType not listed as non-retryable and nonRetryable
// false), else it fails for good — or, if it was asked to cancel
// (RunsCancel), it ends CANCELLED: the workflow returned an error after the
// request, which is how it says it stopped. One statement.
func (s *Store) RunsFailAttempt(ctx context.Context, l Lease, errMsg, errType string, nonRetryable bool) (RunsFailAttemptResult, error) {
	var res RunsFailAttemptResult
	err := s.db.QueryRow(ctx, `
WITH u AS (
	UPDATE kagzi.workflow_runs r0 SET `+failAttemptSet+`
	FROM kagzi.workflow_runs r `+recoverFrom+`
	CROSS JOIN LATERAL (
		SELECT x.exhausted OR $5 OR coalesce(r.retry_policy->'non_retryable' ? $6, false)
			OR r.cancel_requested_at IS NOT NULL AS final
	) f
	WHERE r0.run_id = r.run_id AND r.namespace_id = $2 AND r.run_id = $3 AND r.lease_token = $4 AND r.status = 'RUNNING'
	RETURNING r0.run_id, r0.parent_run_id, r0.parent_step_id, r0.status, r0.error, r0.available_at, r0.workflow_type
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status IN ('FAILED', 'CANCELLED')
), touched AS (
	SELECT run_id FROM u
), `+parentWakeCTEs+`
SELECT status, available_at, workflow_type FROM u`, clipError(errMsg), l.Namespace, l.RunID, l.Token, nonRetryable, protocol.ClipText(errType, maxNameLen)).
		Scan(&res.Status, &res.AvailableAt, &res.Type)
	if err == nil {
		return res, nil
	}
	if !isNoRows(err) {
		return res, mapErr("fail attempt", err)
	}
	// A retried report finds the run already moved on under the same token.
	var st RunStatus
	var tok int64
	var at *time.Time
	err = s.db.QueryRow(ctx, `SELECT status, lease_token, available_at FROM kagzi.workflow_runs WHERE namespace_id = $1 AND run_id = $2`,
		l.Namespace, l.RunID).Scan(&st, &tok, &at)
	if err != nil {
		return res, mapErr(fmt.Sprintf("fail attempt %s", l.RunID), err)
	}
	if tok == l.Token && (st == StatusFailed || st == StatusPending || st == StatusCancelled) {
		return RunsFailAttemptResult{Status: st, AvailableAt: at}, nil
	}
	return res, fmt.Errorf("fail attempt %s: %w (run is %s under lease %d, report names lease %d)", l.RunID, ErrLeaseLost, st, tok, l.Token)
}

// RunsReleaseMany releases claimed runs that never reached their worker,
// claimable at once and without counting an attempt, in one statement.
// Runs whose lease moved on are left alone. Returns how many were released.
func (s *Store) RunsReleaseMany(ctx context.Context, leases []Lease) (int64, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	ns := make([]string, len(leases))
	ids := make([]string, len(leases))
	toks := make([]int64, len(leases))
	for i, l := range leases {
		ns[i], ids[i], toks[i] = l.Namespace, l.RunID.String(), l.Token
	}
	tag, err := s.db.Exec(ctx, `
UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL, lease_expires_at = NULL
FROM unnest($1::text[], $2::uuid[], $3::bigint[]) AS l(ns, run_id, tok)
WHERE r.namespace_id = l.ns AND r.run_id = l.run_id AND r.lease_token = l.tok AND r.status = 'RUNNING'`, ns, ids, toks)
	if err != nil {
		return 0, mapErr("release runs", err)
	}
	return tag.RowsAffected(), nil
}

// RunsCompleteItem is one run completion of RunsCompleteMany.
type RunsCompleteItem struct {
	Lease  Lease
	Output []byte
}

// RunsCompleteMany records many runs' successful ends in one statement (and
// wakes the parents of children among them, see parentWakeCTEs), so
// a batch of reports costs one update (and one pass of the notify trigger)
// instead of one per run. errs[i] is the outcome of items[i], as
// RunsComplete would return it, and types[i] the run's workflow type when
// this call completed it (empty when a repeated report found it already
// completed); err is set when the statement as a whole failed.
func (s *Store) RunsCompleteMany(ctx context.Context, items []RunsCompleteItem) (errs []error, types []string, err error) {
	errs = make([]error, len(items))
	types = make([]string, len(items))
	var (
		ns      []string
		ids     []string
		toks    []int64
		outs    [][]byte
		sentIdx []int
	)
	for i, it := range items {
		if errs[i] = s.checkPayload(ctx, "output", it.Output); errs[i] != nil {
			continue
		}
		ns = append(ns, it.Lease.Namespace)
		ids = append(ids, it.Lease.RunID.String())
		toks = append(toks, it.Lease.Token)
		outs = append(outs, it.Output)
		sentIdx = append(sentIdx, i)
	}
	if len(sentIdx) == 0 {
		return errs, types, nil
	}
	rows, err := s.db.Query(ctx, `
WITH l AS (
	SELECT * FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::bytea[]) AS l(ns, run_id, tok, output)
), r AS (
	UPDATE kagzi.workflow_runs r SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL
	FROM l WHERE r.namespace_id = l.ns AND r.run_id = l.run_id AND r.lease_token = l.tok AND r.status = 'RUNNING'
	RETURNING r.run_id, r.parent_run_id, r.parent_step_id, r.status, r.error, r.workflow_type
), done AS (
	SELECT r.run_id, r.parent_run_id, r.parent_step_id, r.status, r.error, l.output FROM r JOIN l USING (run_id)
), touched AS (
	SELECT run_id FROM r
), `+parentWakeCTEs+`, p AS (
	INSERT INTO kagzi.workflow_payloads (run_id, output) SELECT l.run_id, l.output FROM l JOIN r USING (run_id)
	ON CONFLICT (run_id) DO UPDATE SET output = excluded.output
)
SELECT run_id, workflow_type FROM r`, ns, ids, toks, outs)
	if err != nil {
		return nil, nil, mapErr("complete runs", err)
	}
	done := make(map[string]string, len(sentIdx))
	for rows.Next() {
		var id, typ string
		if err := rows.Scan(&id, &typ); err != nil {
			rows.Close()
			return nil, nil, mapErr("complete runs", err)
		}
		done[id] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr("complete runs", err)
	}
	for k, i := range sentIdx {
		typ, ok := done[ids[k]]
		if !ok {
			errs[i] = s.leaseCheckDone(ctx, "complete run", items[i].Lease, StatusCompleted)
		}
		types[i] = typ
	}
	return errs, types, nil
}

// QueueDepth is the number of due runs waiting in one queue.
type QueueDepth struct {
	Namespace string
	Queue     string
	Due       int64
	// Unserved are the due runs no live worker serves (their type@version
	// on this queue: see WorkersServing); they wait for one to register.
	Unserved int64
	// OldestDueAt is when the longest-waiting due run became due (zero
	// when none is due).
	OldestDueAt time.Time
}

// RunsQueueDepths counts the due, unclaimed runs of every queue, and of
// them those no live worker serves, with when the longest-waiting became
// due (for the queue metrics, read when metrics are scraped). Every queue
// a live worker serves is listed, with 0 when nothing is due, so a
// dashboard shows 0 rather than no data. The workers are checked once per
// type and version, not per run.
func (s *Store) RunsQueueDepths(ctx context.Context) ([]QueueDepth, error) {
	rows, err := s.db.Query(ctx, `
WITH d AS (
	SELECT namespace_id, task_queue, workflow_type, version, count(*) AS n, min(available_at) AS oldest FROM kagzi.workflow_runs
	WHERE status IN ('PENDING', 'SLEEPING') AND available_at <= now()
	GROUP BY namespace_id, task_queue, workflow_type, version
), q AS (
	SELECT namespace_id, task_queue, sum(n)::bigint AS due,
		coalesce(sum(n) FILTER (WHERE NOT EXISTS (SELECT 1 FROM kagzi.workers w WHERE `+
		workerServes("w", "d.namespace_id", "d.task_queue", "d.workflow_type", "d.version")+`)), 0)::bigint AS unserved,
		min(oldest) AS oldest
	FROM d GROUP BY namespace_id, task_queue
)
SELECT namespace_id, task_queue, due, unserved, oldest FROM q
UNION ALL
SELECT DISTINCT w.namespace_id, w.task_queue, 0::bigint, 0::bigint, NULL::timestamptz FROM kagzi.workers w
WHERE w.status <> 'OFFLINE'
	AND NOT EXISTS (SELECT 1 FROM q WHERE q.namespace_id = w.namespace_id AND q.task_queue = w.task_queue)`)
	if err != nil {
		return nil, mapErr("queue depths", err)
	}
	defer rows.Close()
	var out []QueueDepth
	for rows.Next() {
		var q QueueDepth
		var oldest *time.Time
		if err := rows.Scan(&q.Namespace, &q.Queue, &q.Due, &q.Unserved, &oldest); err != nil {
			return nil, mapErr("queue depths", err)
		}
		if oldest != nil {
			q.OldestDueAt = *oldest
		}
		out = append(out, q)
	}
	return out, mapErr("queue depths", rows.Err())
}
