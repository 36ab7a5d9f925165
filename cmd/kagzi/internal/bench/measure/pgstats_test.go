package measure

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The bench's reads of Postgres, against a real server: unlike the
// helpers of scenarios_test.go they are only right if Postgres answers
// them as the bench expects.

func TestPgStatsStatisticsAndActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// pool checks the named arguments of the reads run in the measured
	// database; app is a connection of another application in it, as a
	// service's would be.
	pool, url := testdb.Pool(t)
	app, err := store.Connect(ctx, WithApp(url, "bench-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	admin, _ := testdb.Pool(t) // another database of the server
	name := pool.Config().ConnConfig.Database

	st0, err := ReadDBStats(ctx, admin, name)
	if err != nil || st0.At.IsZero() || st0.Xacts() <= 0 || st0.WALBytes <= 0 {
		t.Fatalf("stats %+v %v", st0, err)
	}
	if d := st0.Sub(st0); d.Xacts() != 0 || d.WALBytes != 0 || !d.At.Equal(st0.At) {
		t.Fatalf("sub %+v", d)
	}
	if _, err := ReadDBStats(ctx, admin, "no_such_database"); err == nil {
		t.Fatal("statistics of a missing database")
	}

	if _, _, err := store.New(app, store.Options{}).RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	bs, err := Activity(ctx, admin, name)
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
	if n, err := StatementCalls(ctx, pool); err == nil && n < 0 {
		t.Fatalf("pg_stat_statements calls %d", n)
	}
	const key = 0x6b61677a69ff
	held, err := AdvisoryLockHeld(ctx, pool, key)
	if err != nil || held {
		t.Fatalf("lock held %v %v", held, err)
	}
	conn, err := app.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(key)); err != nil {
		t.Fatal(err)
	}
	if held, err := AdvisoryLockHeld(ctx, pool, key); err != nil || !held {
		t.Fatalf("lock held %v %v", held, err)
	}
}

func TestPgStatsRunsLockedBy(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
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
	by, err := RunsLockedBy(ctx, pool, "ns", ids)
	if err != nil || len(by) != 1 || by[w] != 2 {
		t.Fatalf("locked by %v %v", by, err)
	}
	if by, err := RunsLockedBy(ctx, pool, "other", ids); err != nil || len(by) != 0 {
		t.Fatalf("other namespace %v %v", by, err)
	}
}

func TestPgStatsCheckpoint(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	if err := Checkpoint(context.Background(), pool); err != nil {
		t.Logf("checkpoint (needs superuser): %v", err)
	}
}
