package opsstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The statements of maintained attribute counts, written in
// sql/attribute_counts.sql.
var (
	attributeCountsFoldSQL     = stmt("AttributeCountsFold")
	attributeCountDeltasAnySQL = stmt("AttributeCountDeltasAny")
	attributeCountsPruneSQL    = stmt("AttributeCountsPrune")
	// attributeCountsGroupSQL is RunsCountQuery's statement for every run
	// grouped by an attribute.
	attributeCountsGroupSQL = stmt("AttributeCountsGroup")
)

// MaxAttributeCountsFold is the most deltas one AttributeCountsFold takes.
const MaxAttributeCountsFold = 100000

// AttributeCountDeltasAny reports whether any attribute count delta
// waits to be folded: one read, where a fold is a transaction of several
// statements, for a leader that heard of work that may have appended
// none (a start without attributes).
func (s *Ops) AttributeCountDeltasAny(ctx context.Context) (bool, error) {
	var pending bool
	err := attributeCountDeltasAnySQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{}).Scan(&pending)
	return pending, mapErr("read attribute count deltas", err)
}

// AttributeCountsFold folds up to limit (1 to MaxAttributeCountsFold) of
// the attribute count deltas that starts, forks and deletions appended
// into the counts, and drops the counts that fell to zero; it returns how
// many deltas it folded (fewer than limit: none is left that had
// committed). Counts are exact whether or not the deltas are folded;
// folding keeps a grouped count's read short.
func (s *Ops) AttributeCountsFold(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > MaxAttributeCountsFold {
		return 0, invalidf("attribute counts fold of %d deltas: 1 to %d", limit, MaxAttributeCountsFold)
	}
	var n int
	err := s.inTx(ctx, func(tx *Ops) error {
		var nss, names, values []string
		if err := attributeCountsFoldSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"limit": limit}).Scan(&n, &nss, &names, &values); err != nil {
			return mapErr("fold attribute counts", err)
		}
		if len(nss) == 0 {
			return nil
		}
		_, err := attributeCountsPruneSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"namespaces": nss, "names": names, "values": values})
		return mapErr("prune attribute counts", err)
	})
	return n, err
}
