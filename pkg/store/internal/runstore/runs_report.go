package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Run transitions made on a worker's report that need more than one of the
// plain lease transitions in runs_lease.go.

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

// runsFailAttemptReadSQL reads what RunsFailAttempt decides on: the run's
// lease, its attempts and retry policy (and, for a retried report, what the
// first report made of it).
var runsFailAttemptReadSQL = stmt("RunsFailAttemptRead")

// runsFailAttemptSQL ends the attempt of RunsFailAttempt (@error is the
// error): retried after @delay_ms in a new retry epoch unless @final
// (attempts exhausted or the error non-retryable) or cancellation was
// requested, which ends the run CANCELLED rather than FAILED. It applies
// only while the lease holds and the run shows the attempts @final and
// @delay_ms were computed for.
var runsFailAttemptSQL = stmt("RunsFailAttempt")

// RunsFailAttempt ends the current attempt with errMsg under the lease: the
// run is retried with its policy's backoff while attempts remain and the
// error is retryable (errType not listed as non-retryable and nonRetryable
// false), else it fails for good — or, if it was asked to cancel
// (RunsCancel), it ends CANCELLED: the workflow returned an error after the
// request, which is how it says it stopped. Two statements: a read of the
// run's attempts and retry policy, from which package retry computes the
// outcome and the backoff, and the update that applies them.
func (s *Runs) RunsFailAttempt(ctx context.Context, l Lease, errMsg, errType string, nonRetryable bool) (RunsFailAttemptResult, error) {
	var res RunsFailAttemptResult
	var (
		st       RunStatus
		tok      int64
		at       *time.Time
		attempts int32
		raw      []byte
	)
	read := func() error {
		err := runsFailAttemptReadSQL.QueryRow(ctx, s.h.DB,
			pgx.NamedArgs{"ns": l.Namespace, "run_id": l.RunID}).Scan(&st, &tok, &at, &attempts, &raw)
		return mapErr(fmt.Sprintf("fail attempt %s", l.RunID), err)
	}
	if err := read(); err != nil {
		return res, err
	}
	if st == StatusRunning && tok == l.Token {
		p, err := storedPolicy(raw, l.RunID)
		if err != nil {
			return res, fmt.Errorf("fail attempt: %w", err)
		}
		errType = protocol.ClipText(errType, maxNameLen)
		final := p.Exhausted(int(attempts)) || nonRetryable || p.IsNonRetryable(errType)
		err = runsFailAttemptSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"error": clipError(errMsg), "ns": l.Namespace, "run_id": l.RunID,
			"tok": l.Token, "attempts": attempts, "final": final, "delay_ms": backoffMS(p, int(attempts))}).
			Scan(&res.Status, &res.AvailableAt, &res.Type)
		if err == nil {
			return res, nil
		}
		if !isNoRows(err) {
			return res, mapErr("fail attempt", err)
		}
		// The run moved on between the read and the update.
		if err := read(); err != nil {
			return res, err
		}
	}
	// A retried report finds the run already moved on under the same token.
	if tok == l.Token && (st == StatusFailed || st == StatusPending || st == StatusCancelled) {
		return RunsFailAttemptResult{Status: st, AvailableAt: at}, nil
	}
	return res, fmt.Errorf("fail attempt %s: %w (run is %s under lease %d, report names lease %d)", l.RunID, ErrLeaseLost, st, tok, l.Token)
}

// runsReleaseManySQL is the statement of RunsReleaseMany.
var runsReleaseManySQL = stmt("RunsReleaseMany")

// RunsReleaseMany releases claimed runs that never reached their worker,
// claimable at once and without counting an attempt, in one statement.
// Runs whose lease moved on are left alone. Returns how many were released.
func (s *Runs) RunsReleaseMany(ctx context.Context, leases []Lease) (int64, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	ns := make([]string, len(leases))
	ids := make([]string, len(leases))
	toks := make([]int64, len(leases))
	for i, l := range leases {
		ns[i], ids[i], toks[i] = l.Namespace, l.RunID.String(), l.Token
	}
	tag, err := runsReleaseManySQL.ExecByKey(ctx, s.h.DB,
		pgx.NamedArgs{"ns": ns, "run_id": ids, "tok": toks})
	if err != nil {
		return 0, mapErr("release runs", err)
	}
	return tag.RowsAffected(), nil
}

// RunsCompleteItem is one run completion of RunsCompleteMany.
type RunsCompleteItem struct {
	Lease  Lease
	Output []byte
	// Steps are step reports of the run under the same lease that come
	// with its completion (the last step of a run that ends right after
	// it). They are recorded in the completion's statement, as
	// StepsRecordBatch records them, and the run completes only if each
	// is recorded as reported: a step that is refused (or whose lease is
	// lost) leaves the run as it was, its completion answered with that
	// step's error.
	Steps []StepsRecordParams
	// Events, if set, is what the execution saw of the run's events: the
	// run completes only if no event it did not see waits (EventsSeen);
	// else the completion is ErrEventsArrived and the run is claimable
	// again (its Steps are recorded all the same).
	Events *EventsSeen
}

// RunsCompleteOutcome is the outcome of one completion of RunsCompleteBatch.
type RunsCompleteOutcome struct {
	// Err is what RunsComplete would return (or the error of a refused
	// step of the item).
	Err error
	// Type is the run's workflow type when this call completed it (empty
	// when a repeated report found it already completed).
	Type string
	// Steps are the outcomes of the item's Steps, as StepsRecordBatch
	// gives them.
	Steps []StepOutcome
}

// RunsCompleteMany records many runs' successful ends in one statement (and
// wakes the parents of children among them, the wake-up CTEs pstep and pwake, explained in runs_children.go), so
// a batch of reports costs one update (and one pass of the notify trigger)
// instead of one per run. errs[i] is the outcome of items[i], as
// RunsComplete would return it, and types[i] the run's workflow type when
// this call completed it (empty when a repeated report found it already
// completed); err is set when the statement as a whole failed.
func (s *Runs) RunsCompleteMany(ctx context.Context, items []RunsCompleteItem) (errs []error, types []string, err error) {
	out, err := s.RunsCompleteBatch(ctx, items)
	if err != nil {
		return nil, nil, err
	}
	errs = make([]error, len(out))
	types = make([]string, len(out))
	for i := range out {
		errs[i], types[i] = out[i].Err, out[i].Type
	}
	return errs, types, nil
}

// runsCompleteSQL completes the runs of c (and records the step reports of
// l that come with them) in one statement. Both completion statements end
// alike: u completed runs of c (writing their outputs into their rows), the
// parents of children among them wake (the wake-up CTEs, explained in runs_children.go), and a row comes
// back per completed run ('c', its id and type). k is the lease check of every
// run, locking its row in run id order (as every multi-run statement
// does); a step report whose run is in k is written as stepRecordManySQL
// writes it, and a run is completed unless one of its step reports is not
// recorded as reported (bad: its lease did not hold, or it was not written
// and the attempt was recorded finished otherwise before, which
// stepOutcome calls a conflict).
// Its rows: one per completed run ('c', its run id and type) and one per
// step report ('s', as StepsRecordMany writes it).
var runsCompleteSQL = stmt("RunsCompleteWithSteps")

// runsCompleteOnlySQL is runsCompleteSQL for completions that carry no
// step: the run rows are found once, by the update itself, which costs less
// than the lease check's lookup and lock followed by the update's.
//
// A completion with an event count (c.seen, EventsSeen) applies only while
// the run's count is the same. The condition is on the updated row itself,
// so it holds for the newest version: an event sender that held the row
// lock when the update reached it and committed is seen, and one that
// comes after waits for this transaction, then finds the run finished.
var runsCompleteOnlySQL = stmt("RunsComplete")

// RunsCompleteBatch is RunsCompleteMany with each completion's outcome in
// full, and the step reports that come with the completions recorded in the
// same statement: a run's last step and its end cost one statement, one
// lock of the run row and one lease check.
//
// Step reports that fail validation, and items whose step reports name a
// step more than once (across the batch), are the exception: their steps
// are recorded first with StepsRecordBatch, then the item completes with
// the others if they all were.
func (s *Runs) RunsCompleteBatch(ctx context.Context, items []RunsCompleteItem) ([]RunsCompleteOutcome, error) {
	out := make([]RunsCompleteOutcome, len(items))
	type stepKey struct {
		run  uuid.UUID
		step string
	}
	var (
		cns         []string
		cids        []uuid.UUID
		ctoks       []int64
		couts       [][]byte
		cseen       []*int64
		sentIdx     []int
		a           stepArrays
		stepAt      [][2]int // [item, step] of each step report sent
		apart       []int    // items whose steps are recorded first
		apartSteps  []StepsRecordParams
		seen        = map[stepKey]bool{}
		distinct    = true
		stepInvalid = make([]bool, len(items))
	)
	for i := range items {
		it := &items[i]
		out[i].Steps = make([]StepOutcome, len(it.Steps))
		for j := range it.Steps {
			p := &it.Steps[j]
			p.Lease = it.Lease
			if err := s.validateStep(ctx, p); err != nil {
				stepInvalid[i] = true
			}
			k := stepKey{it.Lease.RunID, p.StepID}
			distinct = distinct && !seen[k]
			seen[k] = true
		}
	}
	for i := range items {
		it := &items[i]
		if out[i].Err = s.h.CheckPayload(ctx, "output", it.Output); out[i].Err != nil {
			continue
		}
		if out[i].Err = it.Events.check(); out[i].Err != nil {
			continue
		}
		if len(it.Steps) > 0 && (stepInvalid[i] || !distinct) {
			apart = append(apart, i)
			apartSteps = append(apartSteps, it.Steps...)
			continue
		}
		for j := range it.Steps {
			a.add(&it.Steps[j])
			stepAt = append(stepAt, [2]int{i, j})
		}
		cns = append(cns, it.Lease.Namespace)
		cids = append(cids, it.Lease.RunID)
		ctoks = append(ctoks, it.Lease.Token)
		couts = append(couts, it.Output)
		cseen = append(cseen, it.Events.seqArg())
		sentIdx = append(sentIdx, i)
	}
	if len(apart) > 0 {
		// Recorded one by one, in order, as the reports' steps would be
		// without a completion; the items complete below if all were.
		res, err := s.StepsRecordBatch(ctx, apartSteps)
		if err != nil {
			return nil, err
		}
		for _, i := range apart {
			copy(out[i].Steps, res[:len(items[i].Steps)])
			res = res[len(items[i].Steps):]
			if stepErr := firstStepErr(out[i].Steps); stepErr != nil {
				out[i].Err = stepErr
				continue
			}
			cns = append(cns, items[i].Lease.Namespace)
			cids = append(cids, items[i].Lease.RunID)
			ctoks = append(ctoks, items[i].Lease.Token)
			couts = append(couts, items[i].Output)
			cseen = append(cseen, items[i].Events.seqArg())
			sentIdx = append(sentIdx, i)
		}
	}
	if len(sentIdx) == 0 {
		return out, nil
	}
	stmt, args := runsCompleteOnlySQL, pgx.NamedArgs{}
	if len(stepAt) > 0 {
		stmt, args = runsCompleteSQL, a.args()
	}
	args["c_ns"], args["c_run_id"], args["c_tok"], args["c_output"], args["c_seen"] = cns, cids, ctoks, couts, cseen
	rows, err := stmt.QueryByKeyOnce(ctx, s.h.DB, args)
	if err != nil {
		return nil, mapErr("complete runs", err)
	}
	done := make(map[string]string, len(sentIdx))
	res := make([]stepResult, len(stepAt))
	for rows.Next() {
		var (
			kind string
			ord  int64
			id   *string
			typ  *string
			r    stepResult
		)
		if err := rows.Scan(&kind, &ord, &id, &typ, &r.held, &r.wrote, &r.before, &r.cancel); err != nil {
			rows.Close()
			return nil, mapErr("complete runs", err)
		}
		switch {
		case kind == "c" && id != nil && typ != nil:
			done[*id] = *typ
		case kind == "s" && ord >= 1 && ord <= int64(len(stepAt)):
			res[ord-1] = r
		default:
			rows.Close()
			return nil, fmt.Errorf("complete runs: an unexpected row %q %d", kind, ord)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("complete runs", err)
	}
	for k, at := range stepAt {
		i, j := at[0], at[1]
		p := &items[i].Steps[j]
		ok, e := stepOutcome(p, res[k])
		if !ok {
			e = s.stepLeaseFailed(ctx, p)
		}
		out[i].Steps[j] = StepOutcome{Err: e, CancelRequested: res[k].cancel}
	}
	for k, i := range sentIdx {
		typ, ok := done[cids[k].String()]
		out[i].Type = typ
		if ok {
			continue
		}
		if stepErr := firstStepErr(out[i].Steps); stepErr != nil {
			out[i].Err = stepErr
			continue
		}
		if items[i].Events.active() {
			out[i].Type, out[i].Err = s.completeGuarded(ctx, &items[i])
			continue
		}
		out[i].Err = s.leaseCheckDone(ctx, "complete run", items[i].Lease, StatusCompleted)
	}
	return out, nil
}

// completeGuarded is the slow path of a completion whose event count check
// failed (or whose lease did not hold): with the run locked under the
// lease, it refuses the completion (ErrEventsArrived) if an event the
// execution did not see waits, else completes the run (its step reports
// were recorded by the first statement). It returns the run's type when it
// completed it.
func (s *Runs) completeGuarded(ctx context.Context, it *RunsCompleteItem) (typ string, err error) {
	var refused bool
	err = s.inTx(ctx, func(tx *Runs) error {
		held, r, err := tx.eventsGuard(ctx, it.Lease, it.Events)
		switch {
		case err != nil:
			return err
		case !held:
			return tx.leaseCheckDone(ctx, "complete run", it.Lease, StatusCompleted)
		case r:
			// Committed: the refusal is the run's new state.
			refused = true
			return nil
		}
		out, err := tx.RunsCompleteBatch(ctx, []RunsCompleteItem{{Lease: it.Lease, Output: it.Output}})
		if err != nil {
			return err
		}
		typ = out[0].Type
		return out[0].Err
	})
	if err == nil && refused {
		err = errEventsArrived("complete run", it.Lease)
	}
	return typ, err
}

// firstStepErr is the first error among a completion's step outcomes.
func firstStepErr(steps []StepOutcome) error {
	for _, o := range steps {
		if o.Err != nil {
			return o.Err
		}
	}
	return nil
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

// runsQueueDepthsSQL is the statement of RunsQueueDepths.
var runsQueueDepthsSQL = stmt("RunsQueueDepths")

// RunsQueueDepths counts the due, unclaimed runs of every queue, and of
// them those no live worker serves, with when the longest-waiting became
// due (for the queue metrics, read when metrics are scraped). Every queue
// a live worker serves is listed, with 0 when nothing is due, so a
// dashboard shows 0 rather than no data. The workers are checked once per
// type and version, not per run.
func (s *Runs) RunsQueueDepths(ctx context.Context) ([]QueueDepth, error) {
	rows, err := runsQueueDepthsSQL.QueryPos(ctx, s.h.DB)
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
