package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// runsGetSQL is RunsGet's statement.
var runsGetSQL = stmt("RunsGet")

// RunsGet returns a run of the namespace with its input and output.
func (s *Runs) RunsGet(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	row := runsGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	var in, out []byte
	var cont *uuid.UUID
	var dkey, ckey, rkey string
	var dstarts int
	var pausedAt *time.Time
	var pausedBy, pausedReason string
	run, err := scanRun(row, &in, &out, &cont, &dkey, &dstarts, &ckey, &rkey, &pausedAt, &pausedBy, &pausedReason)
	if err != nil {
		return Run{}, mapErr(fmt.Sprintf("get run %s", id), err)
	}
	if pausedAt != nil {
		run.Paused = &Pause{By: pausedBy, Reason: pausedReason, At: *pausedAt}
	}
	run.Input, run.Output, run.ContinuedAs = in, out, cont
	run.DebounceKey, run.DebounceStarts = dkey, dstarts
	run.ConcurrencyKey, run.RateLimitKey = ckey, rkey
	return run, nil
}

// runsGetByExternalIDSQL is RunsGetByExternalID's statement.
var runsGetByExternalIDSQL = stmt("RunsGetByExternalID")

// RunsGetByExternalID returns the newest run of the namespace with that
// external id (the live one if any).
func (s *Runs) RunsGetByExternalID(ctx context.Context, namespace, externalID string) (Run, error) {
	row := runsGetByExternalIDSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": namespace, "external_id": externalID})
	run, err := scanRun(row)
	if err != nil {
		return Run{}, mapErr(fmt.Sprintf("get run by external id %q", protocol.Echo(externalID)), err)
	}
	return run, nil
}

// runsCountSQL is RunsCount's statement.
var runsCountSQL = stmt("RunsCount")

// RunsCount counts the namespace's runs by status (templates included under
// their own statuses).
func (s *Runs) RunsCount(ctx context.Context, namespace string) (map[RunStatus]int64, error) {
	rows, err := runsCountSQL.Query(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("count runs", err)
	}
	defer rows.Close()
	out := map[RunStatus]int64{}
	for rows.Next() {
		var st RunStatus
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, mapErr("count runs", err)
		}
		out[st] = n
	}
	return out, mapErr("count runs", rows.Err())
}

// runsCancelSQL is the statement of RunsCancel.
var runsCancelSQL = stmt("RunsCancel")

// RunsCancel asks a live run to cancel, and with it every live run it
// started as a child, recursively, except children started with the
// ABANDON parent-close policy (and their descendants). Cancellation is a
// request the workflow handles: a running run's holder is told (its
// workflow context is cancelled), a sleeping or waiting run, or one backing
// off before a retry, becomes due at once so its workflow sees the request;
// the workflow may run cleanup and ends CANCELLED if it returns an error
// (see RunsFailAttempt). A run that never started is cancelled at once. A
// repeated request changes nothing. Cancelling a finished run or a
// template is ErrConflict. Returns the run as it is now.
func (s *Runs) RunsCancel(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	return s.retryDeadlock(ctx, "cancel run", func() (Run, error) {
		return scanRun(runsCancelSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id}))
	}, namespace, id)
}

// TerminatedError is the error recorded on a terminated run (followed by
// ": " and the reason, if one was given).
const TerminatedError = "terminated"

// runsTerminateSQL is the statement of RunsTerminate.
var runsTerminateSQL = stmt("RunsTerminate")

// RunsTerminate ends a live run at once, CANCELLED, with the error
// "terminated" and reason: no cleanup runs, and a running run's lease is
// void at once (its holder is told; its later reports get ErrLeaseLost).
// Its children get their parent-close policies, as when any run ends.
// Terminating a finished run or a template is ErrConflict. Returns the run
// as it is now.
func (s *Runs) RunsTerminate(ctx context.Context, namespace string, id uuid.UUID, reason string) (Run, error) {
	msg := TerminatedError
	if reason != "" {
		msg += ": " + reason
	}
	return s.retryDeadlock(ctx, "terminate run", func() (Run, error) {
		return scanRun(runsTerminateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id, "error": clipError(msg)}))
	}, namespace, id)
}

// retryDeadlock runs one statement that changes a run and returns it,
// again when Postgres aborted it to break a deadlock (a run's end locks
// its children after itself, a child's end its parent after itself: the
// two can meet), and maps "no row" to the run's state: ErrNotFound, or
// ErrConflict for a run that is not live.
func (s *Runs) retryDeadlock(ctx context.Context, what string, stmt func() (Run, error), namespace string, id uuid.UUID) (Run, error) {
	for tries := 1; ; tries++ {
		run, err := stmt()
		if err == nil {
			return run, nil
		}
		if isDeadlock(err) && tries < 5 {
			continue
		}
		if !isNoRows(err) {
			return Run{}, mapErr(what, err)
		}
		cur, err := s.RunsGet(ctx, namespace, id)
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", what, err)
		}
		return Run{}, fmt.Errorf("%s %s: %w: it is %s", what, id, ErrConflict, cur.Status)
	}
}

// runsRetrySQL is the statement of RunsRetry.
var runsRetrySQL = stmt("RunsRetry")

// RunsRetry gives a FAILED run a fresh start, resuming from its last
// completed step: it becomes PENDING and claimable now, with its attempt
// count reset to 0 (so the run's retry policy grants a full budget again),
// its error and finish time cleared, and a deadline that already passed
// dropped (the reaper would fail it again at once). Completed steps stay
// memoized. Its failed steps get a fresh budget too: their attempts are
// moved to an earlier retry epoch (run_attempt NULL), so the SDK counts a
// step's attempts from the retry on and retries a step whose failure was
// final. The run keeps its trace context: the retry's executions continue
// the run's one trace (a run from before trace contexts gets one now).
// Only a FAILED run can be retried (ErrConflict otherwise); one
// whose external id a live run took meanwhile is ErrConflict too.
func (s *Runs) RunsRetry(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	tc, err := newTraceParent()
	if err != nil {
		return Run{}, err
	}
	row := runsRetrySQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id, "trace_context": tc})
	run, err := scanRun(row)
	if err == nil {
		return run, nil
	}
	if !isNoRows(err) {
		return Run{}, mapErr(fmt.Sprintf("retry run %s", id), err)
	}
	cur, err := s.RunsGet(ctx, namespace, id)
	if err != nil {
		return Run{}, fmt.Errorf("retry run: %w", err)
	}
	return Run{}, fmt.Errorf("retry run %s: %w: only a FAILED run can be retried; it is %s", id, ErrConflict, cur.Status)
}
