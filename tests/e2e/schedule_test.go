package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/tests/testdb"
)

// A database outage across fire times, longer than a few retries but
// shorter than the catch-up window: when the database is back, every fire
// time of the outage fires, once, within seconds; none is lost.
func TestScheduleFiresWhatADatabaseOutageDelayed(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1})
	ctx := context.Background()
	sc, err := e.cl.CreateSchedule(ctx, "Tick", nil, client.ScheduleOptions{Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	// fireTimes reads the schedule's history; the test's own read may fail
	// just after the outage (through a pooler, logins are refused for
	// server_login_retry after a failed one), which is not the engine's
	// failure: it reads again.
	readFireTimes := func() ([]time.Time, error) {
		runs, err := e.cl.ScheduleHistory(ctx, sc.ID, 1000)
		if err != nil {
			return nil, err
		}
		out := make([]time.Time, len(runs))
		for i, r := range runs {
			out[len(runs)-1-i] = *r.ScheduleFireAt
		}
		return out, nil
	}
	fireTimes := func() []time.Time {
		t.Helper()
		out, err := readFireTimes()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitUntil(t, 20*time.Second, "the schedule fires", func() bool { return len(fireTimes()) >= 2 })

	// The outage outlasts the old 10 s on-time grace and several retries.
	const outage = 12 * time.Second
	restore := testdb.Outage(t, e.url)
	down := time.Now()
	<-time.After(outage) // the outage itself
	restore()
	up := time.Now()

	// The last fire time before the database came back.
	last := up.Truncate(time.Second)
	var got []time.Time
	caughtUp := waitUntil(t, 30*time.Second, "the fire times of the outage", func() bool {
		var err error
		if got, err = readFireTimes(); err != nil {
			t.Logf("reading the history after the outage: %v", err)
			return false
		}
		return len(got) > 0 && !got[len(got)-1].Before(last)
	})
	t.Logf("database down %v; the %v of fire times it delayed fired %v after it came back",
		up.Sub(down).Round(time.Millisecond), outage, caughtUp.Sub(up).Round(time.Millisecond))
	for i := 1; i < len(got); i++ {
		if d := got[i].Sub(got[i-1]); d != time.Second {
			t.Fatalf("fire times %v and %v are %v apart: lost or duplicated across the outage", got[i-1], got[i], d)
		}
	}
	if !got[0].Before(down) {
		t.Fatalf("first fire %v is not before the outage at %v", got[0], down)
	}
	// The scheduler retries at most 5 s apart; the relay's return makes it
	// read its backlog at once.
	if d := caughtUp.Sub(up); d > 10*time.Second {
		t.Fatalf("the delayed fire times fired %v after the database came back, want within 10 s", d)
	}
}
