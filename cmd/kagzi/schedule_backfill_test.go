package main

import (
	"testing"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestScheduleOverlapAndBackfill(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	var sc ops.ScheduleJSON
	c.okJSON(&sc, "schedule", "create", "Sync", "--cron", "0 * * * *", "--overlap", "buffer-one", "--jitter", "30s")
	if sc.Overlap != "buffer-one" || sc.JitterMS != 30000 {
		t.Fatalf("create --overlap --jitter: %+v", sc)
	}
	id := sc.ScheduleID.String()
	mustContain(t, "schedule show", c.ok("schedule", "show", id), "Overlap:", "buffer-one", "Jitter:", "30s")
	c.fails(cliutil.ExitUsage, "schedule", "create", "X", "--cron", "* * * * *", "--overlap", "sometimes")
	c.fails(cliutil.ExitUsage, "schedule", "create", "X", "--cron", "* * * * *", "--jitter", "-1s")
	var plain ops.ScheduleJSON
	c.okJSON(&plain, "schedule", "create", "Plain", "--cron", "0 * * * *")
	if plain.Overlap != "allow-all" || plain.JitterMS != 0 {
		t.Fatalf("default overlap: %+v", plain)
	}

	// The last three whole hours, all of them: three runs, then none.
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-3 * time.Hour).Format(time.RFC3339)
	var bf ops.BackfillJSON
	c.okJSON(&bf, "schedule", "backfill", id, "--from", from, "--to", to.Format(time.RFC3339), "--overlap", "allow-all")
	if len(bf.FireTimes) != 3 || len(bf.Runs) != 3 || len(bf.Existing) != 0 || !bf.Runs[0].ScheduleFireAt.Equal(to.Add(-3*time.Hour)) {
		t.Fatalf("backfill: %+v", bf)
	}
	out := c.ok("schedule", "backfill", id, "--from", from, "--to", to.Format(time.RFC3339), "--overlap", "allow-all")
	mustContain(t, "repeated backfill", out, "3 fire times, 0 started, 3 had a run")
	// buffer-one (the schedule's) with runs live: one held, the rest dropped.
	c.okJSON(&bf, "schedule", "backfill", id, "--from", to.Add(-6*time.Hour).Format(time.RFC3339), "--to", from)
	if len(bf.Runs) != 0 || bf.Buffered == nil || len(bf.Dropped) != 2 {
		t.Fatalf("backfill under buffer-one: %+v", bf)
	}
	var shown ops.ScheduleJSON
	c.okJSON(&shown, "schedule", "show", id)
	if shown.BufferedFireAt == nil || !shown.BufferedFireAt.Equal(*bf.Buffered) || shown.Status != store.StatusScheduled {
		t.Fatalf("after the backfill: %+v", shown)
	}
	c.fails(cliutil.ExitUsage, "schedule", "backfill", id, "--from", "yesterday", "--to", "0s")
	c.fails(cliutil.ExitUsage, "schedule", "backfill", id, "--from", "1h", "--to", "2h") // empty range
}
