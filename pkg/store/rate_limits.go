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
	// Released is, from RateLimitsSet, how many runs the limit had held in
	// the windows ahead that were set due again at the time they were due
	// before, for the new limit to spread.
	Released int
}

// MaxRatePeriod is the longest rate limit period. A day is the coarsest
// quota an external service states; a longer period would hold the runs
// it defers for as long (a run held back is due in the window that has
// room for it, many periods ahead).
const MaxRatePeriod = 24 * time.Hour

// rateLimitsSetSQL is the statement of RateLimitsSet.
var rateLimitsSetSQL = stmt("RateLimitsSet")

// RateLimitsSet sets (or replaces) the rate limit of a key. The period is
// a whole number of milliseconds, 1ms to MaxRatePeriod; the limit at least
// one.
// Changing the period starts counting afresh at the next claim. Runs the
// old limit held in the windows ahead are due again at the time they were
// due before it held them (Released counts them), so the new limit spreads
// them over its own windows: a limit set too low, then raised, does not
// leave them due years ahead.
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
	b := &pgx.Batch{}
	rateLimitsSetSQL.Queue(b, pgx.NamedArgs{"namespace": namespace, "key": key, "limit": limit, "period_ms": period.Milliseconds()})
	runsRateRespreadSQL.Queue(b, pgx.NamedArgs{"namespace": namespace, "key": key})
	br := s.h.DB.SendBatch(ctx, b)
	err := br.QueryRow().Scan(&r.WindowStart, &r.Claims, &r.UpdatedAt)
	if err == nil {
		r.Released, err = respread(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return RateLimit{}, mapErr("set rate limit", err)
	}
	return r, nil
}

// runsRateRespreadSQL sets due again the runs a key's limit held, at the
// time they were due before (see RateLimitsSet, RateLimitsDelete).
var runsRateRespreadSQL = stmt("RunsRateRespread")

// respread reads the result of runsRateRespreadSQL, the batch's next.
// The batch is one implicit transaction, so the limit's change and its
// runs' release commit together; the release, a statement of its own,
// reads after the change's lock on the limit's row, so it also sees the
// runs a claim held under the old limit while the change waited.
func respread(br pgx.BatchResults) (int, error) {
	tag, err := br.Exec()
	return int(tag.RowsAffected()), err
}

// rateLimitsDeleteSQL is the statement of RateLimitsDelete.
var rateLimitsDeleteSQL = stmt("RateLimitsDelete")

// RateLimitsDelete removes the rate limit of a key; an absent one is
// ErrNotFound. Runs with the key are then claimed without a limit, and
// those it held in the windows ahead are due again at the time they were
// due before: released counts them.
func (s *Store) RateLimitsDelete(ctx context.Context, namespace, key string) (released int, err error) {
	args := pgx.NamedArgs{"namespace": namespace, "key": key}
	b := &pgx.Batch{}
	rateLimitsDeleteSQL.Queue(b, args)
	runsRateRespreadSQL.Queue(b, args)
	br := s.h.DB.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil {
		released, err = respread(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, mapErr("delete rate limit", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, fmt.Errorf("delete rate limit of %q: %w", protocol.Echo(key), ErrNotFound)
	}
	return released, nil
}

// rateLimitsListSQL is the statement of RateLimitsList.
var rateLimitsListSQL = stmt("RateLimitsList")

// RateLimitsList lists the namespace's rate limits by key, with the claims
// counted in the current window (0 when the last counted window is over).
func (s *Store) RateLimitsList(ctx context.Context, namespace string) ([]RateLimit, error) {
	rows, err := rateLimitsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
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
