package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// BenchmarkRunsPage renders the runs view (HTML, counts included) of a
// namespace holding KAGZI_BENCH_CONSOLE_RUNS finished runs (default
// 5,000,000; each with its payload and a step, as RunsInsertFinished makes
// them) through the console's handler against Postgres. The first view
// starts reading the counts' baseline in the background and does not wait
// for it (first-view-ms); baseline-ms is how long that read took, once per
// namespace and console process; every measured view is a page read plus
// a render:
//
//	KAGZI_TEST_DATABASE_URL=… go test -run '^$' -bench BenchmarkRunsPage -benchtime 200x -timeout 60m ./pkg/console/
func BenchmarkRunsPage(b *testing.B) {
	n := int64(5_000_000)
	if v := os.Getenv("KAGZI_BENCH_CONSOLE_RUNS"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	pool, _ := testdb.Pool(b)
	st := store.New(pool, store.Options{})
	const chunk = 250_000
	before := time.Now()
	for from := int64(0); from < n; from += chunk {
		if _, err := st.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "default", Queue: "default",
			Type: "Order", From: from, Count: min(chunk, n-from), Before: before}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Analyze(ctx); err != nil {
		b.Fatal(err)
	}
	con, err := console.New(console.Options{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	if err := con.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer con.Stop()
	h := con.Handler()
	view := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/runs?ns=default", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("runs page: %d %s", rec.Code, rec.Body)
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	}
	t0 := time.Now()
	view()
	first := time.Since(t0)
	if _, err := con.Counts(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	baseline := time.Since(t0)
	for b.Loop() {
		view()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-view-ms")
	b.ReportMetric(float64(baseline.Microseconds())/1000, "baseline-ms")
}
