package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
)

// The River comparison (--compare river): the same workload on River, a
// Postgres job queue, in a database of its own on the same server right
// after the Kagzi scenario, with the same CPU accounting, so the ratios a
// user weighing the two would look at come from one command. River is
// tuned for throughput (1,000 workers, 1 ms fetch cooldown) and a job
// counts when its completion is in Postgres: River reports completions to
// subscribers after its completer's batch update committed, and the count
// is checked against river_job at the end.

// River's tuning.
const (
	riverWorkers       = 1000
	riverFetchCooldown = time.Millisecond
)

// RiverResult is River's side of the comparison.
type RiverResult struct {
	Jobs        int     `json:"jobs"`
	DurationSec float64 `json:"duration_sec"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	// StartP50ms and StartP99ms: insert returned → Work called (latency).
	StartP50ms float64      `json:"start_p50_ms,omitempty"`
	StartP99ms float64      `json:"start_p99_ms,omitempty"`
	CPU        *measure.CPU `json:"cpu,omitempty"`
}

type riverNoop struct{}

func (riverNoop) Kind() string { return "kagzi_bench_noop" }

type riverNoopWorker struct {
	river.WorkerDefaults[riverNoop]
	// started records when a job's Work began (latency), by job id.
	mu      sync.Mutex
	started map[int64]time.Time
}

func (w *riverNoopWorker) Work(_ context.Context, j *river.Job[riverNoop]) error {
	if w.started != nil {
		now := time.Now()
		w.mu.Lock()
		w.started[j.ID] = now
		w.mu.Unlock()
	}
	return nil
}

// runRiver runs River's counterpart of the scenario: throughput (jobs
// jobs inserted 1,000 at a time) or latency (jobs at o.Rate per second).
func runRiver(ctx context.Context, o *Options, jobs int, own bool) (_ *RiverResult, err error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	dbName := "kagzi_bench_river_" + hex.EncodeToString(b[:])
	if err := dbadmin.DatabaseCreate(ctx, o.AdminURL, dbName, ""); err != nil {
		return nil, err
	}
	defer func() {
		if derr := dbadmin.DatabaseDrop(context.WithoutCancel(ctx), o.AdminURL, dbName); derr != nil {
			o.Log.Warn("drop river bench database", "err", derr)
		}
	}()
	url, err := dbadmin.DatabaseURL(o.AdminURL, dbName)
	if err != nil {
		return nil, err
	}
	pool, err := store.Connect(ctx, measure.WithApp(url, "river-bench"))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	drv := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(drv, nil)
	if err != nil {
		return nil, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("bench: migrate river: %w", err)
	}
	adminPool, err := store.Connect(ctx, measure.WithApp(o.AdminURL, benchApp))
	if err != nil {
		return nil, err
	}
	defer adminPool.Close()

	w := &riverNoopWorker{}
	if o.Scenario == "latency" {
		w.started = make(map[int64]time.Time, jobs)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	rc, err := river.NewClient(drv, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverWorkers}},
		FetchCooldown: riverFetchCooldown,
		Workers:       workers,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	events, cancelSub := rc.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	if err := rc.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = rc.Stop(sctx)
	}()
	// Everything is up; let River's leader election and queue setup
	// settle before measuring.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return nil, err
	}
	if own {
		if err := measure.StatementStatsReset(ctx, adminPool); err != nil {
			return nil, err
		}
	}
	meter := measure.StartCPU(ctx, adminPool, dbName, own, "", []measure.LabeledPID{{Label: "bench (River client)", PID: os.Getpid()}})
	res := &RiverResult{Jobs: jobs}
	begin := time.Now()
	var inserted []time.Time
	var ids []int64
	if o.Scenario == "latency" {
		inserted, ids = make([]time.Time, jobs), make([]int64, jobs)
		tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer tick.Stop()
		for i := 0; i < jobs; i++ {
			if i > 0 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			r, err := rc.Insert(ctx, riverNoop{}, nil)
			if err != nil {
				return nil, err
			}
			inserted[i], ids[i] = time.Now(), r.Job.ID
		}
	} else {
		for i := 0; i < jobs; i += 1000 {
			ps := make([]river.InsertManyParams, min(1000, jobs-i))
			for j := range ps {
				ps[j] = river.InsertManyParams{Args: riverNoop{}}
			}
			if _, err := rc.InsertMany(ctx, ps); err != nil {
				return nil, err
			}
		}
	}
	if err := riverWait(ctx, pool, events, jobs); err != nil {
		return nil, err
	}
	el := time.Since(begin)
	res.CPU = meter.Finish(ctx, jobs)
	if own {
		res.CPU.AddStatements(ctx, adminPool, dbName, jobs)
	}
	res.DurationSec = measure.Round2(el.Seconds())
	res.JobsPerSec = measure.Round2(float64(jobs) / el.Seconds())
	if w.started != nil {
		w.mu.Lock()
		var lat []float64
		for i, id := range ids {
			if at, ok := w.started[id]; ok {
				lat = append(lat, ms(at.Sub(inserted[i])))
			}
		}
		w.mu.Unlock()
		res.StartP50ms, res.StartP99ms = measure.Round2(pct(lat, 50)), measure.Round2(pct(lat, 99))
	}
	return res, nil
}

// riverWait waits for n completion events, checking river_job every
// second as well (an event lost to a full channel must not hang the
// bench), then until river_job counts them all completed.
func riverWait(ctx context.Context, pool *pgxpool.Pool, events <-chan *river.Event, n int) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	got := 0
	for got < n {
		select {
		case <-events:
			got++
		case <-tick.C:
			c, err := measure.RiverCompleted(ctx, pool)
			if err != nil {
				return err
			}
			if int(c) >= n {
				got = n
			}
		case <-ctx.Done():
			return fmt.Errorf("bench: river: %d of %d jobs completed: %w", got, n, ctx.Err())
		}
	}
	// The clock stops when Postgres has them all.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := measure.RiverCompleted(ctx, pool)
		if err != nil {
			return err
		}
		if int(c) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: river: %d completion events but %d of %d jobs completed in Postgres", got, c, n)
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

// Ratio is one comparison of Kagzi with River and its target.
type Ratio struct {
	Figure string  `json:"figure"`
	Kagzi  float64 `json:"kagzi"`
	River  float64 `json:"river"`
	Ratio  float64 `json:"ratio"`
	// Target is the ratio's bound; Max says it is an upper bound.
	Target float64 `json:"target"`
	Max    bool    `json:"max,omitempty"`
	Met    bool    `json:"met"`
}

func ratio(figure string, k, r, target float64, upper bool) Ratio {
	x := 0.0
	if r > 0 {
		x = k / r
	}
	met := x >= target
	if upper {
		met = x <= target
	}
	return Ratio{Figure: figure, Kagzi: measure.Round2(k), River: measure.Round2(r), Ratio: measure.Round2(x), Target: target, Max: upper, Met: met}
}

// The CPU comparisons' names: the targets scenario leaves them out of its
// verdicts (they explain the throughput ratios; they are not targets of
// their own).
const (
	cpuPostgresFigure = "postgres cpu µs per run (per step) / River's per job"
	cpuServicesFigure = "services cpu µs per run (per step) / River's per job"
)

// compare computes the ratios the targets are set in.
func compare(res *Result) []Ratio {
	rv := res.River
	if rv == nil {
		return nil
	}
	if res.Scenario == "latency" {
		return []Ratio{
			ratio("dispatch p50 / River insert→start p50 (ms)", res.DispatchP50ms, rv.StartP50ms, 1.5, true),
			ratio("dispatch p99 / River insert→start p99 (ms)", res.DispatchP99ms, rv.StartP99ms, 1, true),
		}
	}
	var out []Ratio
	switch {
	case res.Steps == 0:
		out = append(out, ratio("0-step runs/s / River jobs/s", res.RunsPerSec, rv.JobsPerSec, 0.75, false))
	case res.Steps == 1:
		out = append(out, ratio("1-step runs/s / River jobs/s", res.RunsPerSec, rv.JobsPerSec, 0.45, false))
	default:
		out = append(out, ratio(fmt.Sprintf("%d-step steps/s / River jobs/s", res.Steps), res.StepsPerSec, rv.JobsPerSec, 1, false))
	}
	if res.CPU != nil && rv.CPU != nil {
		// Per job of River against per run (1 step) or per step (more).
		per := float64(max(res.Steps, 1))
		out = append(out,
			ratio(cpuPostgresFigure, res.CPU.PostgresUSPerRun/per, rv.CPU.PostgresUSPerRun, 1.5, true),
			ratio(cpuServicesFigure, res.CPU.ServicesUSPerRun/per, rv.CPU.ServicesUSPerRun, 3, true))
	}
	return out
}

// Rows are the comparison's lines of a table.
func comparisonRows(rv *RiverResult, rs []Ratio) [][2]string {
	if rv == nil {
		return nil
	}
	rows := [][2]string{{"river", fmt.Sprintf("%d jobs in %.2f s, %.0f jobs/s", rv.Jobs, rv.DurationSec, rv.JobsPerSec)}}
	if rv.StartP50ms > 0 {
		rows = append(rows, [2]string{"river insert→start p50 / p99", fmt.Sprintf("%.2f / %.2f ms", rv.StartP50ms, rv.StartP99ms)})
	}
	for _, r := range rv.CPU.Rows() {
		rows = append(rows, [2]string{"river " + r[0], r[1]})
	}
	for _, r := range rs {
		op := "≥"
		if r.Max {
			op = "≤"
		}
		rows = append(rows, [2]string{r.Figure, fmt.Sprintf("%.2f / %.2f = %.2f (target %s %.2f: %s)", r.Kagzi, r.River, r.Ratio, op, r.Target, verdict(r.Met))})
	}
	return rows
}

// ComparisonRows are the River comparison's lines of the result's table.
func (r *Result) ComparisonRows() [][2]string { return comparisonRows(r.River, r.Comparison) }
