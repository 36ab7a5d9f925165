// Package durations prints and reads durations the one way Kagzi shows
// them to people (the CLI, and the messages of errors it prints): whole
// days as "d", then Go's units without the zero ones, so "7d", "1d12h",
// "1h30m", "1.5s". Parse reads what Format prints, and Go durations.
package durations

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours: Kagzi's days are spans of time, not calendar days.
const Day = 24 * time.Hour

// Longest is the longest duration a time.Duration holds, in whole days
// (about 292 years).
const Longest = (math.MaxInt64 / Day) * Day

// ErrTooLong is wrapped by Parse's error for a duration longer than a
// time.Duration holds.
var ErrTooLong = errors.New("longer than a duration holds")

// Format prints d as days ("7d"), then the rest as Go prints it without
// zero trailing units ("1d12h", "1h30m", "90s", "1.5s", "250ms"). It does
// not round: round d first for a table.
func Format(d time.Duration) string {
	if d < 0 {
		if d == math.MinInt64 {
			return "-" + Format(-(d + 1))
		}
		return "-" + Format(-d)
	}
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if days := d / Day; days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * Day
		if d == 0 {
			return b.String()
		}
	}
	s := d.String()
	// Go prints "1h0m0s" and "5m0s": the zero units after the last
	// non-zero one say nothing.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	b.WriteString(s)
	return b.String()
}

// Parse reads a duration: whole days ("7d"), a Go duration ("12h",
// "1.5s"), or days then a Go duration ("1d12h"), with an optional sign;
// "0" is zero. A duration longer than a time.Duration holds is an error
// wrapping ErrTooLong, not a wrapped-around one.
func Parse(s string) (time.Duration, error) {
	in := s
	s = strings.TrimSpace(s)
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, rest
	} else {
		s = strings.TrimPrefix(s, "+")
	}
	var d time.Duration
	if days, rest, ok := strings.Cut(s, "d"); ok {
		if days == "" || strings.ContainsAny(days, "+-") {
			return 0, fmt.Errorf("duration %q: give days (7d), a duration (12h) or both (1d12h)", in)
		}
		n, err := strconv.ParseUint(days, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("duration %q: give days (7d), a duration (12h) or both (1d12h)", in)
		}
		if err != nil || n > uint64(Longest/Day) {
			return 0, fmt.Errorf("duration %q is %w", in, ErrTooLong)
		}
		d, s = time.Duration(n)*Day, rest
		if s == "" {
			return sign(d, neg), nil
		}
		if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("duration %q: give days (7d), a duration (12h) or both (1d12h)", in)
		}
	}
	more, err := time.ParseDuration(s)
	if err != nil {
		if strings.Contains(err.Error(), "invalid duration") && overflows(s) {
			return 0, fmt.Errorf("duration %q is %w", in, ErrTooLong)
		}
		return 0, fmt.Errorf("duration %q: give days (7d), a duration (12h) or both (1d12h)", in)
	}
	if more > math.MaxInt64-d {
		return 0, fmt.Errorf("duration %q is %w", in, ErrTooLong)
	}
	return sign(d+more, neg), nil
}

func sign(d time.Duration, neg bool) time.Duration {
	if neg {
		return -d
	}
	return d
}

// overflows reports whether s is a well-formed Go duration that
// time.ParseDuration refused only for its size: the same text with every
// number made 1 parses.
func overflows(s string) bool {
	var b strings.Builder
	inNum := false
	for _, r := range s {
		if r >= '0' && r <= '9' || r == '.' {
			if !inNum {
				b.WriteByte('1')
				inNum = true
			}
			continue
		}
		inNum = false
		b.WriteRune(r)
	}
	_, err := time.ParseDuration(b.String())
	return err == nil
}
