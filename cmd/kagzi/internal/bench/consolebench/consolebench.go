// Package consolebench is kagzi bench's console scenario: a namespace of
// many finished runs, then the web console, served over a real socket by
// the bench process, timed on the runs page and the JSON API's first page.
package consolebench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
)

// Defaults of the console scenario.
const (
	DefaultRuns     = 5_000_000
	DefaultRequests = 200
	// TargetMS is the first page's budget: runs view and API alike.
	TargetMS = 100.0
)

// Result is the figures of the console scenario: the web console,
// served over a real socket by this process, in front of a namespace of
// FinishedRuns finished runs.
type Result struct {
	Scenario     string  `json:"scenario"`
	FinishedRuns int     `json:"finished_runs"`
	LoadSec      float64 `json:"load_sec"`
	Requests     int     `json:"requests"`
	// FirstViewMS is the runs page's first render in a fresh console (its
	// counts' baseline is read in the background, BaselineMS long).
	FirstViewMS float64 `json:"first_view_ms"`
	BaselineMS  float64 `json:"baseline_ms"`
	// Page* is the runs page (HTML, first page, counts included); API* is
	// GET /api/v1/runs (JSON, first page): Requests each, one at a time.
	PageP50MS float64 `json:"page_p50_ms"`
	PageP99MS float64 `json:"page_p99_ms"`
	APIP50MS  float64 `json:"api_p50_ms"`
	APIP99MS  float64 `json:"api_p99_ms"`
	TargetMS  float64 `json:"target_ms"`
	// Met: the first view and both p99s are under TargetMS.
	Met bool `json:"met"`
}

// Rows implements the bench's Detail.
func (r *Result) Rows() [][2]string {
	f := func(v float64) string { return fmt.Sprintf("%.2f ms", v) }
	return [][2]string{
		{"finished runs", fmt.Sprint(r.FinishedRuns)},
		{"load", fmt.Sprintf("%.1f s", r.LoadSec)},
		{"requests", fmt.Sprint(r.Requests)},
		{"first view", f(r.FirstViewMS)},
		{"counts baseline (background)", f(r.BaselineMS)},
		{"runs page p50 / p99", f(r.PageP50MS) + " / " + f(r.PageP99MS)},
		{"API first page p50 / p99", f(r.APIP50MS) + " / " + f(r.APIP99MS)},
		{"target", f(r.TargetMS)},
		{"met", fmt.Sprint(r.Met)},
	}
}

// historyChunk is the most finished runs one INSERT makes.
const historyChunk = 1_000_000

// Deps is what the bench gives the scenario: its store, pool and NATS
// connection on the bench database, and its log.
type Deps struct {
	Store *store.Store
	Pool  *pgxpool.Pool
	NATS  *nats.Conn
	Log   *slog.Logger
}

// Options are the scenario's settings: Runs finished runs, Repeat
// requests of each page.
type Options struct {
	Runs, Repeat int
}

// Run fills the namespace "bench" with o.Runs finished runs (each with
// payloads and a step, by generate_series inserts), then starts a console
// on the bench's store and NATS connection behind a real HTTP listener and
// times the runs page and the JSON API's first page, o.Repeat times each.
func Run(ctx context.Context, d Deps, o Options) (*Result, error) {
	log := d.Log
	res := &Result{Scenario: "console", FinishedRuns: o.Runs, Requests: o.Repeat, TargetMS: TargetMS}
	t0 := time.Now()
	before := time.Now().Add(-24 * time.Hour)
	for loaded := int64(0); loaded < int64(o.Runs); {
		n := min(int64(o.Runs)-loaded, historyChunk)
		log.Info("console: inserting finished runs", "from", loaded, "count", n)
		got, err := d.Store.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "bench", Queue: "bench", Type: "Order",
			From: loaded, Count: n, Before: before.Add(-time.Duration(loaded) * time.Millisecond)})
		if err != nil {
			return nil, err
		}
		loaded += got
	}
	if err := d.Store.Analyze(ctx); err != nil {
		return nil, err
	}
	res.LoadSec = measure.Round2(time.Since(t0).Seconds())

	con, err := console.New(console.Options{Pool: d.Pool, NATS: d.NATS, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	if err := con.Start(ctx); err != nil {
		return nil, err
	}
	defer con.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("bench: console %s: %s", path, resp.Status)
		}
		return time.Since(start), nil
	}
	t1 := time.Now()
	first, err := get("/runs?ns=bench")
	if err != nil {
		return nil, err
	}
	res.FirstViewMS = measure.Round2(ms(first))
	if _, err := con.Counts(ctx, "bench"); err != nil {
		return nil, err
	}
	res.BaselineMS = measure.Round2(ms(time.Since(t1)))
	series := func(path string) (p50, p99 float64, err error) {
		ds := make([]float64, 0, o.Repeat)
		for range o.Repeat {
			d, err := get(path)
			if err != nil {
				return 0, 0, err
			}
			ds = append(ds, ms(d))
		}
		sort.Float64s(ds)
		return measure.Round2(measure.Pct(ds, 50)), measure.Round2(measure.Pct(ds, 99)), nil
	}
	if res.PageP50MS, res.PageP99MS, err = series("/runs?ns=bench"); err != nil {
		return nil, err
	}
	if res.APIP50MS, res.APIP99MS, err = series("/api/v1/runs?ns=bench"); err != nil {
		return nil, err
	}
	res.Met = res.FirstViewMS < TargetMS && res.PageP99MS < TargetMS && res.APIP99MS < TargetMS
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
