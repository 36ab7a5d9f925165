package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Reports made under a run's lease that move the run by one plain
// statement (the others are in runs_report.go).

// Lease names the lease a report is made under.
type Lease struct {
	Namespace string
	RunID     uuid.UUID
	Token     int64
}

// leaseArgs adds the lease's arguments (@namespace, @run_id, @token) to args.
func leaseArgs(l Lease, args pgx.NamedArgs) pgx.NamedArgs {
	args["namespace"], args["run_id"], args["token"] = l.Namespace, l.RunID, l.Token
	return args
}

// leaseTransition runs q, an update that applies only while the lease is
// current (status RUNNING and the token matches), with args and
// the lease's arguments. If it matched no run, it succeeds anyway when the
// run already shows the same token and status done (a retried report), else
// it is ErrLeaseLost.
func (s *Runs) leaseTransition(ctx context.Context, what string, l Lease, done RunStatus, q *namedSQL, args pgx.NamedArgs) error {
	tag, err := q.Exec(ctx, s.h.DB, leaseArgs(l, args))
	if err != nil {
		return mapErr(what, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, what, l, done)
}

// leaseCheckSQL reads the state of a run a report under a lease matched.
var leaseCheckSQL = stmt("RunsLeaseCheck")

// leaseCheckDone decides what a report that matched no running lease means.
func (s *Runs) leaseCheckDone(ctx context.Context, what string, l Lease, done RunStatus) error {
	var st RunStatus
	var tok int64
	err := leaseCheckSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": l.Namespace, "run_id": l.RunID}).Scan(&st, &tok)
	if err != nil {
		return mapErr(fmt.Sprintf("%s %s", what, l.RunID), err)
	}
	if tok == l.Token && st == done {
		return nil
	}
	return fmt.Errorf("%s %s: %w (run is %s under lease %d, report names lease %d)", what, l.RunID, ErrLeaseLost, st, tok, l.Token)
}

// RunsComplete records a run's successful end and its output (and, for a
// child, wakes its parent: the wake-up CTEs pstep and pwake, explained in runs_children.go). It is RunsCompleteMany for
// one run, so a completion means the same whichever way it arrives.
func (s *Runs) RunsComplete(ctx context.Context, l Lease, output []byte) error {
	errs, _, err := s.RunsCompleteMany(ctx, []RunsCompleteItem{{Lease: l, Output: output}})
	if err != nil {
		return err
	}
	return errs[0]
}

// runsFailSQL is RunsFail's statement.
var runsFailSQL = stmt("RunsFail")

// RunsFail records a run's final failure (and, for a child, wakes its
// parent).
func (s *Runs) RunsFail(ctx context.Context, l Lease, errMsg string) error {
	var n int64
	err := runsFailSQL.QueryRow(ctx, s.h.DB, leaseArgs(l, pgx.NamedArgs{"error": clipError(errMsg)})).Scan(&n)
	if err != nil {
		return mapErr("fail run", err)
	}
	if n == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, "fail run", l, StatusFailed)
}

// RunsSleep suspends a run until the given time (nil: until something wakes
// it, e.g. an event or a child finishing). It releases the lease and the
// worker's slot.
func (s *Runs) RunsSleep(ctx context.Context, l Lease, until *time.Time) error {
	// A run asked to cancel whose workflow has not been delivered the
	// request yet is due at once: its workflow handles the request.
	return s.leaseTransition(ctx, "sleep run", l, StatusSleeping, runsSleepSQL, pgx.NamedArgs{"until": until})
}

// runsSleepSQL is RunsSleep's statement.
var runsSleepSQL = stmt("RunsSleep")

// RunsRetryAt ends the current attempt with an error and makes the run
// claimable again at the given time as its next attempt.
func (s *Runs) RunsRetryAt(ctx context.Context, l Lease, at time.Time, errMsg string) error {
	return s.leaseTransition(ctx, "retry run", l, StatusPending, runsRetryAtSQL, pgx.NamedArgs{"at": at, "error": clipError(errMsg)})
}

// runsRetryAtSQL is RunsRetryAt's statement.
var runsRetryAtSQL = stmt("RunsRetryAt")

// RunsRelease gives a claimed run back, claimable at once, without counting
// an attempt: a delivery nobody received, or a worker draining.
// It is RunsReleaseMany for one run, with the repeated report told from a
// lost lease.
func (s *Runs) RunsRelease(ctx context.Context, l Lease) error {
	n, err := s.RunsReleaseMany(ctx, []Lease{l})
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, "release run", l, StatusPending)
}
