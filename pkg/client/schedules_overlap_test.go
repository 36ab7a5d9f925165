package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
)

func TestScheduleOverlapOptionsAndBackfill(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	sc, err := f.cl.CreateSchedule(ctx, "Sync", nil, client.ScheduleOptions{Cron: "*/10 * * * *",
		Overlap: client.OverlapSkip, Jitter: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.cl.GetSchedule(ctx, sc.ID)
	if err != nil || got.Overlap != client.OverlapSkip || got.Jitter != 2*time.Second {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := f.cl.CreateSchedule(ctx, "Sync", nil, client.ScheduleOptions{Cron: "@daily", Overlap: "never"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("unknown policy: %v", err)
	}
	if _, err := f.cl.CreateSchedule(ctx, "Sync", nil, client.ScheduleOptions{Cron: "@daily", Jitter: client.MaxJitter + 1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("jitter above the bound: %v", err)
	}
	if p, err := client.ParseOverlapPolicy(""); err != nil || p != client.OverlapAllowAll {
		t.Fatalf("default policy: %q %v", p, err)
	}

	to := time.Now().UTC().Truncate(10 * time.Minute)
	from := to.Add(-time.Hour)
	r, err := f.cl.BackfillSchedule(ctx, sc.ID, from, to, client.OverlapAllowAll)
	if err != nil || len(r.Runs) != 6 || len(r.FireTimes) != 6 {
		t.Fatalf("backfill: %+v %v", r, err)
	}
	for i, run := range r.Runs {
		if want := from.Add(time.Duration(i) * 10 * time.Minute); run.ScheduleFireAt == nil || !run.ScheduleFireAt.Equal(want) {
			t.Fatalf("run %d fired for %v, want %v", i, run.ScheduleFireAt, want)
		}
	}
	r, err = f.cl.BackfillSchedule(ctx, sc.ID, from, to, client.OverlapAllowAll)
	if err != nil || len(r.Runs) != 0 || len(r.Existing) != 6 {
		t.Fatalf("repeated backfill: %+v %v", r, err)
	}
	// The schedule's own policy, skip: its runs are live, nothing starts.
	r, err = f.cl.BackfillSchedule(ctx, sc.ID, from.Add(-time.Hour), from, "")
	if err != nil || len(r.Runs) != 0 || len(r.Dropped) != 6 {
		t.Fatalf("backfill under skip: %+v %v", r, err)
	}
	if _, err := f.cl.BackfillSchedule(ctx, sc.ID, to.Add(-time.Duration(client.MaxBackfill+1)*10*time.Minute), to, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("too long a range: %v", err)
	}
}
