package runstore

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Flow control by a key taken from the run (migration 013): a per-key
// concurrency limit of a workflow type (at most MaxPerKey runs RUNNING per
// concurrency key, with round-robin fairness across keys), and rate limits
// (at most N claims of runs with a rate key per period). Both are enforced
// by the claim, in kagzi.claim_flow, which RunsClaim runs only when a
// requested type has a per-key limit or a rate-keyed run is due: otherwise
// the claim is the plain statement (runsClaimSQL).

// maxFlowKeyLen bounds a concurrency or rate key, in bytes.
const maxFlowKeyLen = 255

// checkFlowKeys checks a run's concurrency and rate keys (both optional).
func checkFlowKeys(concurrencyKey, rateKey string) error {
	for _, k := range []struct{ what, v string }{{"concurrency key", concurrencyKey}, {"rate limit key", rateKey}} {
		if len(k.v) > maxFlowKeyLen {
			return invalidf("%s is %d bytes, more than %d", k.what, len(k.v), maxFlowKeyLen)
		}
		if err := checkPrintable(k.what, k.v); err != nil {
			return err
		}
	}
	return nil
}

// runsClaimFlowSQL is the claim statement when a requested type has a
// per-key limit or a rate-keyed run is due: kagzi.claim_flow (migration
// 013) picks and locks the runs — the limit rows of the requested types
// locked first, so claims of a limited type serialise across dispatchers
// and its per-key and per-type counts are exact — and the claim update of
// runsClaimSQL claims them. It claims every requested type, limited or not.
//
// They are two statements of one transaction: runsClaimFlowPickSQL picks
// and locks, then runsClaimFlowSQL claims what it picked (the setting
// kagzi.flow_taken). The claim reads the runs' steps, and a statement
// reads with the snapshot it began with: one statement that called
// claim_flow would read them as they were before claim_flow's locks, and
// a run whose suspending report committed in between would be delivered
// without the steps that report recorded, which its worker would then run
// again.
var runsClaimFlowPickSQL = stmt("RunsClaimFlowPick")

// runsClaimFlowSQL claims the runs runsClaimFlowPickSQL picked.
var runsClaimFlowSQL = stmt("RunsClaimFlow")

// flowStatsSQL reads what the flow claim before it, in the same
// transaction, held back (settings local to the transaction).
var flowStatsSQL = stmt("RunsClaimFlowStats")

// runsClaimFlow runs runsClaimFlowSQL and, in the same implicit
// transaction (one batch), reads what it held back into stats. A claim
// that waited for a limit or rate row past the function's lock_timeout
// fails; it ends the claim sessions stuck sending results to a client
// that stopped reading (a frozen dispatcher) first, so the next claim goes
// through.
func (s *Runs) runsClaimFlow(ctx context.Context, args pgx.NamedArgs, stats *ClaimStats) ([]ClaimedRun, error) {
	b := &pgx.Batch{}
	runsClaimFlowPickSQL.Queue(b, runsClaimFlowPickSQL.Only(args))
	runsClaimFlowSQL.Queue(b, runsClaimFlowSQL.Only(args))
	b.Queue(flowStatsSQL.SQL())
	br := s.h.DB.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, s.flowClaimErr(ctx, err)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, s.flowClaimErr(ctx, err)
	}
	out, err := scanClaimed(rows)
	if err != nil {
		_ = br.Close()
		return nil, s.flowClaimErr(ctx, err)
	}
	var st ClaimStats
	if err := br.QueryRow().Scan(&st.KeysFull, &st.RateHeld); err != nil {
		_ = br.Close()
		return nil, mapErr("claim runs: read flow stats", err)
	}
	if err := br.Close(); err != nil {
		return nil, s.flowClaimErr(ctx, err)
	}
	if stats != nil {
		*stats = st
	}
	return out, nil
}

// ClaimStuckAfter is how long a claim session may sit sending its result
// to a client that does not read it before a claim that waits for its
// locks ends it (ClaimsStuckTerminate). It matches the bound on a session
// idle inside a transaction.
const ClaimStuckAfter = IdleInTransactionTimeout

// flowClaimErr maps a flow claim's error; on a lock timeout it first ends
// stuck claim sessions.
func (s *Runs) flowClaimErr(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		_, _ = s.ClaimsStuckTerminate(ctx, ClaimStuckAfter)
	}
	return mapErr("claim runs", err)
}

// claimsStuckTerminateSQL is the statement of ClaimsStuckTerminate.
var claimsStuckTerminateSQL = stmt("ClaimsStuckTerminate")

// ClaimsStuckTerminate ends the sessions running a claim statement that
// have been waiting to send its result to their client for longer than
// after, and returns how many. A claim is one statement, committed when
// its result is sent: a client that stopped reading (a frozen process)
// holds that statement's row locks — the limit and rate rows that other
// claims of the same type or key wait for — until its session ends.
func (s *Runs) ClaimsStuckTerminate(ctx context.Context, after time.Duration) (int, error) {
	var n int
	err := claimsStuckTerminateSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"after_ms": after.Milliseconds()}).Scan(&n)
	return n, mapErr("terminate stuck claims", err)
}

// limitsPerKeyRemoveSQL is the statement of LimitsSetPerKey, removing a per-key limit.
var limitsPerKeyRemoveSQL = stmt("LimitsPerKeyRemove")

// limitsPerKeySetSQL is the statement of LimitsSetPerKey.
var limitsPerKeySetSQL = stmt("LimitsPerKeySet")

// LimitsSetPerKey sets (or replaces) the per-key limit of a workflow type
// in a queue: at most maxPerKey of its runs RUNNING at once per
// concurrency key, claimed round-robin across keys. The type's total
// limit (LimitsSet), if any, applies as well; without one the type has no
// total cap. maxPerKey 0 removes the per-key limit (and the limit row, if
// no total limit is left). As LimitsSet, it marks the type's running runs
// so the counts see them, and applies to claims that begin after it.
func (s *Runs) LimitsSetPerKey(ctx context.Context, namespace, queue, typ string, maxPerKey int) (ConcurrencyLimit, error) {
	if err := checkLimitOf(namespace, queue, typ); err != nil {
		return ConcurrencyLimit{}, err
	}
	if maxPerKey < 0 || maxPerKey > math.MaxInt32 {
		return ConcurrencyLimit{}, invalidf("per-key limit %d must be between 0 and %d", maxPerKey, math.MaxInt32)
	}
	args := pgx.NamedArgs{"namespace": namespace, "queue": queue, "type": typ}
	if maxPerKey == 0 {
		_, err := limitsPerKeyRemoveSQL.Exec(ctx, s.h.DB, args)
		if err != nil {
			return ConcurrencyLimit{}, mapErr("remove per-key limit", err)
		}
		return ConcurrencyLimit{Namespace: namespace, Queue: queue, Type: typ, MaxRunning: NoLimit}, nil
	}
	args["per_key"] = maxPerKey
	l := ConcurrencyLimit{Namespace: namespace, Queue: queue, Type: typ, MaxPerKey: maxPerKey}
	var maxRunning *int32
	err := limitsPerKeySetSQL.QueryRow(ctx, s.h.DB, args).Scan(&maxRunning, &l.UpdatedAt)
	if err != nil {
		return ConcurrencyLimit{}, mapErr("set per-key limit", err)
	}
	l.MaxRunning = NoLimit
	if maxRunning != nil {
		l.MaxRunning = int(*maxRunning)
	}
	return l, nil
}

// KeyUsage is how many runs of one concurrency key are RUNNING.
type KeyUsage struct {
	Key     string
	Running int
}

// limitsKeyUsageSQL is the statement of LimitsKeyUsage.
var limitsKeyUsageSQL = stmt("LimitsKeyUsage")

// LimitsKeyUsage returns the concurrency keys of a type in a queue with
// the most RUNNING runs counted by its per-key limit, busiest first, at
// most top of them.
func (s *Runs) LimitsKeyUsage(ctx context.Context, namespace, queue, typ string, top int) ([]KeyUsage, error) {
	if top <= 0 {
		return nil, invalidf("top %d must be positive", top)
	}
	rows, err := limitsKeyUsageSQL.Query(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": namespace, "queue": queue, "type": typ, "top": top})
	if err != nil {
		return nil, mapErr("read key usage", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (KeyUsage, error) {
		var u KeyUsage
		err := row.Scan(&u.Key, &u.Running)
		return u, err
	})
	return out, mapErr("read key usage", err)
}
