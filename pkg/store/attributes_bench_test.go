package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// TestQueryScale measures listings and counts by search attributes over
// many finished runs. It runs only with KAGZI_BENCH_QUERY_RUNS set (the
// number of runs, e.g. 1000000): each run holds 4 of 10 declared
// attributes (customer: 1 of 10,000 keywords; region: 1 of 10; amount:
// int; tier: 1 of 3), as bulk inserts make them.
//
//	KAGZI_BENCH_QUERY_RUNS=1000000 go test -run TestQueryScale -v -timeout 60m ./pkg/store/
func TestQueryScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KAGZI_BENCH_QUERY_RUNS"))
	if n <= 0 {
		t.Skip("KAGZI_BENCH_QUERY_RUNS is not set")
	}
	pool, url := testdb.Pool(t)
	ctx := t.Context()
	// With KAGZI_BENCH_QUERY_EXPLAIN set, each measure's last statement is
	// explained (ANALYZE, BUFFERS) into the log.
	last := &lastQuery{}
	tpool, err := store.ConnectTraced(ctx, url, last)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tpool.Close)
	s := store.New(tpool, store.Options{})
	for _, a := range []struct {
		name string
		kind store.AttributeKind
	}{{"customer", store.AttributeKeyword}, {"region", store.AttributeKeyword}, {"amount", store.AttributeInt},
		{"tier", store.AttributeKeyword}, {"note", store.AttributeText}, {"score", store.AttributeFloat},
		{"vip", store.AttributeBool}, {"due", store.AttributeTime}, {"tags", store.AttributeKeyword}, {"source", store.AttributeKeyword}} {
		if err := s.AttributesDeclare(ctx, "bench", a.name, a.kind); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	const chunk = 100000
	before := time.Now()
	for from := 0; from < n; from += chunk {
		c := min(chunk, n-from)
		if _, err := s.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "bench", Queue: "q", Type: "Noop",
			From: int64(from), Count: int64(c), Before: before.Add(-time.Duration(n-from-c) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		// Their attributes, in one statement per chunk (bulk, as an
		// import would; a start inserts its own with the run).
		if _, err := pool.Exec(ctx, `INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, created_at)
SELECT r.namespace_id, r.run_id, a.name, a.v_text, a.v_int, r.created_at
FROM (SELECT run_id, namespace_id, created_at, row_number() OVER (ORDER BY created_at) + $1 AS i
      FROM kagzi.workflow_runs WHERE namespace_id = 'bench' AND created_at >= $2 AND created_at < $3) r,
LATERAL (VALUES ('customer', (r.i % 10000)::text, NULL::bigint), ('region', 'r' || (r.i % 10)::text, NULL),
	('amount', NULL, r.i % 1000), ('tier', (ARRAY['gold','silver','bronze'])[1 + r.i % 3], NULL)) a(name, v_text, v_int)`,
			from, before.Add(-time.Duration(n-from)*time.Millisecond-time.Millisecond/2), before.Add(-time.Duration(n-from-c)*time.Millisecond-time.Millisecond/2)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seeded %d runs with 4 attributes each in %s", n, time.Since(start).Round(time.Second))
	// The reaper's leader folds the count deltas the inserts appended, a
	// batch at a time.
	start, folds := time.Now(), 0
	for {
		f, err := s.AttributeCountsFold(ctx, 10000)
		if err != nil {
			t.Fatal(err)
		}
		folds++
		if f < 10000 {
			break
		}
	}
	t.Logf("folded the count deltas in %d folds, %s", folds, time.Since(start).Round(time.Millisecond))
	for _, table := range []string{"workflow_runs", "run_attributes", "attribute_counts"} {
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE kagzi.`+table); err != nil {
			t.Fatal(err)
		}
	}
	if total, _, err := s.RunsCountQuery(ctx, "bench", "", ""); err != nil || total != int64(n) {
		t.Fatalf("count all: %d %v", total, err)
	}

	measure := func(what string, reps int, fn func(i int) error) {
		var d []time.Duration
		for i := 0; i < reps; i++ {
			t0 := time.Now()
			if err := fn(i); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			d = append(d, time.Since(t0))
		}
		if os.Getenv("KAGZI_BENCH_QUERY_EXPLAIN") != "" {
			last.explain(t, pool)
		}
		slices.Sort(d)
		t.Logf("%s: %d runs: p50 %s p99 %s max %s", what, n, d[len(d)/2].Round(time.Microsecond),
			d[len(d)*99/100].Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	measure(`list customer = 'X' (50)`, 300, func(int) error {
		runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "bench", Query: "customer = '" + strconv.Itoa(rng.IntN(10000)) + "'"})
		if err == nil && len(runs) == 0 {
			t.Fatal("no run found")
		}
		return err
	})
	measure(`list customer = 'X' AND status = 'COMPLETED' AND amount > 500`, 300, func(int) error {
		_, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "bench", Query: "customer = '" + strconv.Itoa(rng.IntN(10000)) + "' AND status = 'COMPLETED' AND amount > 500"})
		return err
	})
	measure(`list region = 'rX' (a tenth of the runs)`, 100, func(int) error {
		_, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "bench", Query: "region = 'r" + strconv.Itoa(rng.IntN(10)) + "'"})
		return err
	})
	measure(`count customer = 'X'`, 100, func(int) error {
		_, _, err := s.RunsCountQuery(ctx, "bench", "customer = '"+strconv.Itoa(rng.IntN(10000))+"'", "")
		return err
	})
	measure(`count customer = 'X' group by tier`, 100, func(int) error {
		_, _, err := s.RunsCountQuery(ctx, "bench", "customer = '"+strconv.Itoa(rng.IntN(10000))+"'", "tier")
		return err
	})
	measure(`count region = 'rX' group by tier (a tenth)`, 5, func(int) error {
		_, _, err := s.RunsCountQuery(ctx, "bench", "region = 'r"+strconv.Itoa(rng.IntN(10))+"'", "tier")
		return err
	})
	measure(`count all group by region (maintained counts)`, 100, func(int) error {
		_, groups, err := s.RunsCountQuery(ctx, "bench", "", "region")
		if err == nil && len(groups) != 10 {
			t.Fatalf("%d regions", len(groups))
		}
		return err
	})
	measure(`count all group by tier (maintained counts)`, 100, func(int) error {
		_, _, err := s.RunsCountQuery(ctx, "bench", "", "tier")
		return err
	})
	measure(`count all group by customer (maintained counts, 10,000 values: over the limit)`, 20, func(int) error {
		if _, _, err := s.RunsCountQuery(ctx, "bench", "", "customer"); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("count by customer: %v", err)
		}
		return nil
	})
}

// lastQuery remembers the last statement its pool ran, to explain it.
type lastQuery struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (q *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "SELECT") && !strings.Contains(d.SQL, "set_config") { // not the query's timeout
		q.mu.Lock()
		q.sql, q.args = d.SQL, d.Args
		q.mu.Unlock()
	}
	return ctx
}

func (q *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (q *lastQuery) explain(t *testing.T, pool *pgxpool.Pool) {
	q.mu.Lock()
	sql, args := q.sql, q.args
	q.mu.Unlock()
	rows, err := pool.Query(t.Context(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		t.Logf("explain %s: %v", sql, err)
		return
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("explain %s: %v", sql, err)
		return
	}
	t.Logf("%s\n%s", sql, strings.Join(plan, "\n"))
}
