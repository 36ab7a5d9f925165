package store_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// The schedule and cursor validation the client relies on, fuzzed without
// a database: what is rejected is ErrInvalidArgument, and what is accepted
// behaves as documented, checked against NextFireTime walking forward
// rather than against the backward walk CatchUp does.

// pgTimeMin and pgTimeEnd bound what a Postgres timestamptz holds; pgx
// silently wraps times outside them into other times.
var (
	pgTimeMin = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	pgTimeEnd = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)
)

var cronSeeds = []string{
	"* * * * *", "*/15 * * * *", "0 9 * * MON-FRI", "0 3 * * *", "@daily", "@hourly", "@yearly", "@5minutes",
	"*/10 * * * * *", "0 0 1 1 * 2099", "0 0 0 1 1 * 2200", "0 0 29 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 1 1 * 1990",
	"0 2 * * *", "30 2 * 3 SUN", "0 0 L * *", "0 0 * * 5L", "0 0 * * 1#2", "0 0 15W * *", "0 12 ? * *",
	"", " ", "* * * *", "* * * * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
	"*/0 * * * *", "1,,2 * * * *", ",1 * * * *", "1, * * * *", "*/ * * * *", "5-1 * * * *", "@never", "@",
	"* * * * *\x00", "\t* * * * *\n", "  0 9 * * MON-FRI  ", "0 9 * * MON-FRI #", strings.Repeat("1,", 100) + "1 * * * *",
}

var zoneSeeds = []string{"", "UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
	"Local", "utc", "Mars/Olympus", "../etc/passwd", "/etc/localtime", "Europe/Paris\x00", "EST5EDT", "Etc/GMT+14"}

// fuzzTime maps an arbitrary number to a whole second between 1901 and
// 2101, around the years schedules live in.
func fuzzTime(sec int64) time.Time {
	return time.Unix(1e9+sec%(100*365*86400), 0).UTC()
}

// isFireTime reports whether n is a fire time of cron in tz: the next one
// after the instant just before it.
func isFireTime(t *testing.T, cron, tz string, n time.Time) bool {
	t.Helper()
	got, err := store.NextFireTime(cron, tz, n.Add(-time.Nanosecond))
	if err != nil {
		t.Fatalf("NextFireTime(%q, %q) failed after succeeding: %v", cron, tz, err)
	}
	return got != nil && got.Equal(n)
}

func FuzzParseCron(f *testing.F) {
	for i, c := range cronSeeds {
		f.Add(c, zoneSeeds[i%len(zoneSeeds)], int64(i)*7919*86400)
	}
	f.Fuzz(func(t *testing.T, cron, tz string, sec int64) {
		at := fuzzTime(sec)
		err := store.ParseCron(cron)
		next, nerr := store.NextFireTime(cron, tz, at)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("ParseCron(%q) = %v, not ErrInvalidArgument", cron, err)
			}
			if !errors.Is(nerr, store.ErrInvalidArgument) || next != nil {
				t.Fatalf("NextFireTime accepted %q, which ParseCron rejects: %v %v", cron, next, nerr)
			}
			return
		}
		if strings.TrimSpace(cron) == "" || len(cron) > 200 || !gronx.IsValid(cron) {
			t.Fatalf("ParseCron accepted %q", cron)
		}
		if nerr != nil {
			if !errors.Is(nerr, store.ErrInvalidArgument) {
				t.Fatalf("NextFireTime(%q, %q) = %v, not ErrInvalidArgument", cron, tz, nerr)
			}
			if _, zerr := time.LoadLocation(tz); tz != "Local" && zerr == nil {
				t.Fatalf("NextFireTime(%q, %q) refused a valid zone: %v", cron, tz, nerr)
			}
			return
		}
		if tz == "Local" {
			t.Fatalf("NextFireTime accepted zone Local")
		}
		if next == nil {
			return
		}
		if !next.After(at) || next.Location() != time.UTC || next.Nanosecond() != 0 {
			t.Fatalf("NextFireTime(%q, %q, %v) = %v: not a later whole UTC second", cron, tz, at, next)
		}
		if !isFireTime(t, cron, tz, *next) {
			t.Fatalf("NextFireTime(%q, %q, %v) = %v, which is not a fire time", cron, tz, at, next)
		}
		// Nothing fires in between: asking from any earlier instant after
		// at gives the same time.
		mid := at.Add(next.Sub(at) / 2)
		if again, _ := store.NextFireTime(cron, tz, mid); again == nil || !again.Equal(*next) {
			t.Fatalf("NextFireTime(%q, %q) from %v = %v, from %v = %v", cron, tz, at, next, mid, again)
		}
	})
}

func FuzzCatchUp(f *testing.F) {
	for i, c := range cronSeeds {
		f.Add(c, zoneSeeds[i%len(zoneSeeds)], int64(i)*86400*31, int64(i*i)*3600, i%5, int64(i%3)*10_000)
	}
	f.Add("*/10 * * * * *", "", int64(0), int64(86400*30), store.MaxCatchupLimit, int64(86400_000))
	f.Add("* * * * *", "UTC", int64(0), int64(-60), 3, int64(0))
	f.Add("0 2 * * *", "Europe/Paris", int64(86400*365*24+86400*86), int64(86400*3), 2, int64(-1))
	f.Add("0 * * * *", "UTC", int64(0), int64(3600*5), -1, int64(0))
	f.Fuzz(func(t *testing.T, cron, tz string, nowSec, back int64, maxCatchup int, graceMS int64) {
		now := fuzzTime(nowSec)
		// A scheduler is away for at most about a year; the walk back is
		// bounded by maxCatchup anyway.
		lastDue := now.Add(-time.Duration(back%(86400*400)) * time.Second)
		grace := time.Duration(graceMS%(86400_000*30)) * time.Millisecond
		fire, next, err := store.CatchUp(cron, tz, lastDue, now, maxCatchup, grace)
		if err != nil {
			_, zerr := time.LoadLocation(tz)
			if !errors.Is(err, store.ErrInvalidArgument) ||
				store.ParseCron(cron) == nil && zerr == nil && tz != "Local" && maxCatchup >= 0 {
				t.Fatalf("CatchUp(%q, %q, max %d) = %v", cron, tz, maxCatchup, err)
			}
			return
		}
		if maxCatchup < 0 {
			t.Fatalf("CatchUp accepted max catch-up %d", maxCatchup)
		}
		if lastDue.After(now) {
			if len(fire) != 0 || next == nil || !next.Equal(lastDue) {
				t.Fatalf("nothing is due before lastDue, got %v next %v", fire, next)
			}
			return
		}
		want, _ := store.NextFireTime(cron, tz, now)
		if (next == nil) != (want == nil) || next != nil && !next.Equal(*want) {
			t.Fatalf("CatchUp next = %v, NextFireTime(now) = %v", next, want)
		}
		if grace <= 0 {
			grace = store.DefaultCatchUpWindow
		}
		windowFrom := now.Add(-grace)
		for i, ft := range fire {
			if ft.Location() != time.UTC || ft.Before(lastDue) || ft.After(now) {
				t.Fatalf("fire time %v outside [%v, %v]", ft, lastDue, now)
			}
			if i > 0 && !ft.After(fire[i-1]) {
				t.Fatalf("fire times not ascending: %v", fire)
			}
			if !isFireTime(t, cron, tz, ft) {
				t.Fatalf("%v is not a fire time of %q in %q", ft, cron, tz)
			}
			// Fired times are consecutive: none skipped in between.
			if i > 0 {
				if n, _ := store.NextFireTime(cron, tz, fire[i-1]); n == nil || !n.Equal(ft) {
					t.Fatalf("fire time %v skipped between %v and %v", n, fire[i-1], ft)
				}
			}
		}
		// From the most recent back: up to MaxWindowFires within the
		// window, then at most maxCatchup missed ones.
		inWindow, missed := 0, 0
		for i := len(fire) - 1; i >= 0; i-- {
			if missed == 0 && inWindow < store.MaxWindowFires && !fire[i].Before(windowFrom) {
				inWindow++
			} else {
				missed++
			}
		}
		if missed > maxCatchup {
			t.Fatalf("fired %d missed (max %d) and %d within the window", missed, maxCatchup, inWindow)
		}
		// The most recent due times are the ones fired: nothing after the
		// last one is due yet, and an empty result means nothing was owed.
		if len(fire) > 0 {
			if n, _ := store.NextFireTime(cron, tz, fire[len(fire)-1]); n != nil && !n.After(now) {
				t.Fatalf("fired %v but not the later due %v", fire, n)
			}
			return
		}
		from := lastDue
		if maxCatchup == 0 && windowFrom.After(from) {
			from = windowFrom
		}
		if n, _ := store.NextFireTime(cron, tz, from.Add(-time.Nanosecond)); n != nil && !n.After(now) {
			t.Fatalf("nothing fired, but %v was due (lastDue %v, now %v, max %d, window %v)", n, lastDue, now, maxCatchup, grace)
		}
	})
}

func FuzzParseCursor(f *testing.F) {
	id := uuid.MustParse("0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e")
	for _, c := range []store.Cursor{
		{CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC), ID: id},
		{CreatedAt: time.Unix(0, 0), ID: uuid.Nil},
		{CreatedAt: time.UnixMicro(math.MaxInt64), ID: id},
		{CreatedAt: time.UnixMicro(math.MinInt64), ID: id},
		{CreatedAt: pgTimeMin, ID: id},
	} {
		f.Add(c.String())
	}
	for _, s := range []string{"", "=", "AAAA", "MTIz", "MTIzLw", "LzAxOTBjNWYyLTdhNGUtN2IxYy05ZDFlLTJmM2E0YjVjNmQ3ZQ",
		"MTIzLzAxOTBjNWYyLTdhNGUtN2IxYy05ZDFlLTJmM2E0YjVjNmQ3ZQ==", "MTIz\nLzAxOTBjNWYyLTdhNGUtN2IxYy05ZDFlLTJmM2E0YjVjNmQ3ZQ",
		"KzEyMy97MDE5MGM1ZjItN2E0ZS03YjFjLTlkMWUtMmYzYTRiNWM2ZDdlfQ", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := store.ParseCursor(tok)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidArgument) || c != (store.Cursor{}) {
				t.Fatalf("ParseCursor(%q) = %v, %v", tok, c, err)
			}
			return
		}
		if c.CreatedAt.Location() != time.UTC || c.CreatedAt.Before(pgTimeMin) || !c.CreatedAt.Before(pgTimeEnd) {
			t.Fatalf("ParseCursor(%q) = %v, a time Postgres cannot compare against", tok, c.CreatedAt)
		}
		s := c.String()
		c2, err := store.ParseCursor(s)
		if err != nil || c2 != c {
			t.Fatalf("cursor %q re-encodes as %q, which parses to %v, %v (want %v)", tok, s, c2, err, c)
		}
		if c2.String() != s {
			t.Fatalf("cursor encoding is not a fixed point: %q, %q", s, c2.String())
		}
	})
}
