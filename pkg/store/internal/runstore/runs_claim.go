package runstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// The claim: leasing due runs to a worker, and when a queue next has
// runs due.

// RunsClaimParams ask for up to Limit due runs of one namespace and queue.
type RunsClaimParams struct {
	Namespace string
	Queue     string
	WorkerID  uuid.UUID
	// Types are what the worker registered, a type possibly at several
	// versions: a run without a version is pinned to the first listed
	// version of its type.
	Types []TypeVersion
	Limit int
	// Lease is how long the claim holds before the reaper may take it back
	// (heartbeats extend it).
	Lease time.Duration
	// InlineBytes is the largest input or step output the claim returns;
	// larger ones come back as their size only (ClaimedRun.InputSize,
	// StepState.OutputSize) and are read with PayloadsRead when needed, so
	// a claim's size does not grow with the sizes of a run's payloads.
	// Zero means protocol.InlinePayloadBytes.
	InlineBytes int
}

// runsClaimSQL is the claim statement when none of the requested types has
// a concurrency limit (the common case); RunsClaim runs it and
// RunsClaimExplain explains it, with the arguments claimArgs builds. The
// NOT EXISTS is uncorrelated: a one-time filter, evaluated once, that makes
// the statement claim nothing when a requested type has a limit (RunsClaim
// then runs runsClaimLimitedSQL); it leaves the plan on the claim index.
// The second makes it claim nothing when a run with a rate key of a
// requested type is due (RunsClaim then runs runsClaimFlowSQL): one probe
// of workflow_runs_claim_rate_due_idx, which holds only rate-keyed runs
// and is empty when no run has a rate key. The third makes it claim
// nothing when the queue or a requested type is paused (kagzi.pauses, a
// probe of its key; the table is empty while nothing is paused):
// RunsClaim then claims again without the paused types. A paused run
// needs no test: it has no due time, so no claim index holds it
// (022_pause.sql).
//
// Every claim statement (this one, runsClaimLimitedSQL, runsClaimFlowSQL)
// ends with the same update: it claims the runs of CTE c and returns them
// with their inputs and the latest attempt of each of their steps, read in
// one scan of the latest-step index per run (st, ordered by step id);
// tries (the retry budget used) and overrides (the latest new retry
// options of the step in the attempt's run attempt, see RetryStepNow) are
// read only for a failed latest attempt. Payloads larger than @inline_bytes bytes are returned as their
// size only (octet_length reads a stored value's size without reading the
// value). scanClaimed reads its rows.
var runsClaimSQL = stmt("RunsClaim")

// runsClaimLimitedSQL is the claim statement when some requested types
// (@limited_types) have a concurrency limit. The unlimited types are claimed by c1 as
// in runsClaimSQL. Each limited type is claimed by c2, up to the free slots
// kagzi.claim_slots counts for it — locking its limit row until the claim
// commits, so that claims of a limited type serialise and never overshoot
// (see 003_durable.sql) — and marked limited, which puts them in the index
// that count uses. c picks the best @limit of both by priority and age.
var runsClaimLimitedSQL = stmt("RunsClaimLimited")

// limitedTypesSQL lists which of the requested types (@types) have a
// concurrency limit in the namespace and queue, whether one of those has a
// per-key limit, and whether a run with a rate key is due (claimRoute).
var limitedTypesSQL = stmt("RunsClaimRoute")

// claimStatement picks the claim statement RunsClaim would run for args.
func (s *Runs) claimStatement(ctx context.Context, db DBTX, args pgx.NamedArgs) (*namedSQL, pgx.NamedArgs, error) {
	var r claimRoute
	if err := limitedTypesSQL.QueryRow(ctx, db, limitedTypesArgs(args)).Scan(&r.limited, &r.keyed, &r.rateDue, &r.queuePaused, &r.pausedTypes); err != nil {
		return nil, nil, mapErr("claim runs: read limits", err)
	}
	q, qargs := r.statement(args)
	return q, qargs, nil
}

// limitedTypesArgs are the arguments of limitedTypesSQL for a claim with
// args.
func limitedTypesArgs(args pgx.NamedArgs) pgx.NamedArgs {
	return pgx.NamedArgs{"namespace": args["namespace"], "queue": args["queue"], "types": args["types"]}
}

// claimLimitedArgs are the arguments of runsClaimLimitedSQL: those of
// runsClaimSQL and the limited types.
func claimLimitedArgs(args pgx.NamedArgs, limited []string) pgx.NamedArgs {
	out := maps.Clone(args)
	out["limited_types"] = limited
	return out
}

// claimArgs validates p and returns the arguments of runsClaimSQL.
func claimArgs(p RunsClaimParams) (pgx.NamedArgs, error) {
	if p.Limit <= 0 {
		return nil, invalidf("claim limit %d must be positive", p.Limit)
	}
	if len(p.Types) == 0 {
		return nil, invalidf("claim needs at least one workflow type")
	}
	if p.Lease <= 0 {
		return nil, invalidf("lease %v must be positive", p.Lease)
	}
	types := make([]string, len(p.Types))
	pairs := make([]string, len(p.Types))
	versions := make([]string, len(p.Types))
	seen := make(map[string]bool, len(p.Types))
	for i, tv := range p.Types {
		if seen[tv.Type+"@"+tv.Version] {
			return nil, invalidf("workflow type %q at version %q registered twice", tv.Type, tv.Version)
		}
		seen[tv.Type+"@"+tv.Version] = true
		types[i], versions[i], pairs[i] = tv.Type, tv.Version, tv.Type+"@"+tv.Version
	}
	inline := p.InlineBytes
	if inline <= 0 {
		inline = protocol.InlinePayloadBytes
	}
	return pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "types": types, "type_versions": pairs, "versions": versions,
		"limit": p.Limit, "worker_id": p.WorkerID, "lease_ms": p.Lease.Milliseconds(), "inline_bytes": inline}, nil
}

// RunsClaim claims up to Limit due runs in one claim statement: highest
// priority first; within a priority, runs that have begun (resumed after a
// sleep, an event, a child or a retry: started_at set) before runs not yet
// started, so a run due again is not queued behind a backlog of new
// starts (runs with a rate key keep their age order: a run claimed again
// waits behind the runs its key's full windows hold); then oldest
// available_at. It skips rows other claimers hold,
// claims only runs of the registered types, and no more runs of a type with
// a concurrency limit (LimitsSet) than the limit leaves free. Types with
// per-key or rate limits are claimed by kagzi.claim_flow, which ranks runs
// round-robin across keys first (see runsClaimFlowSQL). (The plain
// claim statement goes in one round trip with a read of the requested
// types' limits; only when some have one does a second statement claim
// them: see runsClaimSQL and runsClaimLimitedSQL.) A run of a registered type started
// without a version matches any version and is pinned to the claimer's
// first listed version of its type, so its replays stay on one version. Each claim sets RUNNING, the
// worker, a new lease token and the lease expiry, and returns the run's
// input and the latest attempt of each of its steps.
func (s *Runs) RunsClaim(ctx context.Context, p RunsClaimParams) ([]ClaimedRun, error) {
	return s.runsClaim(ctx, p, nil)
}

// runsClaim is RunsClaim, recording in stats (if not nil) what a flow
// claim held back.
func (s *Runs) runsClaim(ctx context.Context, p RunsClaimParams, stats *ClaimStats) ([]ClaimedRun, error) {
	args, err := claimArgs(p)
	if err != nil {
		return nil, err
	}
	// One round trip for the common case: the plain claim (which claims
	// nothing if a requested type has a limit) and the read of the limits.
	b := &pgx.Batch{}
	runsClaimSQL.Queue(b, args)
	limitedTypesSQL.Queue(b, limitedTypesArgs(args))
	br := s.h.DB.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, mapErr("claim runs", err)
	}
	out, err := scanClaimed(rows)
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	var r claimRoute
	if err := br.QueryRow().Scan(&r.limited, &r.keyed, &r.rateDue, &r.queuePaused, &r.pausedTypes); err != nil {
		_ = br.Close()
		return nil, mapErr("claim runs: read limits", err)
	}
	if err := br.Close(); err != nil {
		return nil, mapErr("claim runs", err)
	}
	if r.queuePaused {
		return nil, nil
	}
	if len(r.pausedTypes) > 0 {
		// The plain claim claimed nothing: claim again for the types
		// that are not paused, if any (a type paused meanwhile is
		// dropped by the next route read, so this ends).
		if p.Types = unpaused(p.Types, r.pausedTypes); len(p.Types) == 0 {
			return nil, nil
		}
		return s.runsClaim(ctx, p, stats)
	}
	if len(r.limited) == 0 && !r.rateDue {
		return out, nil
	}
	q, qargs := r.statement(args)
	if q == runsClaimFlowSQL {
		return s.runsClaimFlow(ctx, qargs, stats)
	}
	rows, err = q.Query(ctx, s.h.DB, qargs)
	if err != nil {
		return nil, mapErr("claim runs", err)
	}
	return scanClaimed(rows)
}

// claimRoute is what RunsClaim reads beside the plain claim: the requested
// types with a concurrency limit, whether one of them has a per-key limit,
// whether a rate-keyed run is due, and whether the queue or some of the
// types are paused (kagzi.pauses: then the plain claim claims nothing).
type claimRoute struct {
	limited     []string
	keyed       bool
	rateDue     bool
	queuePaused bool
	pausedTypes []string
}

// unpaused returns the types of ts not named in paused.
func unpaused(ts []TypeVersion, paused []string) []TypeVersion {
	out := make([]TypeVersion, 0, len(ts))
	for _, tv := range ts {
		if !slices.Contains(paused, tv.Type) {
			out = append(out, tv)
		}
	}
	return out
}

// statement picks the claim statement for the route and its arguments.
func (r claimRoute) statement(args pgx.NamedArgs) (*namedSQL, pgx.NamedArgs) {
	switch {
	case r.keyed || r.rateDue:
		return runsClaimFlowSQL, args
	case len(r.limited) > 0:
		return runsClaimLimitedSQL, claimLimitedArgs(args, r.limited)
	default:
		return runsClaimSQL, args
	}
}

// ClaimStats says what flow control held back in a claim.
type ClaimStats struct {
	// KeysFull is how many concurrency keys of the requested types had
	// queued runs but no free slot under their per-key limit.
	KeysFull int
	// RateHeld is how many due runs the claim moved to a later window
	// because their rate key's window was full.
	RateHeld int
}

// RunsClaimStats is RunsClaim, also reporting what flow control held back
// (zero when the claim did not take the flow path).
func (s *Runs) RunsClaimStats(ctx context.Context, p RunsClaimParams) ([]ClaimedRun, ClaimStats, error) {
	var st ClaimStats
	runs, err := s.runsClaim(ctx, p, &st)
	return runs, st, err
}

// scanClaimed reads the rows of a claim statement.
func scanClaimed(rows pgx.Rows) ([]ClaimedRun, error) {
	defer rows.Close()
	var out []ClaimedRun
	for rows.Next() {
		var (
			input       []byte
			inputSize   int
			ids         []string
			statuses    []string
			attempts    []int32
			outputs     [][]byte
			outSizes    []int32
			errs        []string
			errTypes    []string
			retryAts    []*time.Time
			runAttempts []int32
			tries       []int64
			nonRetry    []bool
			overrides   [][]byte
		)
		var due time.Time
		var eventSeq int64
		run, err := scanRun(rows, &due, &input, &inputSize, &ids, &statuses, &attempts, &outputs, &outSizes, &errs, &errTypes,
			&retryAts, &runAttempts, &tries, &nonRetry, &eventSeq, &overrides)
		if err != nil {
			return nil, mapErr("claim runs", err)
		}
		run.Input = input
		c := ClaimedRun{Run: run, DueAt: due, InputSize: inputSize, EventSeq: eventSeq}
		if len(ids) > 0 {
			c.Steps = make([]StepState, len(ids))
			for i := range ids {
				c.Steps[i] = StepState{StepID: ids[i], Status: StepStatus(statuses[i]), Attempt: int(attempts[i]),
					Output: outputs[i], OutputSize: int(outSizes[i]), Error: errs[i], ErrorType: errTypes[i], RetryAt: retryAts[i],
					RunAttempt: int(runAttempts[i]), Tries: int(tries[i]), NonRetryable: nonRetry[i]}
				if c.Steps[i].RetryOverride, err = decodeOverride(overrides[i]); err != nil {
					return nil, fmt.Errorf("claim runs: step %q of run %s: %w", ids[i], run.ID, err)
				}
				if len(c.Steps[i].Output) == 0 {
					c.Steps[i].Output = nil
				}
			}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("claim runs", err)
	}
	return out, nil
}

// RunsClaimExplain runs EXPLAIN (ANALYZE, BUFFERS) of the claim statement
// RunsClaim would run for p, inside a transaction it rolls back (so nothing
// is claimed), and returns the plan as text. Tests and `kagzi bench` use it
// to check the claim stays on its partial index.
func (s *Runs) RunsClaimExplain(ctx context.Context, p RunsClaimParams) (string, error) {
	args, err := claimArgs(p)
	if err != nil {
		return "", err
	}
	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		return "", mapErr("explain claim: begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q, args, err := s.claimStatement(ctx, tx, args)
	if err != nil {
		return "", err
	}
	if q == runsClaimFlowSQL {
		// The flow claim claims what its pick, run first, locked.
		if _, err := runsClaimFlowPickSQL.Exec(ctx, tx, runsClaimFlowPickSQL.Only(args)); err != nil {
			return "", mapErr("explain claim: pick", err)
		}
		args = runsClaimFlowSQL.Only(args)
	}
	// The one statement built here: EXPLAIN of a claim statement as
	// sql/runs_claim.sql writes it, so the plan shown is the claim's own.
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "+q.Text(), args)
	if err != nil {
		return "", mapErr("explain claim", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", mapErr("explain claim", err)
	}
	return strings.Join(lines, "\n"), nil
}

// runsNextDueSQL is RunsNextDue's statement. It reads the claim index
// (namespace, queue, priority DESC, begun-or-not, available_at) by a loose
// scan: p walks the queue's distinct priorities, highest first, one probe
// each; g takes each priority's two groups (begun runs, runs not begun)
// and the earliest due time of each (the first entry of its range); only
// a group with a run due already takes another probe, for its earliest due
// time in the future. A queue holds few distinct priorities, so this is a
// handful of index probes, with no index of its own ordered by due time
// alone, in which every run made or woken would write an entry.
var runsNextDueSQL = stmt("RunsNextDue")

// RunsNextDue returns, for the namespace and queue, the earliest due time
// in the future of a claimable run (nil when there is none), and whether
// some run is due already. The dispatcher arms its timer with the first,
// right after a claim: runs still due then were left by that claim (another
// type set's, a type at its concurrency limit, a row another transaction
// held), so they are retried on other signals, not at once.
func (s *Runs) RunsNextDue(ctx context.Context, namespace, queue string) (next *time.Time, pastDue bool, err error) {
	err = runsNextDueSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "queue": queue}).Scan(&next, &pastDue)
	if err != nil {
		return nil, false, mapErr("next due run", err)
	}
	return next, pastDue, nil
}

// QueueDue is a queue with claimable runs and its earliest due time.
type QueueDue struct {
	Namespace string
	Queue     string
	DueAt     time.Time
}

// runsQueuesDueSQL is the statement of RunsQueuesDue.
var runsQueuesDueSQL = stmt("RunsQueuesDue")

// RunsQueuesDue lists every queue with claimable runs and the earliest
// due time of each: the backlog a dispatcher reads on start and reconnect.
func (s *Runs) RunsQueuesDue(ctx context.Context) ([]QueueDue, error) {
	rows, err := runsQueuesDueSQL.QueryPos(ctx, s.h.DB)
	if err != nil {
		return nil, mapErr("due queues", err)
	}
	defer rows.Close()
	var out []QueueDue
	for rows.Next() {
		var q QueueDue
		if err := rows.Scan(&q.Namespace, &q.Queue, &q.DueAt); err != nil {
			return nil, mapErr("due queues", err)
		}
		out = append(out, q)
	}
	return out, mapErr("due queues", rows.Err())
}
