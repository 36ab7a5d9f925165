package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A leader (pgsession.Leader) opens a term of its role when elected, and
// writes only while the term is current: a leader replaced while it
// stalled writes nothing after its successor's election.

var (
	leadersElectSQL = stmt("LeadersElect")
	leadersFenceSQL = stmt("LeadersFence")
)

// LeadersElect opens the next term of role and returns it: the first
// statement of a leader, on the session that holds its lock (see pgsession.Leader).
// It waits for the fenced writes of the previous term still in flight
// (they hold the row FOR SHARE), so none of them commits after it.
func LeadersElect(ctx context.Context, db DBTX, role string) (int64, error) {
	var term int64
	err := leadersElectSQL.QueryRow(ctx, db, pgx.NamedArgs{"role": role}).Scan(&term)
	return term, mapErr("elect "+role, err)
}

// Fenced runs fn in a transaction in which term is role's current term,
// and fails with ErrLeaseLost, writing nothing, if it is not: the writes
// of a leader that was replaced while it stalled do not happen. The term
// row stays locked FOR SHARE until the transaction ends, so a new
// election waits for fn's writes instead of overtaking them.
func (s *Store) Fenced(ctx context.Context, role string, term int64, fn func(tx *Store) error) error {
	return s.InTx(ctx, func(tx *Store) error {
		// Waits for an election in progress, then reads the term it set.
		var current int64
		err := leadersFenceSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"role": role}).Scan(&current)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("fence "+role, err)
		}
		if current != term {
			return fmt.Errorf("%s term %d is over: %w", role, term, ErrLeaseLost)
		}
		return fn(tx)
	})
}
