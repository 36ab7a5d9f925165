package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/retry"
)

// Taking runs back from holders that went away, failing runs past their
// deadlines, and persisting the heartbeats that keep leases alive.

// A failed attempt's backoff is computed here, in Go, by package retry
// (retry.Policy.Delay, jitter included) and given to the statement that
// moves the run: the policy's defaults and formula exist once.

// storedPolicy decodes a run's stored retry policy (NULL: the defaults),
// with the defaults filled, as scanRun does.
func storedPolicy(raw []byte, run uuid.UUID) (retry.Policy, error) {
	var p retry.Policy
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return retry.Policy{}, fmt.Errorf("decode retry policy of run %s: %w", run, err)
		}
	}
	return p.WithDefaults(), nil
}

// decodeOverride decodes a step's stored new retry options (NULL: none),
// as they were written: only the fields set.
func decodeOverride(raw []byte) (*retry.Policy, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var p retry.Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode retry override: %w", err)
	}
	return &p, nil
}

// backoffMS is the wait after a run's failed attempt number attempts under
// p, in milliseconds (the statements add it to now()), with fresh jitter.
func backoffMS(p retry.Policy, attempts int) float64 {
	return float64(p.Delay(attempts, rand.Float64())) / float64(time.Millisecond)
}

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

// A run is taken back from a holder that went away in two statements. The
// pick reads the candidates' attempts and retry policies, without locking;
// Go computes each one's backoff; the recovery (runsRecoverWorkerSQL,
// runsExpireLeasesSQL) then locks the candidates that still qualify and
// still show the attempts the backoff was computed for (a run that moved
// on meanwhile is skipped, as a row another transaction holds is), and
// moves them: retried with the backoff while attempts remain, failed once
// exhausted. Only a run its holder is known to have received — held: a
// heartbeat of the holder listed it since the claim, or it is among the
// @received runs — counts the lost attempt, and may fail as exhausted. A
// run that never reached its holder (the dispatcher died between claim
// and delivery, or the worker died with a request the dispatcher then
// served) goes back to PENDING, claimable at once, its attempts and error
// unchanged. A sweep that finds nothing costs the pick alone.
//
// The expired leases are, for each holder whose earliest lease expired, a
// range of its entries in the lease index. The pick finds the holders by
// walking that index (locked_by, lease_expires_at over running runs) by a
// loose scan, h: one probe per worker that holds running runs, each
// yielding the worker and its earliest lease expiry (the first entry of
// its range). Workers holding runs are few next to the runs they hold, and
// every running run has a holder (workflow_runs_running_holder_check), so
// the walk sees them all. runsNextLeaseExpirySQL walks it the same way.
var (
	runsRecoverWorkerPickSQL = stmt("RunsRecoverWorkerPick")
	runsRecoverWorkerSQL     = stmt("RunsRecoverWorker")
	runsExpireLeasesPickSQL  = stmt("RunsExpireLeasesPick")
	runsExpireLeasesSQL      = stmt("RunsExpireLeases")
	runsNextLeaseExpirySQL   = stmt("RunsNextLeaseExpiry")
)

// recoverRuns runs pick with args, computes the backoff of each run it
// finds, and runs move with args and the backoffs.
func (s *Runs) recoverRuns(ctx context.Context, what string, pick, move *namedSQL, args pgx.NamedArgs) ([]RecoveredRun, error) {
	rows, err := pick.Query(ctx, s.h.DB, pick.Only(args))
	if err != nil {
		return nil, mapErr(what, err)
	}
	var c recoverCandidates
	for rows.Next() {
		var id uuid.UUID
		var n int32
		var raw []byte
		if err := rows.Scan(&id, &n, &raw); err != nil {
			rows.Close()
			return nil, mapErr(what, err)
		}
		if err := c.add(id, n, raw); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, mapErr(what, err)
	}
	if len(c.ids) == 0 {
		return nil, nil
	}
	return s.recoverMove(ctx, what, move, args, &c)
}

// recoverCandidates are the runs a recovery's pick found, each with the
// attempts it showed and what a lost attempt leads to under its policy.
type recoverCandidates struct {
	ids       []uuid.UUID
	attempts  []int32
	exhausted []bool
	delays    []float64 // milliseconds
}

// add adds a run that showed attempts, with its stored retry policy raw.
func (c *recoverCandidates) add(id uuid.UUID, attempts int32, raw []byte) error {
	p, err := storedPolicy(raw, id)
	if err != nil {
		return err
	}
	c.ids, c.attempts = append(c.ids, id), append(c.attempts, attempts)
	c.exhausted, c.delays = append(c.exhausted, p.Exhausted(int(attempts))), append(c.delays, backoffMS(p, int(attempts)))
	return nil
}

// recoverMove runs move, a recovery, with args and the candidates c.
func (s *Runs) recoverMove(ctx context.Context, what string, move *namedSQL, args pgx.NamedArgs, c *recoverCandidates) ([]RecoveredRun, error) {
	args["run_ids"], args["attempts"], args["exhausted"], args["delay_ms"] = c.ids, c.attempts, c.exhausted, c.delays
	rows, err := move.Query(ctx, s.h.DB, move.Only(args))
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
// (see recoverRuns). A run is received when a persisted heartbeat marked it
// held, or when it is among received: the runs the worker's last heartbeat
// listed, which the caller heard (a flush may have skipped marking them).
func (s *Runs) RunsRecoverWorker(ctx context.Context, workerID uuid.UUID, received ...uuid.UUID) ([]RecoveredRun, error) {
	if received == nil {
		received = []uuid.UUID{}
	}
	return s.recoverRuns(ctx, "recover worker runs", runsRecoverWorkerPickSQL, runsRecoverWorkerSQL,
		pgx.NamedArgs{"error": "worker " + workerID.String() + " lost", "worker_id": workerID, "received": received})
}

// RunsExpireLeases takes back every running run whose lease expired at or
// before now, like RunsRecoverWorker (a run is received when held).
func (s *Runs) RunsExpireLeases(ctx context.Context, now time.Time) ([]RecoveredRun, error) {
	return s.recoverRuns(ctx, "expire leases", runsExpireLeasesPickSQL, runsExpireLeasesSQL,
		pgx.NamedArgs{"error": "lease expired", "now": now, "received": []uuid.UUID{}})
}

// RunsNextLeaseExpiry returns the earliest lease expiry of a running run, or
// nil when none runs.
func (s *Runs) RunsNextLeaseExpiry(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextLeaseExpirySQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{}).Scan(&t)
	return t, mapErr("next lease expiry", err)
}

// DeadlineError is the error recorded on a run that missed its deadline.
const DeadlineError = "deadline exceeded"

// runsFailPastDeadlineSQL is the statement of RunsFailPastDeadline.
var runsFailPastDeadlineSQL = stmt("RunsFailPastDeadline")

// RunsFailPastDeadline fails every live run whose deadline is at or before
// now, whatever its state, and returns them.
func (s *Runs) RunsFailPastDeadline(ctx context.Context, now time.Time) ([]Run, error) {
	rows, err := runsFailPastDeadlineSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"now": now, "error": DeadlineError})
	if err != nil {
		return nil, mapErr("fail past deadline", err)
	}
	runs, err := collectRuns(rows)
	return runs, mapErr("fail past deadline", err)
}

// runsNextDeadlineSQL is the statement of RunsNextDeadline.
var runsNextDeadlineSQL = stmt("RunsNextDeadline")

// RunsNextDeadline returns the earliest deadline of a live run, or nil.
func (s *Runs) RunsNextDeadline(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextDeadlineSQL.QueryRowPos(ctx, s.h.DB).Scan(&t)
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
// recoverRuns); a run locked to one of
// these workers that it no longer lists (a delivery lost on the way) is
// released, claimable at once, if its lease was last set more than grace
// before the heartbeat (so a delivery still in flight when the heartbeat was
// sent is left alone). It returns the number extended and released.
func (s *Runs) RunsExtendLeases(ctx context.Context, hbs []RunsExtendLeasesParams, grace time.Duration) (extended, released int64, err error) {
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
	err = runsExtendLeasesSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"worker_ids": workers, "untils": untils,
		"run_worker_ids": runWorkers, "run_ids": runs, "grace_ms": grace.Milliseconds()}).Scan(&extended, &released)
	if err != nil {
		return 0, 0, mapErr("extend leases", err)
	}
	return extended, released, nil
}
