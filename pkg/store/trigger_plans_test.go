package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The triggers' statements on workflow_runs stay planned for the table as
// it is: a session that first ended runs while the table was nearly empty
// (a fresh database) and ends 300 runs once it holds 20,000 does not scan
// the table. A plan PL/pgSQL kept from the first call scanned all of it
// for the live-children probe (850 ms for 300 runs among 40,000).
func TestTriggersPlannedForTheTableAsItIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := oneSession(t)
	end := func(n int) {
		t.Helper()
		ps := make([]store.RunsCreateParams, n)
		for i := range ps {
			ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
		}
		if _, err := s.RunsCreateMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		_, items := claimToComplete(t, s, n)
		if _, err := s.RunsCompleteBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		end(20)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, input, finished_at)
		SELECT gen_random_uuid(), 'ns', 'q', 'T', 'COMPLETED', '1', now() FROM generate_series(1, 20000)`); err != nil {
		t.Fatal(err)
	}
	before := seqRead(t, pool)
	end(300)
	if read := seqRead(t, pool) - before; read >= 20000 {
		t.Fatalf("ending 300 runs read %d rows of workflow_runs sequentially: a plan made for the empty table", read)
	}
}

// oneSession is a store on a pool of one connection: the session whose
// kept plans are in question.
func oneSession(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	url := testdb.New(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool, err := store.Connect(context.Background(), url+sep+"pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool, store.Options{}), pool
}

// seqRead is how many rows sequential scans of workflow_runs have read.
func seqRead(t *testing.T, pool *pgxpool.Pool) int64 {
	return statCount(t, pool, "SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE schemaname = 'kagzi' AND relname = 'workflow_runs'")
}

// statCount reads one count of the statistics views, with this session's
// counts flushed first.
func statCount(t *testing.T, pool *pgxpool.Pool, query string) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := pool.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The notify_runs trigger's joins of new_rows and old_rows are planned once
// per session and the plan kept (they are plain statements, not EXECUTE):
// planned at a completion of one run, the plan kept must still be linear
// when a later statement ends 200. A nested loop over the two transition
// tables is quadratic (17 ms for a report ending 200 runs). The plans are
// read with auto_explain, sent to this session as notices.
func TestTriggerJoinsKeepLinearPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	var mu sync.Mutex
	var plans []string
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "old_rows") {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "LOAD 'auto_explain'"); err != nil {
		t.Skipf("auto_explain cannot be loaded here: %v", err)
	}
	for _, set := range []string{"SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET client_min_messages = log"} {
		if _, err := pool.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	s := store.New(pool, store.Options{})
	ps := make([]store.RunsCreateParams, 206)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
	}
	if _, err := s.RunsCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	_, items := claimToComplete(t, s, len(ps))
	for _, it := range items[:6] {
		if _, err := s.RunsCompleteBatch(ctx, []store.RunsCompleteItem{it}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RunsCompleteBatch(ctx, items[6:]); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	done := 0
	for _, p := range plans {
		if strings.Contains(p, "Nested Loop") {
			t.Fatalf("a trigger join of the transition tables ran as a nested loop:\n%s", p)
		}
		if strings.Contains(p, "json_agg") {
			done++
		}
	}
	if done != 7 {
		t.Fatalf("saw %d plans of the done notification's join, want 7 (one per completion)", done)
	}
}
