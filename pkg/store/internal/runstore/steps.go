package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
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
	// NonRetryable: the failed attempt's error was marked non-retryable.
	NonRetryable bool
}

// stepRecordSQL records one step attempt under a lease, taking the
// parameters of stepWriteArgs, and returns the row stepOutcome reads
// (stepResult). The attempt records the run's retry epoch (run_attempt),
// which scopes the step's retry budget.
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
// wait in progress is moved on. RunsChildStart and the set-wise statements
// (StepsRecordMany, the reports of a completion batch) write a step the
// same way, so a report means the same whichever path applies it.
//
// The last row says whether the lease held, whether the row was written,
// the attempt's status as it was before the statement, and whether the run
// was asked to cancel.
var stepRecordSQL = stmt("StepsRecord")

// stepRecordManySQL is stepRecordSQL for many reports at once: l holds the
// parallel arrays of stepArrays.args as rows, with their ordinal (from 1),
// and r those whose lease held, each with its run's namespace_id, epoch and
// cancel_requested_at. ins returns the (run, step) it wrote, which names
// the report since the pairs are distinct. It requires the reports' (run,
// step) pairs to be distinct: one INSERT ... ON CONFLICT cannot update a
// row twice, and two attempts of one step would each see no later attempt
// and both become latest.
//
// r locks the run rows in run id order, whatever the order of the reports,
// so statements that lock several of the same runs wait for each other
// instead of deadlocking.
//
// It returns one row per report: its ordinal, held, wrote, the status
// before and whether the run was asked to cancel. Every read outside r sees
// the snapshot taken before the statement, so before is the status before.
// The CTEs are probed with IN (hashed) and the attempt by its primary key,
// so the cost grows with the reports, not with their square or the table.
var stepRecordManySQL = stmt("StepsRecordMany")

// minSetSteps is the fewest reports StepsRecordMany applies with
// stepRecordManySQL. Postgres plans a prepared statement afresh for every
// execution while a plan for the actual array lengths looks cheaper than
// the generic plan, which assumes arrays of 10 elements; below that the
// planning costs more than the pipelined statements do, above it the
// generic plan is kept and one statement costs less than one per report.
const minSetSteps = 10

// stepArrays holds reports as stepRecordManySQL's parallel arrays, in
// stepWriteArgs' order. Ids are uuid.UUID, not strings: pgx encodes those
// in binary at once, where a string is first refused (an error built and
// dropped) and then sent as text.
type stepArrays struct {
	ns, stepID, kind, status       []string
	runID                          []uuid.UUID
	tok                            []int64
	attempt                        []int
	input, output                  [][]byte
	errMsg, errType                []*string
	childRunID                     []*uuid.UUID
	startedAt, finishedAt, retryAt []*time.Time
	nonRetryable                   []bool
}

func (a *stepArrays) add(p *StepsRecordParams) {
	a.ns = append(a.ns, p.Lease.Namespace)
	a.runID = append(a.runID, p.Lease.RunID)
	a.tok = append(a.tok, p.Lease.Token)
	a.stepID = append(a.stepID, p.StepID)
	a.attempt = append(a.attempt, p.Attempt)
	a.kind = append(a.kind, string(p.Kind))
	a.status = append(a.status, string(p.Status))
	a.input = append(a.input, p.Input)
	a.output = append(a.output, p.Output)
	a.errMsg = append(a.errMsg, nullText(clipError(p.Error)))
	a.startedAt = append(a.startedAt, p.StartedAt)
	a.finishedAt = append(a.finishedAt, p.FinishedAt)
	a.retryAt = append(a.retryAt, p.RetryAt)
	a.childRunID = append(a.childRunID, p.ChildRunID)
	a.errType = append(a.errType, nullText(p.ErrorType))
	a.nonRetryable = append(a.nonRetryable, p.NonRetryable)
}

// args are the arrays as the parameters of stepRecordManySQL.
func (a *stepArrays) args() pgx.NamedArgs {
	return pgx.NamedArgs{"ns": a.ns, "run_id": a.runID, "tok": a.tok, "step_id": a.stepID, "attempt": a.attempt,
		"kind": a.kind, "status": a.status, "input": a.input, "output": a.output, "error": a.errMsg,
		"started_at": a.startedAt, "finished_at": a.finishedAt, "retry_at": a.retryAt, "child_run_id": a.childRunID,
		"error_type": a.errType, "non_retryable": a.nonRetryable}
}

func validStepStatus(st StepStatus) bool {
	switch st {
	case StepPending, StepRunning, StepCompleted, StepFailed:
		return true
	}
	return false
}

func stepFinished(st StepStatus) bool { return st == StepCompleted || st == StepFailed }

func (s *Runs) validateStep(ctx context.Context, p *StepsRecordParams) error {
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
	p.ErrorType = protocol.ClipText(p.ErrorType, maxNameLen)
	if err := s.h.CheckPayload(ctx, "step input", p.Input); err != nil {
		return err
	}
	return s.h.CheckPayload(ctx, "step output", p.Output)
}

// stepWriteArgs are the parameters of stepRecordSQL for one report.
func stepWriteArgs(p *StepsRecordParams) pgx.NamedArgs {
	return pgx.NamedArgs{"ns": p.Lease.Namespace, "run_id": p.Lease.RunID, "tok": p.Lease.Token, "step_id": p.StepID,
		"attempt": p.Attempt, "kind": string(p.Kind), "status": string(p.Status), "input": p.Input, "output": p.Output,
		"error": nullText(clipError(p.Error)), "started_at": p.StartedAt, "finished_at": p.FinishedAt, "retry_at": p.RetryAt,
		"child_run_id": p.ChildRunID, "error_type": nullText(p.ErrorType), "non_retryable": p.NonRetryable}
}

// stepOutcome interprets a report's result row. held=false means the lease
// check failed and stepLeaseFailed must decide.
func stepOutcome(p *StepsRecordParams, r stepResult) (bool, error) {
	if !r.held {
		return false, nil
	}
	if r.wrote || r.before == nil {
		// Written, or a concurrent identical report won the insert.
		return true, nil
	}
	prev := StepStatus(*r.before)
	if stepFinished(p.Status) && prev != p.Status {
		return true, fmt.Errorf("record step %q attempt %d of run %s: %w: the attempt is already %s",
			p.StepID, p.Attempt, p.Lease.RunID, ErrConflict, prev)
	}
	return true, nil
}

// stepsLeaseFailedSQL reads the run and the step attempt of a report whose
// lease matched no running run.
var stepsLeaseFailedSQL = stmt("StepsLeaseFailed")

// stepLeaseFailed decides what a step report that found no running lease
// means: a retry of a report that was applied before the run moved on under
// the same lease is a success; anything else lost the lease.
func (s *Runs) stepLeaseFailed(ctx context.Context, p *StepsRecordParams) error {
	var (
		st   RunStatus
		tok  int64
		prev *string
	)
	err := stepsLeaseFailedSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"ns": p.Lease.Namespace, "run_id": p.Lease.RunID, "step_id": p.StepID, "attempt": p.Attempt}).Scan(&st, &tok, &prev)
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
//
// It is StepsRecordBatch for one report, so a report means the same whichever
// way it arrives.
func (s *Runs) StepsRecord(ctx context.Context, p StepsRecordParams) error {
	out, err := s.StepsRecordBatch(ctx, []StepsRecordParams{p})
	if err != nil {
		return err
	}
	return out[0].Err
}

// StepsRecordMany applies many step reports, possibly under different
// leases, in one statement. errs[i] is the outcome of ps[i], as StepsRecord
// would return it; a report that fails validation or lost its lease does
// not stop the others. err is set when the batch as a whole failed (a
// database error); then nothing was applied, since a batch runs in one
// transaction (or in the caller's).
//
// A batch of fewer than minSetSteps valid reports, or one that names the
// same step of the same run more than once (a retry and its predecessor, or
// a report sent twice; those cannot share one statement), is applied one
// statement per report instead, pipelined in one round trip, in the order
// given.
func (s *Runs) StepsRecordMany(ctx context.Context, ps []StepsRecordParams) (errs []error, err error) {
	out, err := s.StepsRecordBatch(ctx, ps)
	if err != nil {
		return nil, err
	}
	errs = make([]error, len(out))
	for i := range out {
		errs[i] = out[i].Err
	}
	return errs, nil
}

// StepOutcome is the outcome of one step report of StepsRecordBatch.
type StepOutcome struct {
	// Err is what StepsRecord would return for the report.
	Err error
	// CancelRequested: the run was asked to cancel (read with the lease
	// check). The dispatcher tells the worker with its reply, so a worker
	// that missed the pushed notice learns it at its next step report.
	CancelRequested bool
}

// StepsRecordBatch is StepsRecordMany with each report's outcome in full.
func (s *Runs) StepsRecordBatch(ctx context.Context, ps []StepsRecordParams) ([]StepOutcome, error) {
	out := make([]StepOutcome, len(ps))
	errs := make([]error, len(ps))
	var sent []int
	type stepKey struct {
		run  uuid.UUID
		step string
	}
	seen := make(map[stepKey]bool, len(ps))
	distinct := true
	for i := range ps {
		if errs[i] = s.validateStep(ctx, &ps[i]); errs[i] != nil {
			continue
		}
		k := stepKey{ps[i].Lease.RunID, ps[i].StepID}
		distinct = distinct && !seen[k]
		seen[k] = true
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		for i := range out {
			out[i].Err = errs[i]
		}
		return out, nil
	}
	var (
		res []stepResult
		err error
	)
	if distinct && len(sent) >= minSetSteps {
		res, err = s.stepsRecordSet(ctx, ps, sent)
	} else {
		res, err = s.stepsRecordPipelined(ctx, ps, sent)
	}
	if err != nil {
		return nil, err
	}
	for k, i := range sent {
		ok, e := stepOutcome(&ps[i], res[k])
		if !ok {
			e = s.stepLeaseFailed(ctx, &ps[i])
		}
		errs[i] = e
		out[i].CancelRequested = res[k].cancel
	}
	if err := s.pauseRelease(ctx, ps, sent, res, errs); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Err = errs[i]
	}
	return out, nil
}

// runsPauseReleaseSQL gives back the leases of paused runs whose step was
// recorded.
var runsPauseReleaseSQL = stmt("RunsPauseRelease")

// pauseRelease ends the lease of each paused run a report of which
// recorded a finished function step, in the same transaction: the step
// it was in is recorded, and it is not to begin the next one. Its
// reports' errors become ErrLeaseLost, so the holder abandons the run
// (its result recorded) rather than go on; the run is claimed again when
// it is resumed. A run not paused costs nothing here.
func (s *Runs) pauseRelease(ctx context.Context, ps []StepsRecordParams, sent []int, res []stepResult, errs []error) error {
	var ns []string
	var ids []uuid.UUID
	var toks []int64
	released := map[uuid.UUID]bool{}
	for k, i := range sent {
		p := &ps[i]
		if !res[k].paused || errs[i] != nil || !stepFinished(p.Status) || (p.Kind != "" && p.Kind != StepFunction) {
			continue
		}
		if !released[p.Lease.RunID] {
			released[p.Lease.RunID] = true
			ns, ids, toks = append(ns, p.Lease.Namespace), append(ids, p.Lease.RunID), append(toks, p.Lease.Token)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := runsPauseReleaseSQL.ExecByKey(ctx, s.h.DB, pgx.NamedArgs{"ns": ns, "run_id": ids, "tok": toks}); err != nil {
		return mapErr("release paused runs", err)
	}
	for _, i := range sent {
		if p := &ps[i]; released[p.Lease.RunID] && errs[i] == nil {
			errs[i] = fmt.Errorf("record step %q of run %s: recorded; the run is paused and its lease given back: %w",
				p.StepID, p.Lease.RunID, ErrLeaseLost)
		}
	}
	return nil
}

// stepResult is one report's row of stepRecordSQL or stepRecordManySQL,
// as stepOutcome reads it.
type stepResult struct {
	held, wrote bool
	before      *string
	cancel      bool
	// paused: the run was paused (read with the lease check).
	paused bool
}

// stepsRecordSet applies ps[i] for every i in sent with stepRecordManySQL;
// res[k] is the result of ps[sent[k]].
func (s *Runs) stepsRecordSet(ctx context.Context, ps []StepsRecordParams, sent []int) (res []stepResult, err error) {
	var a stepArrays
	for _, i := range sent {
		a.add(&ps[i])
	}
	rows, err := stepRecordManySQL.QueryByKey(ctx, s.h.DB, a.args())
	if err != nil {
		return nil, mapErr("record steps", err)
	}
	defer rows.Close()
	res = make([]stepResult, len(sent))
	n := 0
	for rows.Next() {
		var (
			ord int64
			r   stepResult
		)
		if err := rows.Scan(&ord, &r.held, &r.wrote, &r.before, &r.cancel, &r.paused); err != nil {
			return nil, mapErr("record steps", err)
		}
		if ord < 1 || ord > int64(len(sent)) {
			return nil, fmt.Errorf("record steps: a row for report %d of %d", ord, len(sent))
		}
		res[ord-1] = r
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("record steps", err)
	}
	if n != len(sent) {
		return nil, fmt.Errorf("record steps: %d rows for %d reports", n, len(sent))
	}
	return res, nil
}

// stepsRecordPipelined applies ps[i] for every i in sent with
// stepRecordSQL, one statement each in one round trip; res[k] is the result
// of ps[sent[k]].
func (s *Runs) stepsRecordPipelined(ctx context.Context, ps []StepsRecordParams, sent []int) (res []stepResult, err error) {
	res = make([]stepResult, len(sent))
	if len(sent) == 1 {
		// One report needs no pipeline.
		p := &ps[sent[0]]
		if err := scanStepResult(stepRecordSQL.QueryRow(ctx, s.h.DB, stepWriteArgs(p)), &res[0]); err != nil {
			return nil, mapErr(fmt.Sprintf("record step %q of run %s", p.StepID, p.Lease.RunID), err)
		}
		return res, nil
	}
	b := &pgx.Batch{}
	for _, i := range sent {
		stepRecordSQL.Queue(b, stepWriteArgs(&ps[i]))
	}
	br := s.h.DB.SendBatch(ctx, b)
	for k, i := range sent {
		if err := scanStepResult(br.QueryRow(), &res[k]); err != nil {
			_ = br.Close()
			return nil, mapErr(fmt.Sprintf("record step %q of run %s", ps[i].StepID, ps[i].Lease.RunID), err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, mapErr("record steps", err)
	}
	return res, nil
}

// scanStepResult reads a row of stepRecordSQL.
func scanStepResult(row pgx.Row, r *stepResult) error {
	return row.Scan(&r.held, &r.wrote, &r.before, &r.cancel, &r.paused)
}

// stepsListSQL reads every attempt of a run's steps, joined to the run
// (one row of NULL steps for a run without any).
var stepsListSQL = stmt("StepsList")

// StepsList returns every attempt of every step of a run, in the order they
// were recorded (created_at, then step id and attempt): a timeline. An
// unknown run is ErrNotFound; a run without steps gives an empty list.
func (s *Runs) StepsList(ctx context.Context, namespace string, runID uuid.UUID) ([]Step, error) {
	// The run is joined, not just the steps read, so an unknown run can be
	// told from one without steps in the same round trip.
	rows, err := stepsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"ns": namespace, "run_id": runID})
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
			nonRetryable         *bool
			step                 Step
		)
		if err := rows.Scan(&has, &rid, &stepID, &attempt, &ns, &kind, &st, &latest, &step.Input, &step.Output,
			&errMsg, &created, &step.StartedAt, &step.FinishedAt, &step.RetryAt, &step.ChildRunID, &runAttempt, &errType, &nonRetryable); err != nil {
			return nil, mapErr("list steps", err)
		}
		if !has {
			continue
		}
		step.RunID, step.StepID, step.Attempt, step.Namespace = *rid, *stepID, *attempt, *ns
		step.Kind, step.Status, step.IsLatest, step.Error, step.CreatedAt = StepKind(*kind), StepStatus(*st), *latest, errMsg, *created
		step.RunAttempt, step.ErrorType, step.NonRetryable = *runAttempt, *errType, *nonRetryable
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

// stepsLatestSQL reads the latest attempt of the steps of many runs.
var stepsLatestSQL = stmt("StepsLatest")

// StepsLatest returns the latest attempt of every step of the given runs of
// the namespace, in one query, by run id and then by step id. Runs without
// steps (or unknown, or of another namespace) are absent from the map.
func (s *Runs) StepsLatest(ctx context.Context, namespace string, runIDs []uuid.UUID) (map[uuid.UUID][]StepState, error) {
	out := make(map[uuid.UUID][]StepState)
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := stepsLatestSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"ns": namespace, "run_ids": runIDs})
	if err != nil {
		return nil, mapErr("latest steps", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var st StepState
		if err := rows.Scan(&id, &st.StepID, &st.Status, &st.Attempt, &st.Output, &st.Error, &st.ErrorType, &st.RetryAt,
			&st.RunAttempt, &st.NonRetryable); err != nil {
			return nil, mapErr("latest steps", err)
		}
		out[id] = append(out[id], st)
	}
	return out, mapErr("latest steps", rows.Err())
}
