package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/nats-io/nats.go"
	"github.com/sethvargo/go-envconfig"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/dispatcher"
)

// What one run costs Postgres in the throughput scenario: transactions,
// rows and WAL from pg_stat_database and pg_stat_wal (every process), and
// with --count-statements every statement of the client and the
// dispatcher, counted by a pgx tracer in this process (the dispatcher then
// runs here rather than as its own process).

// Cost is what the runs of a throughput scenario cost Postgres.
type Cost struct {
	// Source of the transaction and row figures.
	Source string `json:"source"`
	// XactsPerRun: transactions (every autocommit statement is one; a
	// report batch is one however many statements it holds) per run, all
	// processes.
	XactsPerRun       float64 `json:"xacts_per_run"`
	TupInsertedPerRun float64 `json:"tup_inserted_per_run"`
	TupUpdatedPerRun  float64 `json:"tup_updated_per_run"`
	WALBytesPerRun    float64 `json:"wal_bytes_per_run"`
	// StatementsPerRun counts the client's and the dispatcher's
	// statements per run (--count-statements), begin and commit included.
	StatementsPerRun float64 `json:"statements_per_run,omitempty"`
	// Statements splits them.
	Statements []StatementCost `json:"statements,omitempty"`
}

// StatementCost is one kind of statement and its count.
type StatementCost struct {
	Statement string  `json:"statement"`
	Count     int64   `json:"count"`
	PerRun    float64 `json:"per_run"`
}

// Rows are the cost's lines of the throughput table.
func (c *Cost) Rows() [][2]string {
	if c == nil {
		return nil
	}
	rows := [][2]string{
		{"postgres per run", fmt.Sprintf("%.3f transactions, %.2f rows inserted, %.2f rows updated, %.0f WAL bytes (%s)",
			c.XactsPerRun, c.TupInsertedPerRun, c.TupUpdatedPerRun, c.WALBytesPerRun, c.Source)},
	}
	if c.StatementsPerRun > 0 {
		rows = append(rows, [2]string{"statements per run", fmt.Sprintf("%.3f (client and dispatcher, begin/commit included)", c.StatementsPerRun)})
		for _, s := range c.Statements {
			rows = append(rows, [2]string{"  " + s.Statement, fmt.Sprintf("%.3f per run (%d)", s.PerRun, s.Count)})
		}
	}
	return rows
}

// withCost runs a throughput scenario and adds what its runs cost.
func (e *env) withCost(ctx context.Context, f func(context.Context) (*Result, error)) (*Result, error) {
	if err := e.openAdmin(ctx); err != nil {
		return nil, err
	}
	s0, err := measure.ReadDBStats(ctx, e.x.admin, e.dbName)
	if err != nil {
		return nil, err
	}
	if e.o.OwnPostgres {
		if err := measure.StatementStatsReset(ctx, e.x.admin); err != nil {
			return nil, err
		}
	}
	meter := measure.StartCPU(ctx, e.x.admin, e.dbName, e.o.OwnPostgres, e.natsMonitor, e.cpuProcs())
	t0 := e.x.tally.Snapshot()
	res, err := f(ctx)
	if err != nil || res.Runs == 0 {
		return res, err
	}
	t1 := e.x.tally.Snapshot()
	// Sleepers are runs too: the figures per run count them.
	runs := res.Runs
	if res.Sleepers != nil {
		runs += res.Sleepers.Runs
	}
	res.CPU = meter.Finish(ctx, runs)
	if e.o.OwnPostgres {
		res.CPU.AddStatements(ctx, e.x.admin, e.dbName, runs)
	}
	// Idle backends report their counters up to 10 s late.
	e.o.Log.Info("waiting for Postgres statistics", "for", statsFlushWait)
	if err := sleepCtx(ctx, statsFlushWait); err != nil {
		return nil, err
	}
	s1, err := measure.ReadDBStats(ctx, e.x.admin, e.dbName)
	if err != nil {
		return nil, err
	}
	res.Cost = costOf(s1.Sub(s0), tallyDiff(t1, t0), runs, e.o.CountStatements)
	return res, nil
}

// tallyDiff is a minus b, by statement name.
func tallyDiff(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for sql, n := range a {
		if d := n - b[sql]; d > 0 {
			out[measure.StatementName(sql)] += d
		}
	}
	return out
}

// costOf divides the deltas by the runs.
func costOf(d measure.DBStats, stmts map[string]int64, runs int, counted bool) *Cost {
	n := float64(runs)
	c := &Cost{Source: "pg_stat_database, pg_stat_wal",
		XactsPerRun: measure.Round3(float64(d.Xacts()) / n), TupInsertedPerRun: measure.Round3(float64(d.TupInserted) / n),
		TupUpdatedPerRun: measure.Round3(float64(d.TupUpdated) / n), WALBytesPerRun: measure.Round2(float64(d.WALBytes) / n)}
	if !counted {
		return c
	}
	var total int64
	for name, k := range stmts {
		total += k
		c.Statements = append(c.Statements, StatementCost{Statement: name, Count: k, PerRun: measure.Round3(float64(k) / n)})
	}
	sort.Slice(c.Statements, func(i, j int) bool {
		if c.Statements[i].Count != c.Statements[j].Count {
			return c.Statements[i].Count > c.Statements[j].Count
		}
		return c.Statements[i].Statement < c.Statements[j].Statement
	})
	c.StatementsPerRun = measure.Round3(float64(total) / n)
	return c
}

// startDispatcherHere runs a dispatcher in this process, configured like
// the process would be, over a pool whose statements e.x.tally counts.
func (e *env) startDispatcherHere(ctx context.Context) error {
	vars := map[string]string{"KAGZI_DATABASE_URL": measure.WithApp(e.dbURL, "kagzi-dispatcher"),
		"KAGZI_DATABASE_SESSION_URL": measure.WithApp(e.sessionURL, "kagzi-dispatcher"), "KAGZI_NATS_URL": e.natsURL,
		"KAGZI_HTTP_ADDR": "", "KAGZI_LOG_LEVEL": "warn"}
	for _, kv := range e.x.common {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, set := vars[k]; !set {
				vars[k] = v
			}
		}
	}
	var cfg dispatcher.Config
	if err := config.LoadFrom(ctx, &cfg, envconfig.MapLookuper(vars)); err != nil {
		return err
	}
	pool, err := store.ConnectTraced(ctx, cfg.DatabaseURL, e.x.tally)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(e.natsURL, nats.Name("kagzi-dispatcher"), nats.MaxReconnects(-1))
	if err != nil {
		pool.Close()
		return err
	}
	log := e.o.Log.With("service", "dispatcher")
	comps := dispatcher.Assemble(cfg, store.New(pool, store.Options{OnLargePayload: process.LogLargePayload(log)}), nc, log).Components
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := lifecycle.RunAll(dctx, log, comps...); err != nil && dctx.Err() == nil {
			e.o.Log.Error("in-process dispatcher", "err", err)
		}
	}()
	e.x.stop = func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
		nc.Close()
		pool.Close()
	}
	return nil
}
