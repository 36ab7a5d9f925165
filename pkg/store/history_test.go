package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

func TestHistoryInsertFinished(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for _, chunk := range []store.RunsInsertFinishedParams{{From: 0, Count: 1000}, {From: 1000, Count: 500}} {
		chunk.Namespace, chunk.Queue, chunk.Type, chunk.Before = "bench", "q", "Noop", before.Add(-time.Duration(chunk.From)*time.Millisecond)
		n, err := s.RunsInsertFinished(ctx, chunk)
		if err != nil || n != chunk.Count {
			t.Fatalf("insert %+v: %d %v", chunk, n, err)
		}
	}
	counts, err := s.RunsCount(ctx, "bench")
	if err != nil || counts[store.StatusCompleted] != 1500 || len(counts) != 1 {
		t.Fatalf("counts %v %v", counts, err)
	}
	if _, err := s.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "bench", Queue: "q", Type: "Noop", Count: 0}); err == nil {
		t.Fatal("an empty history was accepted")
	}
	// The rows look like real finished runs: v7 ids of their creation
	// time, a payload and a step each.
	runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "bench", Limit: 3})
	if err != nil || len(runs) != 3 {
		t.Fatalf("list %v %v", runs, err)
	}
	for _, r := range runs {
		if r.ID.Version() != 7 || r.Status != store.StatusCompleted || r.FinishedAt == nil {
			t.Fatalf("run %+v", r)
		}
		if ts := time.Unix(r.ID.Time().UnixTime()); ts.Sub(r.CreatedAt).Abs() > time.Millisecond {
			t.Fatalf("id time %v, created %v", ts, r.CreatedAt)
		}
		got, err := s.RunsGet(ctx, "bench", r.ID)
		if err != nil || string(got.Output) != "1" {
			t.Fatalf("get %+v %v", got, err)
		}
		steps, err := s.StepsList(ctx, "bench", r.ID)
		if err != nil || len(steps) != 1 || steps[0].Status != store.StepCompleted {
			t.Fatalf("steps %+v %v", steps, err)
		}
	}
	if !runs[0].CreatedAt.Equal(before) {
		t.Fatalf("newest run created %v, want %v", runs[0].CreatedAt, before)
	}
	if err := s.Analyze(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestHistorySchedulesFires(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	at := *sc.NextFireAt
	next := at.Add(time.Hour)
	if _, fired, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: at,
		Next: &next}); err != nil || !fired {
		t.Fatalf("fire %v %v", fired, err)
	}
	fires, err := s.SchedulesFires(ctx, "ns", at, at.Add(time.Second))
	if err != nil || len(fires) != 1 {
		t.Fatalf("fires %+v %v", fires, err)
	}
	run, err := s.RunsGet(ctx, "ns", fires[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	late := float64(run.CreatedAt.Sub(at)) / float64(time.Millisecond)
	if f := fires[0]; f.ScheduleID != sc.ID || !f.FireAt.Equal(at) || f.LateMS-late > 0.01 || late-f.LateMS > 0.01 {
		t.Fatalf("fire %+v, want late %v ms", f, late)
	}
	if fires, err := s.SchedulesFires(ctx, "ns", at.Add(time.Second), at.Add(2*time.Second)); err != nil || len(fires) != 0 {
		t.Fatalf("fires outside the window %+v %v", fires, err)
	}
}
