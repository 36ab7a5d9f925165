package opsstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
)

// Retention of the ways in (migration 035): published events with their
// trigger firings and webhook deliveries, and wait tokens, are deleted by
// the reaper's retention sweep once they are older than one period, the
// reaper's KAGZI_EVENT_RETENTION. Unlike runs' periods it is one value
// for every namespace: these rows are the record of what came in, not
// history someone browses per workflow type.

// Bounds of the ways in's retention period.
const (
	// DefaultKeepEvents keeps published events, their firings and webhook
	// deliveries, and used or expired wait tokens, for 30 days.
	DefaultKeepEvents = 30 * 24 * time.Hour
	// MinKeepEvents is the shortest period short of 0 (keep for ever).
	// A webhook delivery row is what refuses a replay of its delivery id:
	// a Stripe or generic delivery is accepted while its signed timestamp
	// is within the source's tolerance (at most an hour) of now, either
	// way, so up to two hours after it was received; the row must
	// outlive that. A GitHub delivery signs no timestamp: its replay is
	// refused for as long as the row exists, whatever the period.
	MinKeepEvents = 2 * time.Hour
)

// CheckKeepEvents checks the ways in's retention period: 0 (keep for ever)
// or MinKeepEvents to MaxKeep.
func CheckKeepEvents(d time.Duration) error {
	if d == 0 || (d >= MinKeepEvents && d <= MaxKeep) {
		return nil
	}
	return invalidf("event retention %s: 0 (keep for ever) or %s to %s", durations.Format(d), durations.Format(MinKeepEvents),
		durations.Format(MaxKeep))
}

// Statements of the ways in's retention, in sql/retention.sql.
var (
	publishedEventsDeleteExpiredSQL = stmt("PublishedEventsDeleteExpired")
	waitTokensDeleteExpiredSQL      = stmt("WaitTokensDeleteExpired")
)

// PublishedEventsDeleteExpired deletes up to limit published events
// (default DefaultDeleteBatch, at most MaxDeleteBatch) that were
// published before before and are fanned out or given up, oldest first,
// each with its trigger firings and webhook deliveries, in one statement.
// An event not fanned out yet is never deleted; one another transaction
// holds (its fan-out) is skipped. It returns how many it deleted.
func (s *Ops) PublishedEventsDeleteExpired(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteWaysIn(ctx, publishedEventsDeleteExpiredSQL, "delete expired events", before, limit)
}

// WaitTokensDeleteExpired deletes up to limit wait tokens (as
// PublishedEventsDeleteExpired) used or expired before before. A deleted
// token that is presented again is refused as ErrWaitTokenForged (no such
// token), not as used or expired: refused all the same.
func (s *Ops) WaitTokensDeleteExpired(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteWaysIn(ctx, waitTokensDeleteExpiredSQL, "delete expired wait tokens", before, limit)
}

func (s *Ops) deleteWaysIn(ctx context.Context, q *namedSQL, what string, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		limit = DefaultDeleteBatch
	}
	if limit > MaxDeleteBatch {
		return 0, invalidf("delete batch %d: at most %d", limit, MaxDeleteBatch)
	}
	if err := checkTime("retention time", &before); err != nil {
		return 0, err
	}
	var n int64
	err := q.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"before": before, "limit": limit}).Scan(&n)
	return n, mapErr(what, err)
}
