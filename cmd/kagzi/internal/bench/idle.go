package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/internal/stmtcount"
)

// IdleTarget is the most statements per second an idle system may cost.
const IdleTarget = 0.5

// IdleResult is the figures of the idle scenario.
type IdleResult struct {
	Scenario    string  `json:"scenario"`
	Workers     int     `json:"workers"`
	Dispatchers int     `json:"dispatchers"`
	DurationSec float64 `json:"duration_sec"`
	// WindowSec is the time between the two statistics snapshots: the
	// duration plus the wait for lazily flushed counters.
	WindowSec float64 `json:"window_sec"`
	// Statements in the window (the bench's own subtracted) and per second.
	Statements       int64   `json:"statements"`
	StatementsPerSec float64 `json:"statements_per_sec"`
	// Source is where Statements come from: pg_stat_statements, or
	// pg_stat_database (transactions: every autocommit statement is one).
	Source string `json:"source"`
	// PgStatStatements says why pg_stat_statements was not used.
	PgStatStatements string `json:"pg_stat_statements,omitempty"`
	// BenchStatements were the bench's own, subtracted.
	BenchStatements int64   `json:"bench_statements"`
	Target          float64 `json:"target"`
	Met             bool    `json:"met"`
	// Observed are the statements seen in pg_stat_activity (sampled
	// every 10 ms: a backend's back-to-back statements may show as one).
	Observed []measure.ObservedStatement `json:"observed"`
	// WorkerTimeoutMS and HeartbeatIntervalMS configure the processes.
	WorkerTimeoutMS     int64 `json:"worker_timeout_ms"`
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
}

// Rows implements Detail.
func (r *IdleResult) Rows() [][2]string {
	rows := [][2]string{
		{"scenario", r.Scenario},
		{"processes", fmt.Sprintf("%d dispatcher, 1 scheduler, 1 reaper, %d workers", r.Dispatchers, r.Workers)},
		{"idle for", fmt.Sprintf("%.0f s (window %.1f s with the wait for flushed statistics)", r.DurationSec, r.WindowSec)},
		{"statements", fmt.Sprintf("%d (source %s; %d of the bench's own subtracted)", r.Statements, r.Source, r.BenchStatements)},
		{"statements/s", fmt.Sprintf("%.3f (target <= %.1f: %s)", r.StatementsPerSec, r.Target, verdict(r.Met))},
		{"worker timeout / heartbeat", fmt.Sprintf("%d / %d ms", r.WorkerTimeoutMS, r.HeartbeatIntervalMS)},
	}
	if r.PgStatStatements != "" {
		rows = append(rows, [2]string{"pg_stat_statements", r.PgStatStatements})
	}
	for _, o := range r.Observed {
		rows = append(rows, [2]string{"  seen " + o.Service, fmt.Sprintf("%d× %s", o.Count, o.Statement)})
	}
	return rows
}

func (e *env) idle(ctx context.Context) (Detail, error) {
	o := e.o
	if err := e.openAdmin(ctx); err != nil {
		return nil, err
	}
	r := &IdleResult{Scenario: "idle", Workers: len(e.x.workers), Dispatchers: o.Dispatchers, DurationSec: o.Duration.Seconds(),
		Target: IdleTarget, Source: "pg_stat_database",
		WorkerTimeoutMS: o.workerTimeout().Milliseconds(), HeartbeatIntervalMS: o.heartbeatInterval().Milliseconds()}
	// pg_stat_statements needs shared_preload_libraries; try it.
	_, pssErr := measure.StatementCalls(ctx, e.pool)
	if pssErr != nil {
		r.PgStatStatements = "unavailable: " + pssErr.Error()
	}
	// Let the start-up's statements reach pg_stat_database first.
	o.Log.Info("idle: settling", "for", statsFlushWait)
	if err := sleepCtx(ctx, statsFlushWait); err != nil {
		return nil, err
	}
	sampler := measure.NewActivitySampler(e.x.admin, e.dbName, benchApp)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sampler.Run(sctx, 10*time.Millisecond)
	}()
	defer func() {
		stopSampling()
		wg.Wait()
	}()

	var calls0 int64
	if pssErr == nil {
		var err error
		if calls0, err = measure.StatementCalls(ctx, e.pool); err != nil {
			return nil, err
		}
	}
	own0 := tallyTotal(e.x.tally)
	s0, err := measure.ReadDBStats(ctx, e.x.admin, e.dbName)
	if err != nil {
		return nil, err
	}
	o.Log.Info("idle: measuring", "for", o.Duration)
	if err := sleepCtx(ctx, o.Duration); err != nil {
		return nil, err
	}
	if pssErr == nil {
		// pg_stat_statements counts at once: no flush wait.
		own := tallyTotal(e.x.tally) - own0
		calls1, err := measure.StatementCalls(ctx, e.pool)
		if err != nil {
			return nil, err
		}
		r.Source, r.WindowSec = "pg_stat_statements", o.Duration.Seconds()
		r.BenchStatements = own + 1 // and the CREATE EXTENSION of this read
		r.Statements = calls1 - calls0 - r.BenchStatements
	} else {
		// Backends flush their counters up to 10 s late: wait, still idle,
		// and count the whole window. Both snapshots are taken in the same
		// steady state, so what is pending at either end evens out.
		if err := sleepCtx(ctx, statsFlushWait); err != nil {
			return nil, err
		}
		own := tallyTotal(e.x.tally) - own0
		s1, err := measure.ReadDBStats(ctx, e.x.admin, e.dbName)
		if err != nil {
			return nil, err
		}
		r.WindowSec = s1.At.Sub(s0.At).Seconds()
		r.BenchStatements = own
		r.Statements = s1.Sub(s0).Xacts() - own
	}
	stopSampling()
	wg.Wait()
	r.StatementsPerSec = float64(r.Statements) / r.WindowSec
	r.Met = r.StatementsPerSec <= r.Target
	r.WindowSec = measure.Round2(r.WindowSec)
	r.Observed = sampler.Observed()
	return r, nil
}

// tallyTotal is the number of statements a tally counted.
func tallyTotal(t *stmtcount.Tally) int64 {
	if t == nil {
		return 0
	}
	var n int64
	for _, c := range t.Snapshot() {
		n += c
	}
	return n
}
