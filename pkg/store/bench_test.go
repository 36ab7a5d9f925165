package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/testdb"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestBenchInsertFinished(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for _, chunk := range []store.BenchFinishedParams{{From: 0, Count: 1000}, {From: 1000, Count: 500}} {
		chunk.Namespace, chunk.Queue, chunk.Type, chunk.Before = "bench", "q", "Noop", before.Add(-time.Duration(chunk.From)*time.Millisecond)
		n, err := s.BenchInsertFinished(ctx, chunk)
		if err != nil || n != chunk.Count {
			t.Fatalf("insert %+v: %d %v", chunk, n, err)
		}
	}
	counts, err := s.RunsCount(ctx, "bench")
	if err != nil || counts[store.StatusCompleted] != 1500 || len(counts) != 1 {
		t.Fatalf("counts %v %v", counts, err)
	}
	if _, err := s.BenchInsertFinished(ctx, store.BenchFinishedParams{Namespace: "bench", Queue: "q", Type: "Noop", Count: 0}); err == nil {
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
	if err := s.BenchAnalyze(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.BenchCheckpoint(ctx); err != nil {
		t.Logf("checkpoint (needs superuser): %v", err)
	}
}

func TestBenchLockedByAndScheduleFires(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 3; i++ {
		r, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	w := uuid.New()
	claimed, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: w,
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 2, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim %v %v", claimed, err)
	}
	by, err := s.BenchLockedBy(ctx, "ns", ids)
	if err != nil || len(by) != 1 || by[w] != 2 {
		t.Fatalf("locked by %v %v", by, err)
	}
	if by, err := s.BenchLockedBy(ctx, "other", ids); err != nil || len(by) != 0 {
		t.Fatalf("other namespace %v %v", by, err)
	}

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
	fires, err := s.BenchScheduleFires(ctx, "ns", at, at.Add(time.Second))
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
	if fires, err := s.BenchScheduleFires(ctx, "ns", at.Add(time.Second), at.Add(2*time.Second)); err != nil || len(fires) != 0 {
		t.Fatalf("fires outside the window %+v %v", fires, err)
	}
}

func TestBenchStatisticsAndActivity(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	tally := store.NewStatementTally()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool, err := store.ConnectTraced(ctx, url+sep+"application_name=bench-test", tally)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool, store.Options{})
	admin := testdb.Store(t) // another database of the server
	name := pool.Config().ConnConfig.Database

	st0, err := admin.BenchDBStats(ctx, name)
	if err != nil || st0.At.IsZero() || st0.Xacts() <= 0 || st0.WALBytes <= 0 {
		t.Fatalf("stats %+v %v", st0, err)
	}
	if d := st0.Sub(st0); d.Xacts() != 0 || d.WALBytes != 0 || !d.At.Equal(st0.At) {
		t.Fatalf("sub %+v", d)
	}
	if _, err := admin.BenchDBStats(ctx, "no_such_database"); err == nil {
		t.Fatal("statistics of a missing database")
	}

	// The tally sees single statements, transactions and batches.
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StepsRecordMany(ctx, []store.StepsRecordParams{
		{Lease: store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}, StepID: "a", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		{Lease: store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}, StepID: "b", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *store.Store) error { return tx.Ping(ctx) }); err != nil {
		t.Fatal(err)
	}
	var steps, total int64
	snap := tally.Snapshot()
	for sql, n := range snap {
		total += n
		if strings.Contains(sql, "INSERT INTO kagzi.step_runs") {
			steps += n
		}
	}
	if steps < 2 || snap["begin"] != 1 || snap["commit"] != 1 || snap["SELECT 1"] != 1 || total < 6 {
		t.Fatalf("tally %v", snap)
	}

	bs, err := admin.BenchActivity(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range bs {
		if b.ApplicationName == "bench-test" {
			found = b.BackendType == "client backend" && b.QueryStart != nil && b.PID > 0
		}
	}
	if !found {
		t.Fatalf("the test's connection is not in the activity: %+v", bs)
	}

	// Not both: the bench uses whichever answers.
	if n, err := s.BenchStatementCalls(ctx); err == nil && n < 0 {
		t.Fatalf("pg_stat_statements calls %d", n)
	}
	held, err := s.BenchAdvisoryLockHeld(ctx, 0x6b61677a69ff)
	if err != nil || held {
		t.Fatalf("lock held %v %v", held, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(0x6b61677a69ff)); err != nil {
		t.Fatal(err)
	}
	if held, err := s.BenchAdvisoryLockHeld(ctx, 0x6b61677a69ff); err != nil || !held {
		t.Fatalf("lock held %v %v", held, err)
	}
}
