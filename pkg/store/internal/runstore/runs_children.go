package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/retry"
)

// Child runs and suspension.
//
// A parent starts a child with RunsStartChild: the child run and the
// parent's CHILD step (PENDING, naming the child) are written in one
// statement under the parent's lease. The child's id is chosen by the caller
// deterministically (protocol.ChildRunID), so a replayed parent that starts
// the same child again finds it there and starts nothing.
//
// A parent waits for children with RunsWait, which records the CHILD step
// ids it waits for in its row (waiting_on) and suspends it. When a child
// reaches a terminal status, the statement that moves it there also records
// the parent's CHILD step as COMPLETED (with the child's output) or FAILED
// (with its error), removes the step id from the parent's waiting_on, and
// makes the parent claimable when the list became empty: the CTEs pstep
// and pwake, written into every terminal transition of a run
// (RunsComplete, RunsCompleteMany, RunsFail, RunsFailAttempt, RunsCancel,
// RunsFailPastDeadline, and the recoveries that fail exhausted runs).
// Being part of the terminal statement itself, it cannot be skipped by a
// caller, needs no trigger, and commits with the transition or not at all.
//
// Such a statement defines two CTEs before them:
//
//	done(run_id, parent_run_id, parent_step_id, status, error, output)
//	    the runs the statement moved to a terminal status (output: bytea,
//	    NULL unless COMPLETED)
//	touched(run_id)
//	    every run row the statement updates (a superset of done)
//
// pstep records each finished child in its parent's CHILD step (the attempt
// that started it, if it is still waiting). pwake updates each parent's row
// unconditionally — no WHERE on its state — so that, if a concurrent
// transaction (the parent's own RunsWait, or a sibling child finishing) holds
// that row, this statement waits for it and recomputes the SET expressions on
// the row as that transaction left it. That makes the fan-in exact: the last
// child to finish is the one that sees waiting_on empty, whatever the order
// of commits. Parents the statement itself updates are left out, since a row
// may only be updated once per statement (e.g. a parent cancelled together
// with its children).

// RunsStartChildParams describe a child run a parent starts as its step.
type RunsStartChildParams struct {
	// Lease is the parent's.
	Lease Lease
	// StepID and Attempt name the parent's CHILD step attempt.
	StepID  string
	Attempt int
	// ChildRunID is the child's id, derived from the parent and step so a
	// replay finds the same child (see protocol.ChildRunID).
	ChildRunID uuid.UUID
	Type       string
	Version    string
	// Queue is the child's task queue (default: the parent's).
	Queue       string
	Input       []byte
	RetryPolicy *retry.Policy
	Priority    int
	StartedAt   *time.Time
	// ParentClosePolicy says what happens to the child if the parent ends
	// first ("" is TERMINATE).
	ParentClosePolicy ParentClosePolicy
}

// RunsStartChild starts a child run under the parent's lease, in one
// statement: the child (PENDING, with the parent's trace context and
// parent_run_id/parent_step_id) and the parent's CHILD step attempt
// (PENDING, with child_run_id and the child's input). It is idempotent: if
// the child exists it is left alone, and if the step attempt was recorded
// (or finished, the child being fast) nothing changes. A lost lease writes
// nothing and is ErrLeaseLost.
func (s *Runs) RunsStartChild(ctx context.Context, p RunsStartChildParams) error {
	if err := checkName("workflow type", p.Type, true); err != nil {
		return err
	}
	if err := checkName("version", p.Version, false); err != nil {
		return err
	}
	if err := checkName("queue", p.Queue, false); err != nil {
		return err
	}
	if p.ChildRunID == uuid.Nil {
		return invalidf("child run id is required")
	}
	if !p.ParentClosePolicy.Valid() {
		return invalidf("parent-close policy %q: TERMINATE, REQUEST_CANCEL or ABANDON", p.ParentClosePolicy)
	}
	if err := s.h.CheckPayload(ctx, "child input", p.Input); err != nil {
		return err
	}
	policy, err := encodePolicy(p.RetryPolicy)
	if err != nil {
		return err
	}
	child := p.ChildRunID
	sp := StepsRecordParams{Lease: p.Lease, StepID: p.StepID, Attempt: p.Attempt, Kind: StepChild, Status: StepPending,
		Input: p.Input, StartedAt: p.StartedAt, ChildRunID: &child}
	if err := s.validateStep(ctx, &sp); err != nil {
		return err
	}
	if sp.StartedAt == nil {
		now := time.Now()
		sp.StartedAt = &now
	}
	// A parent from before trace contexts has none: the child gets one of
	// its own rather than none.
	tc, err := newTraceParent()
	if err != nil {
		return err
	}
	args := stepWriteArgs(&sp)
	args["child_type"], args["child_version"], args["child_queue"], args["child_policy"] = p.Type, p.Version, p.Queue, policy
	args["child_priority"], args["child_input"], args["child_close"], args["child_trace"] = p.Priority, p.Input, string(p.ParentClosePolicy), tc
	var res stepResult
	err = runsChildStartSQL.QueryRow(ctx, s.h.DB, args).Scan(&res.held, &res.wrote, &res.before, &res.cancel)
	if err != nil {
		return mapErr(fmt.Sprintf("start child %q of run %s", p.StepID, p.Lease.RunID), err)
	}
	ok, err := stepOutcome(&sp, res)
	if ok {
		return err
	}
	return s.stepLeaseFailed(ctx, &sp)
}

// RunsWaitParams describe a suspension that waits for more than a timer.
type RunsWaitParams struct {
	Lease Lease
	// Until is when the run is due again at the latest (nil: only when
	// woken).
	Until *time.Time
	// ChildSteps are the CHILD steps the run waits for: it is woken when
	// every one of them has finished (at once if they already have).
	ChildSteps []string
}

// runsWaitSQL suspends a run under its lease; it runs right after the run
// row was locked (runsWaitLockSQL), in the same transaction, so its snapshot
// sees every child and event that committed before the lock: a child that
// finishes or an event that arrives later finds the run waiting.
//
// A run waits for every wait in progress its workflow recorded (EVENT steps
// PENDING: woken by a matching event, due at the earliest of their
// timeouts) and for the CHILD steps named in @child_steps. It is claimable at once if
// a matching event is already there or every named child already finished.
var runsWaitSQL = stmt("RunsWait")

// runsWaitLockSQL locks a run row under its lease (no row: the lease is gone).
var runsWaitLockSQL = stmt("RunsWaitLock")

// RunsWait suspends a run, releasing its lease and slot, until its timer
// (Until), the children it names, or an event one of its waits in progress
// expects (see EventsReceive) — whichever comes first. ready reports that
// it was claimable at once (an awaited event or every awaited child was
// already there). A retried request after the run went to sleep under the
// same lease is a no-op success.
func (s *Runs) RunsWait(ctx context.Context, p RunsWaitParams) (ready bool, err error) {
	if err := checkName("namespace", p.Lease.Namespace, true); err != nil {
		return false, err
	}
	for _, id := range p.ChildSteps {
		if id == "" || len(id) > maxNameLen {
			return false, invalidf("child step id %q must be 1 to %d bytes", id, maxNameLen)
		}
	}
	children := p.ChildSteps
	if children == nil {
		children = []string{}
	}
	b := &pgx.Batch{}
	runsWaitLockSQL.Queue(b, leaseArgs(p.Lease, pgx.NamedArgs{}))
	runsWaitSQL.Queue(b, leaseArgs(p.Lease, pgx.NamedArgs{"until": p.Until, "child_steps": children}))
	br := s.h.DB.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return false, mapErr("wait", err)
	}
	var n int64
	if err := br.QueryRow().Scan(&n, &ready); err != nil {
		_ = br.Close()
		return false, mapErr("wait", err)
	}
	if err := br.Close(); err != nil {
		return false, mapErr("wait", err)
	}
	if n == 1 {
		return ready, nil
	}
	return false, s.leaseCheckDone(ctx, "wait", p.Lease, StatusSleeping)
}

// runsChildStartSQL records a CHILD step under the parent's lease (as
// stepRecordSQL does) and inserts the child run and its input, in one
// statement.
var runsChildStartSQL = stmt("RunsChildStart")
