package runstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ConcurrencyLimit caps the RUNNING runs of one workflow type in one
// namespace and queue, across every worker (RunsClaim enforces it).
type ConcurrencyLimit struct {
	Namespace string
	Queue     string
	Type      string
	// MaxRunning caps the type's RUNNING runs; NoLimit when only a
	// per-key limit is set.
	MaxRunning int
	// MaxPerKey caps the RUNNING runs per concurrency key (LimitsSetPerKey);
	// 0 when there is no per-key limit.
	MaxPerKey int
	UpdatedAt time.Time
}

// NoLimit is ConcurrencyLimit.MaxRunning of a type with a per-key limit
// and no total one.
const NoLimit = -1

// limitsSetSQL is the statement of LimitsSet.
var limitsSetSQL = stmt("LimitsSet")

// LimitsSet sets (or replaces) the concurrency limit of a workflow type in
// a queue. A limit of 0 pauses the type: no run of it is claimed. The runs
// of the type already running count against it; it applies to the claims
// that begin after it was set (a claim already in flight finishes under the
// rules it started with). Raising a limit announces the queue as claimable
// (the trigger on concurrency_limits, migration 005), so runs that waited
// for a slot are claimed at once.
func (s *Runs) LimitsSet(ctx context.Context, namespace, queue, typ string, maxRunning int) (ConcurrencyLimit, error) {
	if err := checkLimitOf(namespace, queue, typ); err != nil {
		return ConcurrencyLimit{}, err
	}
	if maxRunning < 0 || maxRunning > math.MaxInt32 {
		return ConcurrencyLimit{}, invalidf("limit %d must be between 0 and %d", maxRunning, math.MaxInt32)
	}
	l := ConcurrencyLimit{Namespace: namespace, Queue: queue, Type: typ, MaxRunning: maxRunning}
	// The runs already running are marked limited, so the limit's count
	// (which reads only limited runs) sees them.
	err := limitsSetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "queue": queue, "type": typ, "max_running": maxRunning}).Scan(&l.UpdatedAt, &l.MaxPerKey)
	if err != nil {
		return ConcurrencyLimit{}, mapErr("set concurrency limit", err)
	}
	return l, nil
}

// checkLimitOf validates the namespace, queue and workflow type a limit
// belongs to.
func checkLimitOf(namespace, queue, typ string) error {
	if err := checkName("namespace", namespace, true); err != nil {
		return err
	}
	if err := checkName("queue", queue, true); err != nil {
		return err
	}
	return checkName("workflow type", typ, true)
}

// limitsDeleteSQL is the statement of LimitsDelete.
var limitsDeleteSQL = stmt("LimitsDelete")

// LimitsDelete removes the concurrency limit of a workflow type in a queue,
// announcing the queue as claimable as a raise does; an absent limit is
// ErrNotFound.
func (s *Runs) LimitsDelete(ctx context.Context, namespace, queue, typ string) error {
	tag, err := limitsDeleteSQL.Exec(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": namespace, "queue": queue, "type": typ})
	if err != nil {
		return mapErr("delete concurrency limit", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete concurrency limit of %s in queue %s: %w", protocol.Echo(typ), protocol.Echo(queue), ErrNotFound)
	}
	return nil
}

// limitsListSQL is the statement of LimitsList.
var limitsListSQL = stmt("LimitsList")

// LimitsList lists the namespace's concurrency limits by queue and type.
func (s *Runs) LimitsList(ctx context.Context, namespace string) ([]ConcurrencyLimit, error) {
	rows, err := limitsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list concurrency limits", err)
	}
	defer rows.Close()
	out := []ConcurrencyLimit{}
	for rows.Next() {
		var l ConcurrencyLimit
		if err := rows.Scan(&l.Namespace, &l.Queue, &l.Type, &l.MaxRunning, &l.MaxPerKey, &l.UpdatedAt); err != nil {
			return nil, mapErr("list concurrency limits", err)
		}
		out = append(out, l)
	}
	return out, mapErr("list concurrency limits", rows.Err())
}
