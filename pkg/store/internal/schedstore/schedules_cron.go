package schedstore

import (
	"strings"
	"time"

	// Schedule zones must resolve the same in a minimal container image
	// without /usr/share/zoneinfo as on a developer's machine.
	_ "time/tzdata"

	"github.com/adhocore/gronx"
)

// A schedule's times: its cron expression read in its zone, and what a
// scheduler fires after an outage (CatchUp).

// MaxCatchupLimit bounds Schedule.MaxCatchup, so a scheduler coming back
// from a long outage fires a bounded burst.
const MaxCatchupLimit = 1000

// maxCronLen bounds a cron expression (gronx accepts up to 7 fields).
const maxCronLen = 200

// ParseCron checks a cron expression as gronx reads it: 5 fields (minute
// hour day month weekday), 6 (seconds first, or a year last) or 7 (seconds
// and year), or a tag such as @daily. The error, ErrInvalidArgument, names
// the expression and the problem.
func ParseCron(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return invalidf("cron expression is required")
	}
	if len(expr) > maxCronLen {
		return invalidf("cron expression is %d bytes, at most %d", len(expr), maxCronLen)
	}
	segs, err := gronx.Segments(expr)
	if err != nil {
		return invalidf("cron expression %q: %v", expr, err)
	}
	if gronx.IsValid(expr) {
		return nil
	}
	// IsValid only says no; find the field that is wrong for the message.
	names := []string{"second", "minute", "hour", "day of month", "month", "day of week", "year"}
	c := &gronx.SegmentChecker{}
	c.SetRef(time.Now())
	for pos, seg := range segs {
		if _, err := c.CheckDue(seg, pos); err != nil || seg == "" || strings.Contains(seg, ",,") ||
			strings.HasPrefix(seg, ",") || strings.HasSuffix(seg, ",") || strings.HasSuffix(seg, "/") {
			problem := "malformed"
			if err != nil {
				problem = err.Error()
			}
			return invalidf("cron expression %q: %s field %q: %s", expr, names[pos], seg, problem)
		}
	}
	return invalidf("cron expression %q is malformed", expr)
}

// loadZone resolves a schedule's zone; empty means UTC. "Local" is refused:
// it would mean whatever zone each scheduler replica runs in.
func loadZone(tz string) (*time.Location, string, error) {
	if tz == "" {
		return time.UTC, "UTC", nil
	}
	if tz == "Local" {
		return nil, "", invalidf("timezone %q: name an IANA zone such as Europe/Paris", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, "", invalidf("timezone %q is not a known IANA zone: %v", tz, err)
	}
	return loc, tz, nil
}

// cronNext is the first fire time strictly after t in loc, or nil when the
// expression has none (e.g. a past year, or February 30).
func cronNext(expr string, loc *time.Location, t time.Time) *time.Time {
	n, err := gronx.NextTickAfter(expr, t.In(loc), false)
	if err != nil || !n.After(t) {
		return nil
	}
	n = n.UTC()
	return &n
}

// NextFireTime returns the first fire time of a cron expression strictly
// after t, read in the IANA zone tz (empty: UTC). It is nil when the
// expression has no later time.
func NextFireTime(cron, tz string, t time.Time) (*time.Time, error) {
	if err := ParseCron(cron); err != nil {
		return nil, err
	}
	loc, _, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	return cronNext(cron, loc, t), nil
}

// DefaultCatchUpWindow is how late a fire time may be fired and still
// count as due rather than missed (see CatchUp). It covers what a short
// outage costs — a database failover (typically under two minutes), a
// scheduler restart or a rolling deploy, a retry backoff — so that such an
// outage loses no fire, while a run that fires at most five minutes late is
// still useful for almost any cron job. A longer outage is an incident:
// the schedule's max_catchup decides what it fires.
const DefaultCatchUpWindow = 5 * time.Minute

// MaxWindowFires bounds how many due times within the catch-up window one
// schedule fires at once: the most recent ones. A schedule firing every
// second is back after a four-minute outage with 240 due times; it fires
// its last 100 (and max_catchup more), not all of them.
const MaxWindowFires = 100

// CatchUp decides what a scheduler does for a template that came due at
// lastDue (its next fire time) when it is now: which times to fire, oldest
// first, and the next fire time after now (nil if the cron has none).
//
// The due times are the cron's times in [lastDue, now]. Walking back from
// now, the due times at most window old (window <= 0 means
// DefaultCatchUpWindow) fire, up to MaxWindowFires of them: the scheduler
// was away for less than the window (a failover, a restart), and such an
// outage loses nothing. The due times before those were missed — older
// than the window, or beyond the cap: of them, the most recent maxCatchup
// fire as well and the older ones are skipped. So after 20 missed times an
// hour apart, maxCatchup 3 fires exactly the last 3 of them and maxCatchup
// 0 fires none; either way the schedule then resumes at its first time
// after now. With lastDue after now nothing is due and next is lastDue.
// At most MaxWindowFires + maxCatchup times fire.
func CatchUp(cron, tz string, lastDue, now time.Time, maxCatchup int, window time.Duration) (fire []time.Time, next *time.Time, err error) {
	if err := ParseCron(cron); err != nil {
		return nil, nil, err
	}
	loc, _, err := loadZone(tz)
	if err != nil {
		return nil, nil, err
	}
	if maxCatchup < 0 {
		return nil, nil, invalidf("max catch-up %d is negative", maxCatchup)
	}
	if window <= 0 {
		window = DefaultCatchUpWindow
	}
	if lastDue.After(now) {
		ld := lastDue.UTC()
		return nil, &ld, nil
	}
	// Walk back from now, so the cost is bounded by the window's cap and
	// maxCatchup, not by how long the scheduler was away.
	windowFrom := now.Add(-window)
	var due []time.Time
	inWindow, missed := 0, 0
	t, perr := gronx.PrevTickBefore(cron, now.In(loc), true)
	for perr == nil && !t.After(now) && !t.Before(lastDue) {
		if missed == 0 && inWindow < MaxWindowFires && !t.Before(windowFrom) {
			inWindow++
		} else {
			if missed == maxCatchup {
				break
			}
			missed++
		}
		due = append(due, t.UTC())
		prev := t
		t, perr = gronx.PrevTickBefore(cron, t, false)
		if perr == nil && !t.Before(prev) {
			// gronx found no earlier time (it can return the same one,
			// e.g. for an expression with a year).
			break
		}
	}
	for i, j := 0, len(due)-1; i < j; i, j = i+1, j-1 {
		due[i], due[j] = due[j], due[i]
	}
	return due, cronNext(cron, loc, now), nil
}
