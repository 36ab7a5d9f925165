package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StepsRecordParams is one step report from a lease holder: one attempt of
// one step of the run the lease names.
type StepsRecordParams struct {
	Lease Lease
	// StepID names the step within the run (non-empty, at most 200 bytes).
	StepID string
	// Attempt is the attempt number, from 1.
	Attempt int
	Kind    StepKind
	// Status is COMPLETED or FAILED for a finished attempt, or PENDING or
	// RUNNING for a wait in progress (a child run, an event). A PENDING or
	// RUNNING attempt may later be reported again, finished, under the same
	// attempt number; a finished attempt never changes.
	Status StepStatus
	Input  []byte
	Output []byte
	Error  string
	// StartedAt and FinishedAt are the attempt's timings as the worker saw
	// them. FinishedAt defaults to now for a finished attempt.
	StartedAt  *time.Time
	FinishedAt *time.Time
	// RetryAt is when a failed attempt will be tried again, if it will.
	RetryAt    *time.Time
	ChildRunID *uuid.UUID
	// ErrorType names the kind of error of a failed attempt.
	ErrorType string
}

// stepWriteCTEs writes one step attempt under a lease; statements using it
// take their first 15 parameters in stepWriteArgs' order and may append more.
// The attempt records the run's current attempt number (run_attempt), which
// scopes the step's retry budget.
//
// r is the lease check: the run row is locked FOR SHARE so a concurrent
// re-claim (which updates the row) waits for this report to commit, and the
// report is applied only if the lease was current.
//
// The step's earlier attempts are flipped to is_latest=false in prev; ins
// reads prev through an aggregate so the flip has finished before the new
// row is inserted, else the unique index on the latest attempt would see two.
// The new attempt is latest unless a later attempt already exists (an
// out-of-order retry of an old report). On the primary key, a finished row
// is left alone (a retried report is a no-op; the first result wins) and a
// wait in progress is moved on.
const stepWriteCTEs = `
r AS (
	SELECT run_id, namespace_id, attempts, task_queue, trace_context FROM kagzi.workflow_runs
	WHERE namespace_id = $1 AND run_id = $2 AND lease_token = $3 AND status = 'RUNNING'
	FOR SHARE
), prev AS (
	UPDATE kagzi.step_runs s SET is_latest = false
	FROM r
	WHERE s.run_id = r.run_id AND s.step_id = $4 AND s.is_latest AND s.attempt_number < $5
	RETURNING 1
), ins AS (
	INSERT INTO kagzi.step_runs AS s (run_id, step_id, attempt_number, namespace_id, kind, status, is_latest,
		input, output, error, started_at, finished_at, retry_at, child_run_id, run_attempt, error_type)
	SELECT r.run_id, $4::text, $5::int, r.namespace_id, $6::text, $7::text,
		NOT EXISTS (SELECT 1 FROM kagzi.step_runs l WHERE l.run_id = r.run_id AND l.step_id = $4 AND l.attempt_number > $5),
		$8::bytea, $9::bytea, $10::text, $11::timestamptz,
		coalesce($12::timestamptz, CASE WHEN $7::text IN ('COMPLETED', 'FAILED') THEN now() END),
		$13::timestamptz, $14::uuid, r.attempts, $15::text
	FROM r CROSS JOIN (SELECT count(*) FROM prev) AS flipped
	ON CONFLICT (run_id, step_id, attempt_number) DO UPDATE SET
		kind = excluded.kind, status = excluded.status,
		input = coalesce(excluded.input, s.input), output = excluded.output, error = excluded.error,
		started_at = coalesce(s.started_at, excluded.started_at), finished_at = excluded.finished_at,
		retry_at = excluded.retry_at, child_run_id = coalesce(excluded.child_run_id, s.child_run_id),
		error_type = excluded.error_type
	WHERE s.status IN ('PENDING', 'RUNNING')
	RETURNING 1
)`

// stepRecordSQL reports whether the lease held, whether the row was
// written, and the attempt's status as it was before the statement.
const stepRecordSQL = `
WITH ` + stepWriteCTEs + `
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM ins),
	(SELECT status FROM kagzi.step_runs WHERE run_id = $2 AND step_id = $4 AND attempt_number = $5)`

func validStepStatus(st StepStatus) bool {
	switch st {
	case StepPending, StepRunning, StepCompleted, StepFailed:
		return true
	}
	return false
}

func stepFinished(st StepStatus) bool { return st == StepCompleted || st == StepFailed }

func (s *Store) validateStep(p *StepsRecordParams) error {
	if err := checkName("namespace", p.Lease.Namespace, true); err != nil {
		return err
	}
	if p.Lease.RunID == uuid.Nil {
		return invalidf("run id is required")
	}
	if p.StepID == "" {
		return invalidf("step id is required")
	}
	if len(p.StepID) > maxNameLen {
		return invalidf("step id is %d bytes, at most %d", len(p.StepID), maxNameLen)
	}
	if p.Attempt < 1 {
		return invalidf("step %q: attempt %d must be at least 1", p.StepID, p.Attempt)
	}
	if !p.Kind.Valid() {
		return invalidf("step %q: unknown kind %q", p.StepID, p.Kind)
	}
	if !validStepStatus(p.Status) {
		return invalidf("step %q: unknown status %q", p.StepID, p.Status)
	}
	if len(p.ErrorType) > maxNameLen {
		p.ErrorType = p.ErrorType[:maxNameLen]
	}
	if err := s.checkPayload("step input", p.Input); err != nil {
		return err
	}
	return s.checkPayload("step output", p.Output)
}

func stepWriteArgs(p *StepsRecordParams) []any {
	return []any{p.Lease.Namespace, p.Lease.RunID, p.Lease.Token, p.StepID, p.Attempt, string(p.Kind), string(p.Status),
		p.Input, p.Output, nullText(clipError(p.Error)), p.StartedAt, p.FinishedAt, p.RetryAt, p.ChildRunID, nullText(p.ErrorType)}
}

// stepOutcome interprets stepRecordSQL's result row. held=false means the
// lease check failed and stepLeaseFailed must decide.
func stepOutcome(p *StepsRecordParams, held, wrote int64, before *string) (bool, error) {
	if held == 0 {
		return false, nil
	}
	if wrote == 1 || before == nil {
		// Written, or a concurrent identical report won the insert.
		return true, nil
	}
	prev := StepStatus(*before)
	if stepFinished(p.Status) && prev != p.Status {
		return true, fmt.Errorf("record step %q attempt %d of run %s: %w: the attempt is already %s",
			p.StepID, p.Attempt, p.Lease.RunID, ErrConflict, prev)
	}
	return true, nil
}

// stepLeaseFailed decides what a step report that found no running lease
// means: a retry of a report that was applied before the run moved on under
// the same lease is a success; anything else lost the lease.
func (s *Store) stepLeaseFailed(ctx context.Context, p *StepsRecordParams) error {
	var (
		st   RunStatus
		tok  int64
		prev *string
	)
	err := s.db.QueryRow(ctx, `
SELECT r.status, r.lease_token, s.status FROM kagzi.workflow_runs r
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id AND s.step_id = $3 AND s.attempt_number = $4
WHERE r.namespace_id = $1 AND r.run_id = $2`, p.Lease.Namespace, p.Lease.RunID, p.StepID, p.Attempt).Scan(&st, &tok, &prev)
	if err != nil {
		return mapErr(fmt.Sprintf("record step %s", p.Lease.RunID), err)
	}
	if tok == p.Lease.Token && prev != nil && (*prev == string(p.Status) || !stepFinished(p.Status)) {
		return nil
	}
	return fmt.Errorf("record step %s: %w (run is %s under lease %d, report names lease %d)",
		p.Lease.RunID, ErrLeaseLost, st, tok, p.Lease.Token)
}

// StepsRecord records one step attempt under the lease, in one statement:
// the attempt becomes the step's latest and earlier attempts stop being so.
// It is idempotent: reporting the same attempt again is a no-op success,
// also after the run moved on under the same lease (a retried request).
// Reporting a finished attempt with a different final status is
// ErrConflict. If the lease is not current it writes nothing and returns
// ErrLeaseLost.
func (s *Store) StepsRecord(ctx context.Context, p StepsRecordParams) error {
	if err := s.validateStep(&p); err != nil {
		return err
	}
	var held, wrote int64
	var before *string
	if err := s.db.QueryRow(ctx, stepRecordSQL, stepWriteArgs(&p)...).Scan(&held, &wrote, &before); err != nil {
		return mapErr(fmt.Sprintf("record step %q of run %s", p.StepID, p.Lease.RunID), err)
	}
	ok, err := stepOutcome(&p, held, wrote, before)
	if ok {
		return err
	}
	return s.stepLeaseFailed(ctx, &p)
}

// StepsRecordMany applies many step reports, possibly under different
// leases, in one round trip. errs[i] is the outcome of ps[i], as StepsRecord
// would return it; a report that fails validation or lost its lease does
// not stop the others. err is set when the batch as a whole failed (a
// database error); then nothing was applied, since a batch runs in one
// transaction (or in the caller's).
func (s *Store) StepsRecordMany(ctx context.Context, ps []StepsRecordParams) (errs []error, err error) {
	errs = make([]error, len(ps))
	b := &pgx.Batch{}
	var sent []int
	for i := range ps {
		if errs[i] = s.validateStep(&ps[i]); errs[i] != nil {
			continue
		}
		b.Queue(stepRecordSQL, stepWriteArgs(&ps[i])...)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return errs, nil
	}
	type result struct {
		held, wrote int64
		before      *string
	}
	res := make([]result, len(sent))
	br := s.db.SendBatch(ctx, b)
	for k := range sent {
		if err := br.QueryRow().Scan(&res[k].held, &res[k].wrote, &res[k].before); err != nil {
			_ = br.Close()
			return nil, mapErr("record steps", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, mapErr("record steps", err)
	}
	for k, i := range sent {
		ok, e := stepOutcome(&ps[i], res[k].held, res[k].wrote, res[k].before)
		if !ok {
			e = s.stepLeaseFailed(ctx, &ps[i])
		}
		errs[i] = e
	}
	return errs, nil
}

const stepCols = `s.run_id, s.step_id, s.attempt_number, s.namespace_id, s.kind, s.status, s.is_latest,
	s.input, s.output, coalesce(s.error, ''), s.created_at, s.started_at, s.finished_at, s.retry_at, s.child_run_id,
	coalesce(s.run_attempt, 0), coalesce(s.error_type, '')`

// StepsList returns every attempt of every step of a run, in the order they
// were recorded (created_at, then step id and attempt): a timeline. An
// unknown run is ErrNotFound; a run without steps gives an empty list.
func (s *Store) StepsList(ctx context.Context, namespace string, runID uuid.UUID) ([]Step, error) {
	// The run is joined, not just the steps read, so an unknown run can be
	// told from one without steps in the same round trip.
	rows, err := s.db.Query(ctx, `
SELECT s.step_id IS NOT NULL, `+stepCols+` FROM kagzi.workflow_runs r
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id
WHERE r.namespace_id = $1 AND r.run_id = $2
ORDER BY s.created_at, s.step_id, s.attempt_number`, namespace, runID)
	if err != nil {
		return nil, mapErr("list steps", err)
	}
	defer rows.Close()
	found := false
	out := []Step{}
	for rows.Next() {
		found = true
		var (
			has                  bool
			rid                  *uuid.UUID
			stepID, ns, kind, st *string
			attempt              *int
			latest               *bool
			errMsg               string
			created              *time.Time
			runAttempt           *int
			errType              *string
			step                 Step
		)
		if err := rows.Scan(&has, &rid, &stepID, &attempt, &ns, &kind, &st, &latest, &step.Input, &step.Output,
			&errMsg, &created, &step.StartedAt, &step.FinishedAt, &step.RetryAt, &step.ChildRunID, &runAttempt, &errType); err != nil {
			return nil, mapErr("list steps", err)
		}
		if !has {
			continue
		}
		step.RunID, step.StepID, step.Attempt, step.Namespace = *rid, *stepID, *attempt, *ns
		step.Kind, step.Status, step.IsLatest, step.Error, step.CreatedAt = StepKind(*kind), StepStatus(*st), *latest, errMsg, *created
		step.RunAttempt, step.ErrorType = *runAttempt, *errType
		out = append(out, step)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list steps", err)
	}
	if !found {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, ErrNotFound)
	}
	return out, nil
}

// StepsLatest returns the latest attempt of every step of the given runs of
// the namespace, in one query, by run id and then by step id. Runs without
// steps (or unknown, or of another namespace) are absent from the map.
func (s *Store) StepsLatest(ctx context.Context, namespace string, runIDs []uuid.UUID) (map[uuid.UUID][]StepState, error) {
	out := make(map[uuid.UUID][]StepState)
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `
SELECT run_id, step_id, status, attempt_number, output, coalesce(error, ''), coalesce(error_type, ''), retry_at,
	coalesce(run_attempt, 0) FROM kagzi.step_runs
WHERE run_id = ANY($2::uuid[]) AND is_latest AND namespace_id = $1
ORDER BY run_id, step_id`, namespace, runIDs)
	if err != nil {
		return nil, mapErr("latest steps", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var st StepState
		if err := rows.Scan(&id, &st.StepID, &st.Status, &st.Attempt, &st.Output, &st.Error, &st.ErrorType, &st.RetryAt, &st.RunAttempt); err != nil {
			return nil, mapErr("latest steps", err)
		}
		out[id] = append(out[id], st)
	}
	return out, mapErr("latest steps", rows.Err())
}
