package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// RateLimit allows at most Limit claims of runs with rate key Key per
// Period in a namespace, across every dispatcher and queue. Windows are
// fixed and aligned to the Unix epoch (a window of one second starts on
// each whole second); the claim counts each claim in the window of its
// transaction's start time, under the key's row lock, so an aligned window
// never holds more than Limit claims. Any interval of one Period holds at
// most 2 × Limit (the end of one window and the start of the next).
type RateLimit struct {
	Namespace string
	Key       string
	Limit     int
	Period    time.Duration
	// WindowStart and Claims are the current use: the claims counted in
	// the window starting at WindowStart (none when that window is past).
	WindowStart time.Time
	Claims      int
	UpdatedAt   time.Time
}

// MaxRatePeriod is the longest rate limit period. A day is the coarsest
// quota an external service states; a longer period would hold the runs
// it defers for as long (a run held back is due in the window that has
// room for it, many periods ahead).
const MaxRatePeriod = 24 * time.Hour

// RateLimitsSet sets (or replaces) the rate limit of a key. The period is
// a whole number of milliseconds, 1ms to MaxRatePeriod; the limit at least
// one.
// Changing the period starts counting afresh at the next claim. Runs the
// limit already held back keep the windows they were given.
func (s *Store) RateLimitsSet(ctx context.Context, namespace, key string, limit int, period time.Duration) (RateLimit, error) {
	if err := checkName("namespace", namespace, true); err != nil {
		return RateLimit{}, err
	}
	if key == "" {
		return RateLimit{}, invalidf("rate limit key is required")
	}
	if err := checkFlowKeys("", key); err != nil {
		return RateLimit{}, err
	}
	if limit < 1 || limit > math.MaxInt32 {
		return RateLimit{}, invalidf("rate limit %d must be between 1 and %d", limit, math.MaxInt32)
	}
	if period < time.Millisecond || period%time.Millisecond != 0 {
		return RateLimit{}, invalidf("rate limit period %v must be a whole number of milliseconds, at least 1ms", period)
	}
	if period > MaxRatePeriod {
		return RateLimit{}, invalidf("rate limit period %s is above the maximum %s", durations.Format(period), durations.Format(MaxRatePeriod))
	}
	r := RateLimit{Namespace: namespace, Key: key, Limit: limit, Period: period}
	err := s.db.QueryRow(ctx, `
INSERT INTO kagzi.rate_limits AS rl (namespace_id, rate_key, max_claims, period_ms) VALUES (@namespace, @key, @limit, @period_ms)
ON CONFLICT (namespace_id, rate_key) DO UPDATE SET max_claims = excluded.max_claims, period_ms = excluded.period_ms,
	window_start = CASE WHEN rl.period_ms = excluded.period_ms THEN rl.window_start ELSE 'epoch' END,
	claims = CASE WHEN rl.period_ms = excluded.period_ms THEN rl.claims ELSE 0 END,
	updated_at = now()
RETURNING window_start, claims, updated_at`,
		pgx.NamedArgs{"namespace": namespace, "key": key, "limit": limit, "period_ms": period.Milliseconds()}).
		Scan(&r.WindowStart, &r.Claims, &r.UpdatedAt)
	if err != nil {
		return RateLimit{}, mapErr("set rate limit", err)
	}
	return r, nil
}

// RateLimitsDelete removes the rate limit of a key; an absent one is
// ErrNotFound. Runs with the key are then claimed without a limit (runs it
// held back keep the windows they were given).
func (s *Store) RateLimitsDelete(ctx context.Context, namespace, key string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM kagzi.rate_limits WHERE namespace_id = @namespace AND rate_key = @key`,
		pgx.NamedArgs{"namespace": namespace, "key": key})
	if err != nil {
		return mapErr("delete rate limit", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete rate limit of %q: %w", protocol.Echo(key), ErrNotFound)
	}
	return nil
}

// RateLimitsList lists the namespace's rate limits by key, with the claims
// counted in the current window (0 when the last counted window is over).
func (s *Store) RateLimitsList(ctx context.Context, namespace string) ([]RateLimit, error) {
	rows, err := s.db.Query(ctx, `
SELECT namespace_id, rate_key, max_claims, period_ms,
	kagzi.rate_window(now(), period_ms),
	CASE WHEN window_start = kagzi.rate_window(now(), period_ms) THEN claims ELSE 0 END, updated_at
FROM kagzi.rate_limits WHERE namespace_id = @namespace ORDER BY rate_key`, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list rate limits", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RateLimit, error) {
		var r RateLimit
		var ms int64
		err := row.Scan(&r.Namespace, &r.Key, &r.Limit, &ms, &r.WindowStart, &r.Claims, &r.UpdatedAt)
		r.Period = time.Duration(ms) * time.Millisecond
		return r, err
	})
	if out == nil {
		out = []RateLimit{}
	}
	return out, mapErr("list rate limits", err)
}
