package store

// The names below are defined in package schedstore; they are named here
// so that this package's code and its callers use them as their own.

import (
	"time"

	"github.com/google/uuid"
	"github.com/kagzi/kagzi/pkg/store/internal/schedstore"
)

type (
	// SchedulesCreateParams describe a schedule.
	SchedulesCreateParams = schedstore.SchedulesCreateParams
	// SchedulesListParams page a listing of schedules.
	SchedulesListParams = schedstore.SchedulesListParams
	// SchedulesFireParams name one fire of a schedule.
	SchedulesFireParams = schedstore.SchedulesFireParams
	// SchedulesFireDueManyResult is what SchedulesFireDueMany did to one
	// schedule.
	SchedulesFireDueManyResult = schedstore.SchedulesFireDueManyResult
	// SchedulesBackfillParams name a backfill.
	SchedulesBackfillParams = schedstore.SchedulesBackfillParams
	// SchedulesBackfillResult is what a backfill did.
	SchedulesBackfillResult = schedstore.SchedulesBackfillResult
)

const (
	// MaxCatchupLimit bounds Schedule.MaxCatchup, so a scheduler coming back
	// from a long outage fires a bounded burst.
	MaxCatchupLimit = schedstore.MaxCatchupLimit
	// DefaultCatchUpWindow is how late a fire time may be fired and still
	// count as due rather than missed (see CatchUp).
	DefaultCatchUpWindow = schedstore.DefaultCatchUpWindow
	// MaxWindowFires bounds how many due times within the catch-up window one
	// schedule fires at once: the most recent ones.
	MaxWindowFires = schedstore.MaxWindowFires
	// MaxJitter bounds a schedule's jitter.
	MaxJitter = schedstore.MaxJitter
	// MaxBackfill bounds how many fire times one backfill may cover.
	MaxBackfill = schedstore.MaxBackfill
)

var (
	// OverlapPolicies lists the policies, in the order of the documentation.
	OverlapPolicies = schedstore.OverlapPolicies
)

// ParseCron checks a cron expression as gronx reads it: 5 fields (minute
// hour day month weekday), 6 (seconds first, or a year last) or 7 (seconds
// and year), or a tag such as @daily.
func ParseCron(expr string) error { return schedstore.ParseCron(expr) }

// NextFireTime returns the first fire time of a cron expression strictly
// after t, read in the IANA zone tz (empty: UTC).
func NextFireTime(cron, tz string, t time.Time) (*time.Time, error) {
	return schedstore.NextFireTime(cron, tz, t)
}

// CatchUp decides what a scheduler does for a template that came due at
// lastDue (its next fire time) when it is now: which times to fire, oldest
// first, and the next fire time after now (nil if the cron has none).
func CatchUp(cron, tz string, lastDue, now time.Time, maxCatchup int, window time.Duration) (fire []time.Time, next *time.Time, err error) {
	return schedstore.CatchUp(cron, tz, lastDue, now, maxCatchup, window)
}

// ParseOverlap checks a policy's name; "" is OverlapAllowAll.
func ParseOverlap(s string) (OverlapPolicy, error) { return schedstore.ParseOverlap(s) }

// JitterDelay is the delay of the run fired for fireAt by schedule id with
// the given jitter: in [0, jitter), the same for the same schedule and
// fire time (a hash of both), so a retried or repeated fire gets the same
// delay, and spread over the range across fire times and schedules.
func JitterDelay(id uuid.UUID, fireAt time.Time, jitter time.Duration) time.Duration {
	return schedstore.JitterDelay(id, fireAt, jitter)
}
