// Package bench owns `kagzi bench`: it makes its own database, runs every
// service as its own process (the kagzi binary's hidden `serve` command)
// over real TCP hops to Postgres and NATS, drives a scenario through the
// client SDK and reports figures. Its instruments (process CPU, Postgres's
// statistics and activity) are package measure's.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/internal/pgbouncer"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
)

// Options configure a benchmark run.
type Options struct {
	Scenario string
	Runs     int
	Steps    int
	// Rate is starts per second (latency, sleep, soak and batch
	// scenarios; throughput: 0 starts all at once).
	Rate float64
	// BatchRate is the batch scenario's batch rate, in runs per second.
	BatchRate int
	// AdminURL is a Postgres URL on the server to create the bench database on.
	AdminURL string
	// NATSURL of a server to use; empty starts an embedded one.
	NATSURL     string
	Workers     int
	Dispatchers int
	// Concurrency is each worker's max concurrency.
	Concurrency int
	// Exe is the kagzi binary whose `serve` command runs the services.
	Exe string
	// Keep keeps the bench database afterwards.
	Keep bool
	// ProfileDir, if set, receives a CPU profile of every service process
	// (dispatcher-0.pprof, worker-0.pprof …).
	ProfileDir string
	// Log receives progress; the services' own logs go to ServiceLog.
	Log        *slog.Logger
	ServiceLog io.Writer
	// Progress receives the report lines of the soak scenario as they
	// come (nil: none).
	Progress io.Writer
	// Counter, if set, counts the runs the scenario waits for, as it
	// learns how many (AddTotal), and those that finished (Add): the
	// CLI's progress line.
	Counter Counter

	// Options of the scenarios of scenarios.go (idle, scale, connections,
	// cron, recovery, soak); zero values take their defaults.
	Duration      time.Duration // idle, cron and soak: how long to measure
	Sizes         []int         // scale: finished runs in the table
	Repeat        int           // scale: workloads per size (the median counts)
	Schedules     int           // cron: schedules firing every second
	Interval      time.Duration // soak: time between report lines
	WorkerTimeout time.Duration // every process: KAGZI_WORKER_TIMEOUT (heartbeats at a quarter)
	// CountStatements runs the dispatcher in the bench process so that
	// every statement of the client and the dispatcher is counted
	// (throughput).
	CountStatements bool
	// OwnPostgres runs the scenario on a throwaway cluster the bench
	// starts (durable settings, pg_stat_statements preloaded), so every
	// Postgres process's CPU is the bench's and statements are counted.
	OwnPostgres bool
	// Sleepers is how many SleepProbe runs the throughput scenario starts
	// among its no-op runs, to measure how late sleeps wake under load
	// (0: none, the plain figures).
	Sleepers int
	// Attributes: keyword search attributes each throughput or latency run sets (0 to 10).
	Attributes int
	// Compare names a system to run the same workload on afterwards, with
	// the same accounting ("river"; throughput and latency).
	Compare string
	// Hops has the services record each run's dispatch hops and the
	// latency scenario print each hop's percentiles (see internal/hops);
	// throughput with Sleepers prints the hops of each sleeper's wake.
	Hops bool
	// PgBouncer puts a PgBouncer in transaction mode (internal/pgbouncer) in front of
	// the bench database: the services' pooled work and the client's go through it,
	// their sessions (the relay, the leaders) straight to Postgres
	// (KAGZI_DATABASE_SESSION_URL), as production with a pooler does. Its CPU is counted.
	PgBouncer bool
}

// Result holds a scenario's figures; zero fields do not apply to it.
type Result struct {
	Scenario      string  `json:"scenario"`
	Runs          int     `json:"runs"`
	Steps         int     `json:"steps"`
	Workers       int     `json:"workers"`
	Dispatchers   int     `json:"dispatchers"`
	DurationSec   float64 `json:"duration_sec"`
	RunsPerSec    float64 `json:"runs_per_sec"`
	StepsPerSec   float64 `json:"steps_per_sec"`
	DispatchP50ms float64 `json:"dispatch_p50_ms"`
	DispatchP99ms float64 `json:"dispatch_p99_ms"`
	ResultP50ms   float64 `json:"result_p50_ms"`
	ResultP99ms   float64 `json:"result_p99_ms"`
	Failed        int     `json:"failed"`
	// Sleepers is how late the sleepers woke (throughput --sleepers).
	Sleepers *SleepLoad `json:"sleepers,omitempty"`
	// Cost is what the runs cost Postgres (throughput).
	Cost *Cost `json:"postgres,omitempty"`
	// CPU is what the measured phase cost in CPU (throughput).
	CPU *measure.CPU `json:"cpu,omitempty"`
	// River is the same workload on River (--compare river); Comparison the ratios.
	River      *RiverResult `json:"river,omitempty"`
	Comparison []Ratio      `json:"comparison,omitempty"`
	// Hops is the dispatch path hop by hop (latency with --hops).
	Hops []HopStat `json:"hops,omitempty"`
	// Detail holds the figures of the scenarios of scenarios.go; JSON
	// prints it in place of the fields above.
	Detail Detail `json:"-"`
}

func (o *Options) defaults() error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ServiceLog == nil {
		o.ServiceLog = io.Discard
	}
	if o.Workers <= 0 {
		o.Workers = defaultWorkers(o.Scenario)
	}
	if o.Dispatchers <= 0 {
		o.Dispatchers = 1
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 200
	}
	if o.Steps < 0 || o.Attributes < 0 || o.Attributes > 10 {
		return fmt.Errorf("%w: --steps %d must not be negative, --attributes %d 0 to 10", store.ErrInvalidArgument, o.Steps, o.Attributes)
	}
	switch o.Scenario {
	case "throughput":
		if o.Runs <= 0 {
			o.Runs = 20000
		}
		if o.Sleepers < 0 {
			return fmt.Errorf("%w: --sleepers %d must not be negative", store.ErrInvalidArgument, o.Sleepers)
		}
		if o.Rate < 0 || o.Rate > MaxThroughputRate {
			return fmt.Errorf("%w: --rate %v: 0 (all at once) to %d starts/s", store.ErrInvalidArgument, o.Rate, MaxThroughputRate)
		}
	case "latency":
		if o.Runs <= 0 {
			o.Runs = 2000
		}
		if o.Rate <= 0 {
			o.Rate = 200
		}
	case "sleep":
		if o.Runs <= 0 {
			o.Runs = DefaultSleepRuns
		}
		o.Rate = max(o.Rate, 0)
	default:
		if err := o.scenarioDefaults(); err != nil {
			return err
		}
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Exe = exe
	}
	return nil
}

// env is a bench environment: its database, NATS and service processes.
type env struct {
	o      *Options
	dbName string
	// dbURL is the services' and the client's database URL (through the
	// pooler with --pgbouncer), sessionURL the same database's direct one.
	dbURL      string
	sessionURL string
	bouncer    *pgbouncer.Bouncer
	natsURL    string
	// nats is the NATS server process the bench started (nil: --nats-url),
	// natsMonitor its monitoring address.
	nats        *exec.Cmd
	natsMonitor string
	procs       []*exec.Cmd
	st          *store.Store
	pool        *pgxpool.Pool
	nc          *nats.Conn
	cl          *client.Client
	done        *doneTracker
	x           envExtra
	// hopsDir receives the services' hop files (--hops), hopRuns the
	// bench's own marks of the latency runs.
	hopsDir string
	hopRuns []hopRun
	closed  bool
}

// Run runs the scenario and returns its figures.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Scenario == "targets" {
		if o.Log == nil {
			o.Log = slog.New(slog.DiscardHandler)
		}
		return targets(ctx, o)
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Compare != "" && o.Compare != "river" {
		return nil, fmt.Errorf("%w: --compare %q: only river", store.ErrInvalidArgument, o.Compare)
	}
	if o.Hops && o.Scenario != "latency" && (o.Scenario != "throughput" || o.Sleepers == 0) {
		return nil, fmt.Errorf("%w: --hops applies to latency, and to throughput with --sleepers", store.ErrInvalidArgument)
	}
	if o.Compare != "" && o.Scenario != "throughput" && o.Scenario != "latency" {
		return nil, fmt.Errorf("%w: --compare applies to throughput and latency", store.ErrInvalidArgument)
	}
	if o.OwnPostgres {
		stop, err := startOwnPostgres(ctx, &o)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	res, err := runKagzi(ctx, &o)
	if err != nil || o.Compare == "" {
		return res, err
	}
	jobs := o.Runs * max(o.Steps, 1)
	if o.Scenario == "latency" {
		jobs = o.Runs
	}
	o.Log.Info("running river", "jobs", jobs)
	if res.River, err = runRiver(ctx, &o, jobs, o.OwnPostgres); err != nil {
		return nil, err
	}
	res.Comparison = compare(res)
	return res, nil
}

func runKagzi(ctx context.Context, o *Options) (*Result, error) {
	e := &env{o: o}
	defer e.close(ctx)
	if err := e.setup(ctx); err != nil {
		return nil, err
	}
	switch o.Scenario {
	case "throughput":
		res, err := e.withCost(ctx, e.throughput)
		if err != nil || !o.Hops {
			return res, err
		}
		e.close(ctx)
		res.Hops, err = joinHops(e.hopsDir, e.hopRuns)
		return res, err
	case "latency":
		res, err := e.latency(ctx)
		if err != nil || !o.Hops {
			return res, err
		}
		// The services write their last hops as they stop.
		e.close(ctx)
		res.Hops, err = joinHops(e.hopsDir, e.hopRuns)
		return res, err
	case "sleep":
		return e.sleep(ctx)
	default:
		return e.runExtra(ctx)
	}
}

func (e *env) setup(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.dbName = "kagzi_bench_" + hex.EncodeToString(b[:])
	if err := dbadmin.DatabaseCreate(ctx, e.o.AdminURL, e.dbName, ""); err != nil {
		return err
	}
	url, err := dbadmin.DatabaseURL(e.o.AdminURL, e.dbName)
	if err != nil {
		return err
	}
	e.dbURL, e.sessionURL = url, url
	if _, err := migrate.Up(ctx, url); err != nil {
		return err
	}
	if e.o.PgBouncer {
		if e.bouncer, err = pgbouncer.Start(ctx, pgbouncer.Options{Server: e.o.AdminURL}); err != nil {
			return err
		}
		if e.dbURL, err = e.bouncer.URL(url); err != nil {
			return err
		}
		e.o.Log.Info("pgbouncer", "addr", e.bouncer.Addr(), "log", e.bouncer.LogPath())
	}
	e.natsURL = e.o.NATSURL
	if e.natsURL == "" {
		if err := e.startNATS(ctx); err != nil {
			return err
		}
	}
	e.x.tally = stmtcount.NewTally()
	pool, err := store.ConnectTraced(ctx, measure.WithApp(e.dbURL, benchApp), e.x.tally)
	if err != nil {
		return err
	}
	e.pool = pool
	e.st = store.New(pool, store.Options{})
	e.nc, err = nats.Connect(e.natsURL, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	e.cl, err = client.NewFromStore(e.st, e.nc, client.Options{Namespace: "bench", Queue: "bench"})
	if err != nil {
		return err
	}
	e.done, err = newDoneTracker(e.nc, e.o.Counter)
	if err != nil {
		return err
	}
	if e.o.Scenario == "soak" {
		// The reaper reads retention policies when it starts and then
		// only once per hour or shortest period: set before it starts,
		// the short periods apply from the first finished run.
		if err := e.soakRetention(ctx); err != nil {
			return err
		}
	}
	// Subscribe before the services start, then wait for them to say so.
	relayUp := make(chan struct{}, 16)
	s1, err := e.nc.Subscribe(protocol.SubjectRelayUp, func(*nats.Msg) { relayUp <- struct{}{} })
	if err != nil {
		return err
	}
	defer func() { _ = s1.Unsubscribe() }()
	_ = e.nc.Flush()
	common := []string{"KAGZI_DATABASE_URL=" + e.dbURL, "KAGZI_DATABASE_SESSION_URL=" + e.sessionURL, "KAGZI_NATS_URL=" + e.natsURL, "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=warn",
		"KAGZI_NAMESPACE=bench", "KAGZI_QUEUE=bench"}
	e.x.common = append(common, e.o.serviceEnv()...)
	hopsEnv, err := e.hopsEnv()
	if err != nil {
		return err
	}
	e.x.common = append(e.x.common, hopsEnv...)
	for i := 0; i < e.o.Dispatchers; i++ {
		if e.o.CountStatements && i == 0 {
			if err := e.startDispatcherHere(ctx); err != nil {
				return err
			}
			continue
		}
		if err := e.spawn(ctx, "dispatcher", e.x.common); err != nil {
			return err
		}
	}
	timeout := time.After(30 * time.Second)
	select {
	case <-relayUp:
	case <-timeout:
		return errors.New("bench: no dispatcher relay came up within 30 s")
	}
	if err := e.startSupport(ctx); err != nil {
		return err
	}
	if _, err := e.startWorkers(ctx, e.o.Workers); err != nil {
		return err
	}
	e.o.Log.Info("services up", "dispatchers", e.o.Dispatchers, "workers", e.o.Workers, "database", e.dbName)
	return nil
}

func (e *env) spawn(ctx context.Context, service string, env []string) error {
	cmd := exec.CommandContext(ctx, e.o.Exe, "serve", service)
	cmd.Env = append(os.Environ(), env...)
	if service != "worker" {
		cmd.Env = append(cmd.Env, "KAGZI_DATABASE_URL="+measure.WithApp(e.dbURL, "kagzi-"+service),
			"KAGZI_DATABASE_SESSION_URL="+measure.WithApp(e.sessionURL, "kagzi-"+service))
	}
	if e.o.ProfileDir != "" {
		n := 0
		for _, p := range e.procs {
			if p.Args[2] == service {
				n++
			}
		}
		cmd.Env = append(cmd.Env, fmt.Sprintf("KAGZI_CPU_PROFILE=%s/%s-%d.pprof", e.o.ProfileDir, service, n))
	}
	cmd.Stdout, cmd.Stderr = e.o.ServiceLog, e.o.ServiceLog
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start %s: %w", service, err)
	}
	e.procs = append(e.procs, cmd)
	return nil
}

func (e *env) close(ctx context.Context) {
	if e.closed {
		return
	}
	e.closed = true
	// Workers first, so their drain reaches a live dispatcher.
	for i := len(e.procs) - 1; i >= 0; i-- {
		p := e.procs[i]
		_ = p.Process.Signal(os.Interrupt)
		_ = p.Wait()
	}
	e.x.close()
	if e.done != nil {
		e.done.close()
	}
	if e.cl != nil {
		e.cl.Close()
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.pool != nil {
		e.pool.Close()
	}
	if e.nats != nil {
		_ = e.nats.Process.Signal(os.Interrupt)
		_ = e.nats.Wait()
	}
	if e.bouncer != nil {
		e.bouncer.Stop()
	}
	if e.dbName != "" && !e.o.Keep {
		if err := dbadmin.DatabaseDrop(context.WithoutCancel(ctx), e.o.AdminURL, e.dbName); err != nil {
			e.o.Log.Warn("drop bench database", "err", err)
		}
	}
}

// doneTracker records when each run's finish event first arrived.
// Counter counts a scenario's runs (Options.Counter).
type Counter interface {
	AddTotal(n int64)
	Add(n int64)
}

type doneTracker struct {
	// counter, if set, counts the runs expected and finished.
	counter Counter
	sub     *nats.Subscription
	mu      sync.Mutex
	at      map[uuid.UUID]time.Time
	stat    map[uuid.UUID]string
	want    int
	all     chan struct{}
}

func newDoneTracker(nc *nats.Conn, counter Counter) (*doneTracker, error) {
	d := &doneTracker{counter: counter, at: map[uuid.UUID]time.Time{}, stat: map[uuid.UUID]string{}, all: make(chan struct{})}
	sub, err := nc.Subscribe(protocol.SubjectDoneAll, func(m *nats.Msg) {
		now := time.Now()
		var f protocol.RunFinished
		if protocol.Decode(m.Data, &f) != nil {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, seen := d.at[f.RunID]; seen {
			return
		}
		d.at[f.RunID], d.stat[f.RunID] = now, f.Status
		if d.counter != nil {
			d.counter.Add(1)
		}
		if d.want > 0 && len(d.at) == d.want {
			close(d.all)
		}
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	d.sub = sub
	return d, nc.Flush()
}

// expect arms the tracker to signal when n distinct runs finished.
func (d *doneTracker) expect(n int) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = n
	if d.counter != nil {
		d.counter.AddTotal(int64(n))
	}
	if len(d.at) >= n {
		close(d.all)
	}
	return d.all
}

func (d *doneTracker) failed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, s := range d.stat {
		if s != "COMPLETED" {
			n++
		}
	}
	return n
}

func (d *doneTracker) close() { _ = d.sub.Unsubscribe() }

// MaxThroughputRate bounds the throughput scenario's --rate.
const MaxThroughputRate = 100000

func (e *env) throughput(ctx context.Context) (*Result, error) {
	o := e.o
	all := e.done.expect(o.Runs + o.Sleepers)
	start := time.Now()
	// All at once in chunks of 1,000, or at o.Rate per second: a chunk
	// every 10 ms.
	chunk, pace := 1000, (*time.Ticker)(nil)
	if o.Rate > 0 {
		chunk, pace = max(1, int(o.Rate/100)), time.NewTicker(10*time.Millisecond)
		defer pace.Stop()
	}
	// The sleepers go in with the first half of the chunks, evenly, so
	// that they fall due while runs started before them still wait.
	chunks := (o.Runs + chunk - 1) / chunk
	sleeperChunks := max(1, (chunks+1)/2)
	var sleepers []*client.Handle
	attrs, err := e.attributes(ctx)
	if err != nil {
		return nil, err
	}
	for c, i := 0, 0; i < o.Runs || len(sleepers) < o.Sleepers; c, i = c+1, i+chunk {
		n := max(0, min(chunk, o.Runs-i))
		s := 0
		if c < sleeperChunks {
			s = o.Sleepers*(c+1)/sleeperChunks - len(sleepers)
		} else {
			s = o.Sleepers - len(sleepers)
		}
		reqs := make([]client.StartRequest, n, n+s)
		for j := range reqs {
			reqs[j] = client.StartRequest{Type: "Noop", Input: map[string]int{"steps": o.Steps}, Options: client.StartOptions{Attributes: attrs}}
		}
		for range s {
			reqs = append(reqs, sleepProbeStart())
		}
		if pace != nil && c > 0 {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		hs, err := e.cl.StartMany(ctx, reqs)
		if err != nil {
			return nil, err
		}
		sleepers = append(sleepers, hs[n:]...)
	}
	o.Log.Info("started", "runs", o.Runs, "sleepers", o.Sleepers, "in", time.Since(start))
	if err := wait(ctx, all, o.Runs+o.Sleepers, e.done); err != nil {
		return nil, err
	}
	el := time.Since(start).Seconds()
	res := &Result{Scenario: o.Scenario, Runs: o.Runs, Steps: o.Steps, Workers: o.Workers, Dispatchers: o.Dispatchers,
		DurationSec: el, RunsPerSec: float64(o.Runs) / el, StepsPerSec: float64(o.Runs*o.Steps) / el, Failed: e.done.failed()}
	if o.Sleepers > 0 {
		l, err := e.latenessParts(ctx, sleepers)
		if err != nil {
			return nil, err
		}
		e.hopRuns = l.hops
		res.Sleepers = &SleepLoad{Runs: o.Sleepers, SleepMinMS: sleepMinMS, SleepMaxMS: sleepMaxMS,
			LateP50ms: pct(l.late, 50), LateP99ms: pct(l.late, 99), LateMaxMS: pct(l.late, 100), Early: l.early,
			RecordedP99ms: pct(l.recorded, 99), ClaimedP50ms: pct(l.claimed, 50), ClaimedP99ms: pct(l.claimed, 99)}
		for _, r := range l.recorded {
			if r > 0 {
				res.Sleepers.RecordedLate++
			}
		}
	}
	return res, nil
}

func wait(ctx context.Context, all <-chan struct{}, n int, d *doneTracker) error {
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		d.mu.Lock()
		got := len(d.at)
		d.mu.Unlock()
		return fmt.Errorf("bench: %d of %d runs finished: %w", got, n, ctx.Err())
	}
}

// attributes declares the attributes each run sets (--attributes), returns their values.
func (e *env) attributes(ctx context.Context) (map[string]any, error) {
	attrs := map[string]any{}
	for i := range e.o.Attributes {
		attrs[fmt.Sprint("a", i)] = fmt.Sprint("v", i)
		if err := e.cl.DeclareAttribute(ctx, fmt.Sprint("a", i), client.AttributeKeyword); err != nil {
			return nil, err
		}
	}
	return attrs, nil
}

func (e *env) latency(ctx context.Context) (*Result, error) {
	o := e.o
	m, err := e.measureLatency(ctx, o.Runs, o.Rate)
	if err != nil {
		return nil, err
	}
	return &Result{Scenario: o.Scenario, Runs: o.Runs, Steps: 1, Workers: o.Workers, Dispatchers: o.Dispatchers,
		DurationSec: m.elapsed, RunsPerSec: float64(o.Runs) / m.elapsed,
		DispatchP50ms: pct(m.dispatch, 50), DispatchP99ms: pct(m.dispatch, 99),
		ResultP50ms: pct(m.result, 50), ResultP99ms: pct(m.result, 99), Failed: m.failed}, nil
}

// latencies are what measureLatency saw: each run's dispatch (start
// commit to its code running) and result (start to result received), in
// milliseconds.
type latencies struct {
	dispatch, result []float64
	elapsed          float64 // seconds, first start to last result
	failed           int
}

// measureLatency starts runs Probe runs at rate per second and waits for
// them all.
func (e *env) measureLatency(ctx context.Context, runs int, rate float64) (latencies, error) {
	var m latencies
	attrs, err := e.attributes(ctx)
	if err != nil {
		return m, err
	}
	d, err := newDoneTracker(e.nc, e.o.Counter)
	if err != nil {
		return m, err
	}
	defer d.close()
	all := d.expect(runs)
	ids := make([]uuid.UUID, runs)
	starts := make([]time.Time, runs)
	called := make([]time.Time, runs)
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	begin := time.Now()
	for i := 0; i < runs; i++ {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return m, ctx.Err()
			}
		}
		called[i] = time.Now()
		h, err := e.cl.Start(ctx, "Probe", struct{}{}, client.StartOptions{Attributes: attrs})
		if err != nil {
			return m, err
		}
		starts[i], ids[i] = time.Now(), h.RunID
	}
	if err := wait(ctx, all, runs, d); err != nil {
		return m, err
	}
	m.elapsed = time.Since(begin).Seconds()
	for i, id := range ids {
		r, err := e.cl.Get(ctx, id)
		if err != nil {
			return m, err
		}
		var ran int64
		if _, err := fmt.Sscan(string(r.Output), &ran); err == nil && ran > 0 {
			m.dispatch = append(m.dispatch, float64(time.Unix(0, ran).Sub(starts[i]))/1e6)
		} else {
			ran = 0
		}
		if e.o.Hops {
			e.hopRuns = append(e.hopRuns, hopRun{id: id, started: called[i].UnixNano(), committed: starts[i].UnixNano(), running: ran})
		}
		d.mu.Lock()
		at := d.at[id]
		d.mu.Unlock()
		m.result = append(m.result, float64(at.Sub(starts[i]))/1e6)
	}
	m.failed = d.failed()
	return m, nil
}

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
