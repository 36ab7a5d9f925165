package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/batchbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/consolebench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/cronbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/httpbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/startbatchbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/waysbench"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// The scenarios beyond throughput and latency: idle, scale, connections,
// recovery and soak (one file each; cron, console and batch are
// subpackages the bench gives what they need), and what they share with the others:
// the reaper and scheduler processes, worker processes known by id, an
// admin connection that reads server statistics without being counted in
// them, and the scenario-specific results (Detail).

// Defaults of the options the scenarios of this file add.
const (
	DefaultWorkerTimeout = 2 * time.Second
	DefaultIdleDuration  = 30 * time.Second
	DefaultScaleRuns     = 10000
	DefaultScaleRepeat   = 3
	DefaultRecoveryRuns  = 100
	DefaultConnRuns      = 2000
	// statsFlushWait is how long Postgres 15 may keep an idle backend's
	// counters before they reach pg_stat_database (PGSTAT_IDLE_INTERVAL
	// is 10 s).
	statsFlushWait = 11 * time.Second
	// benchApp is the application_name of the bench's own connections, so
	// connection counts and activity samples can leave them out.
	benchApp = "kagzi-bench"
)

// DefaultSizes are the finished-run counts of the scale scenario.
var DefaultSizes = []int{0, 1_000_000, 5_000_000}

// Scenarios lists every scenario, in the order the docs describe them.
var Scenarios = []string{"throughput", "latency", "sleep", "idle", "scale", "connections", "cron", "recovery", "console", "soak", "targets", "batch", "triggers", "webhooks", "http", "start-batches"}

// defaultWorkers is the number of worker processes of a scenario when
// --workers is not given.
func defaultWorkers(scenario string) int {
	switch scenario {
	case "idle":
		return 10
	case "recovery", "connections", "console":
		return 1 // worker A; a second joins later (connections: 49 more)
	}
	return 2
}

// scenarioDefaults fills the defaults of the scenarios of this file; an
// unknown scenario is an error.
func (o *Options) scenarioDefaults() error {
	switch o.Scenario {
	case "idle":
		if o.Duration <= 0 {
			o.Duration = DefaultIdleDuration
		}
	case "scale":
		if o.Runs <= 0 {
			o.Runs = DefaultScaleRuns
		}
		if len(o.Sizes) == 0 {
			o.Sizes = DefaultSizes
		}
		if o.Repeat <= 0 {
			o.Repeat = DefaultScaleRepeat
		}
		for _, n := range o.Sizes {
			if n < 0 {
				return fmt.Errorf("%w: --sizes %v: sizes must not be negative", store.ErrInvalidArgument, o.Sizes)
			}
		}
	case "connections":
		if o.Runs <= 0 {
			o.Runs = DefaultConnRuns
		}
		o.Workers = 1
	case "cron":
		if o.Duration <= 0 {
			o.Duration = cronbench.DefaultDuration
		}
		if o.Schedules <= 0 {
			o.Schedules = cronbench.DefaultSchedules
		}
	case "console":
		if o.Runs <= 0 {
			o.Runs = consolebench.DefaultRuns
		}
		if o.Repeat <= 0 {
			o.Repeat = consolebench.DefaultRequests
		}
	case "soak":
		o.soakDefaults()
	case "batch":
		if o.Runs <= 0 {
			o.Runs = batchbench.DefaultRuns
		}
		if o.Rate <= 0 {
			o.Rate = 200
		}
		if o.BatchRate == 0 {
			o.BatchRate = batchbench.DefaultRate
		}
		if o.BatchRate < 0 || o.BatchRate > client.MaxBatchRate {
			return fmt.Errorf("%w: --batch-rate %d: want 1 to %d", store.ErrInvalidArgument, o.BatchRate, client.MaxBatchRate)
		}
	case "triggers", "webhooks":
		o.Dispatchers = 1 // triggers starts the second, to kill the first
		return (&waysbench.Options{N: o.Runs, Rate: o.Rate}).Check(o.Scenario)
	case "http": // httpbench fills its defaults
	case "start-batches":
	case "recovery":
		if o.Runs <= 0 {
			o.Runs = DefaultRecoveryRuns
		}
		o.Workers = 1
		if o.Concurrency < o.Runs {
			o.Concurrency = o.Runs
		}
	default:
		return fmt.Errorf("%w: unknown scenario %q (%s)", store.ErrInvalidArgument, o.Scenario, strings.Join(Scenarios, ", "))
	}
	return nil
}

func (o *Options) workerTimeout() time.Duration {
	if o.WorkerTimeout <= 0 {
		return DefaultWorkerTimeout
	}
	return o.WorkerTimeout
}

// heartbeatInterval is a quarter of the worker timeout: a worker must
// miss three heartbeats and most of a fourth before it is declared dead.
func (o *Options) heartbeatInterval() time.Duration {
	return max(o.workerTimeout()/4, 10*time.Millisecond)
}

// serviceEnv is the configuration every bench process gets besides its
// database, NATS, namespace and queue.
func (o *Options) serviceEnv() []string {
	return []string{
		"KAGZI_WORKER_TIMEOUT=" + o.workerTimeout().String(),
		"KAGZI_HEARTBEAT_INTERVAL=" + o.heartbeatInterval().String(),
		// Runs still held at the end (recovery's) are released quickly.
		"KAGZI_DRAIN_TIMEOUT=1s",
	}
}

// envExtra is the part of a bench environment the scenarios of this file
// add.
type envExtra struct {
	// common is the environment of every service process.
	common []string
	// workers are the worker processes started so far, with their ids.
	workers []procWorker
	// tally counts the statements of the bench's own pool (and of an
	// in-process dispatcher, --count-statements).
	tally *stmtcount.Tally
	// admin is a pool on the admin database: reading statistics there is
	// not counted in the bench database's.
	admin *pgxpool.Pool
	// stop ends an in-process dispatcher.
	stop func()
}

func (x *envExtra) close() {
	if x.stop != nil {
		x.stop()
	}
	if x.admin != nil {
		x.admin.Close()
	}
}

// openAdmin opens the admin pool (once).
func (e *env) openAdmin(ctx context.Context) error {
	if e.x.admin != nil {
		return nil
	}
	pool, err := store.Connect(ctx, measure.WithApp(e.o.AdminURL, benchApp))
	if err != nil {
		return err
	}
	e.x.admin = pool
	return nil
}

// startSupport starts the scheduler and the reaper and waits until the
// reaper leads (it holds its advisory lock), so workers registered next
// are heard by a leader.
func (e *env) startSupport(ctx context.Context) error {
	for _, s := range []string{"scheduler", "reaper"} {
		if err := e.spawn(ctx, s, e.x.common); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		held, err := measure.AdvisoryLockHeld(ctx, e.pool, reaper.LockKey)
		if err != nil {
			return err
		}
		if held {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bench: the reaper did not take its leader lock within 30 s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// procWorker is a worker process and the id it registered with.
type procWorker struct {
	cmd *exec.Cmd
	id  uuid.UUID
}

// startWorkers spawns n worker processes with extra environment and waits
// until each has registered, matching registrations to processes by pid.
func (e *env) startWorkers(ctx context.Context, n int, extra ...string) ([]procWorker, error) {
	if n <= 0 {
		return nil, nil
	}
	regs := make(chan protocol.WorkerRegister, 4*n+16)
	sub, err := e.nc.Subscribe(protocol.SubjectWorkerRegisterAll, func(m *nats.Msg) {
		var r protocol.WorkerRegister
		if protocol.Decode(m.Data, &r) == nil {
			select {
			case regs <- r:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		return nil, err
	}
	env := append(append(append([]string(nil), e.x.common...), fmt.Sprintf("KAGZI_MAX_CONCURRENCY=%d", e.o.Concurrency)), extra...)
	byPID := map[int]*procWorker{}
	out := make([]procWorker, 0, n)
	for i := 0; i < n; i++ {
		if err := e.spawn(ctx, "worker", env); err != nil {
			return nil, err
		}
		cmd := e.procs[len(e.procs)-1]
		out = append(out, procWorker{cmd: cmd})
	}
	for i := range out {
		byPID[out[i].cmd.Process.Pid] = &out[i]
	}
	timeout := time.After(30 * time.Second)
	for got := 0; got < n; {
		select {
		case r := <-regs:
			if w := byPID[r.PID]; w != nil && w.id == uuid.Nil {
				w.id = r.WorkerID
				got++
			}
		case <-timeout:
			return nil, fmt.Errorf("bench: %d of %d workers registered within 30 s", got, n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.x.workers = append(e.x.workers, out...)
	return out, nil
}

// round starts n runs of Noop with steps steps (StartMany, 1000 at a time)
// and waits until every one has finished; it returns the time from the
// first start to the last finish and how many did not complete.
func (e *env) round(ctx context.Context, n, steps int) (time.Duration, int, error) {
	d, err := newDoneTracker(e.nc, e.o.Counter)
	if err != nil {
		return 0, 0, err
	}
	defer d.close()
	all := d.expect(n)
	start := time.Now()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		reqs := make([]client.StartRequest, min(chunk, n-i))
		for j := range reqs {
			reqs[j] = client.StartRequest{Type: "Noop", Input: map[string]int{"steps": steps}}
		}
		if _, err := e.cl.StartMany(ctx, reqs); err != nil {
			return 0, 0, err
		}
	}
	if err := wait(ctx, all, n, d); err != nil {
		return 0, 0, err
	}
	return time.Since(start), d.failed(), nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// runExtra runs a scenario of this file.
func (e *env) runExtra(ctx context.Context) (*Result, error) {
	// The scenarios track their runs themselves.
	e.done.close()
	var (
		d   Detail
		err error
	)
	switch e.o.Scenario {
	case "idle":
		d, err = e.idle(ctx)
	case "scale":
		d, err = e.scale(ctx)
	case "connections":
		d, err = e.connections(ctx)
	case "cron":
		d, err = cronbench.Run(ctx, cronbench.Deps{Client: e.cl, Store: e.st, Log: e.o.Log, Workers: len(e.x.workers)}, cronbench.Options{Schedules: e.o.Schedules, Duration: e.o.Duration})
	case "recovery":
		d, err = e.recovery(ctx)
	case "console":
		d, err = consolebench.Run(ctx, consolebench.Deps{Store: e.st, Pool: e.pool, NATS: e.nc, Log: e.o.Log}, consolebench.Options{Runs: e.o.Runs, Repeat: e.o.Repeat})
	case "soak":
		d, err = e.soak(ctx)
	case "batch":
		d, err = batchbench.Run(ctx, batchbench.Deps{Client: e.cl, Log: e.o.Log, Measure: func(ctx context.Context, n int, rate float64) ([]float64, error) {
			m, err := e.measureLatency(ctx, n, rate)
			return m.dispatch, err
		}}, batchbench.Options{Runs: e.o.Runs, BatchRate: e.o.BatchRate, Rate: e.o.Rate})
	case "triggers", "webhooks":
		d, err = waysbench.Run(ctx, e.o.Scenario, waysbench.Deps{Client: e.cl, Store: e.st, Log: e.o.Log, Counter: e.o.Counter, Exe: e.o.Exe,
			Env: e.x.common, ServiceLog: e.o.ServiceLog, Spawn: e.spawnProc, Procs: e.procsOf}, waysbench.Options{N: e.o.Runs, Rate: e.o.Rate})
	case "http":
		d, err = httpbench.Run(ctx, httpbench.Deps{Client: e.cl, Store: e.st, Pool: e.pool, NATS: e.nc, Log: e.o.Log}, httpbench.Options{Rate: e.o.Rate, Duration: e.o.Duration})
	case "start-batches":
		d, err = startbatchbench.Run(ctx, startbatchbench.Deps{Client: e.cl, Log: e.o.Log}, startbatchbench.Options{Items: e.o.Runs})
	default:
		err = fmt.Errorf("%w: unknown scenario %q", store.ErrInvalidArgument, e.o.Scenario)
	}
	if err != nil {
		return nil, err
	}
	return &Result{Scenario: e.o.Scenario, Workers: len(e.x.workers), Dispatchers: e.o.Dispatchers, Detail: d}, nil
}

// Detail holds the figures of one of the scenarios of this file. JSON
// prints it as the whole result; the table prints its rows.
type Detail interface {
	// Rows are the table's label/value pairs, in order.
	Rows() [][2]string
}

// MarshalJSON prints a result with a Detail as the detail alone (it
// names its scenario), any other as its fields.
func (r Result) MarshalJSON() ([]byte, error) {
	if r.Detail != nil {
		return json.Marshal(r.Detail)
	}
	type plain Result
	return json.Marshal(plain(r))
}

// WriteTable prints label/value rows as an aligned two-column table.
func WriteTable(w io.Writer, rows [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		if _, err := fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1]); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// verdict says whether a figure met its target.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
