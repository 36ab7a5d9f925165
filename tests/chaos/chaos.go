// Package chaos owns `kagzi chaos`: a run of thousands of workflows while
// processes are killed and restarted, checked afterwards for anything lost
// or applied twice.
//
// It starts a Postgres cluster of its own (initdb and pg_ctl in a temp
// directory, on a free port, so restarting it disturbs nothing else), a
// NATS server (nats-server when installed, else the embedded server in a
// child process), and every Kagzi service as its own process (the kagzi
// binary's hidden `serve` command, configured by KAGZI_* variables with
// short timeouts): two dispatchers, two schedulers, a reaper and three
// workers. The workers run testflows.Chaos, which logs every execution and
// every step invocation to a file per worker process (KAGZI_CHAOS_DIR).
//
// Then, for --duration, it starts --runs runs of a five-step workflow
// (some sleeping durably, some waiting for an event that a driver
// goroutine sends) and an every-second schedule fires throughout, while it
// SIGKILLs a worker every --kill-every and replaces it, SIGKILLs the relay
// leader dispatcher, a scheduler and the reaper once each and restarts
// them, restarts the NATS server, and restarts Postgres
// (`pg_ctl restart -m fast`). It waits for every run to finish, stops
// everything, and checks the invariants of Check against the database and
// the workers' logs.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/tests/modeltest"
	"github.com/kagzi/kagzi/tests/pgcluster"
	"github.com/kagzi/kagzi/tests/testflows"
)

// Namespace and Queue of the chaos run.
const (
	Namespace = "chaos"
	Queue     = "chaos"
	dbName    = "kagzi_chaos"
)

// Defaults of Options.
const (
	DefaultRuns          = 10000
	DefaultSteps         = 5
	DefaultDuration      = 60 * time.Second
	DefaultWorkers       = 3
	DefaultDispatchers   = 2
	DefaultSchedulers    = 2
	DefaultKillEvery     = 2 * time.Second
	DefaultSleepFraction = 0.3
	DefaultEventFraction = 0.2
	DefaultConcurrency   = 100
	DefaultTimeout       = 15 * time.Minute
	DefaultHeartbeat     = 500 * time.Millisecond
	DefaultWorkerTimeout = 2 * time.Second
	DefaultLease         = 10 * time.Second
	DefaultFreezeFor     = 6 * time.Second
)

// Options configure a chaos run; zero values take the defaults.
type Options struct {
	Runs  int
	Steps int
	// Duration is the chaos phase: runs are started over its first 80%,
	// the faults happen within it, and the schedule fires throughout it.
	Duration    time.Duration
	Workers     int
	Dispatchers int
	Schedulers  int
	// KillEvery is the interval between worker SIGKILLs.
	KillEvery time.Duration
	// FreezeFor is how long each frozen process stays frozen (SIGSTOP,
	// then SIGCONT): the relay leader, the reaper, a worker, a scheduler
	// and a dispatcher that does not relay, once each. Negative: none.
	FreezeFor time.Duration
	// SleepFraction of the runs sleep 100–500 ms after step 2;
	// EventFraction of them wait for an event after step 3.
	SleepFraction, EventFraction float64
	// Concurrency is each worker's KAGZI_MAX_CONCURRENCY.
	Concurrency int
	// Timeout bounds the whole run; runs not finished by then are lost.
	Timeout time.Duration
	// MaxRecovery, if positive, makes a recovery slower than it (worker
	// kill to the next execution of a run it held) a violation.
	MaxRecovery time.Duration
	// Dir is the working directory (default a new temp directory, removed
	// at the end unless Keep is set or an invariant was violated; a Dir
	// given is kept). It must not hold an earlier run.
	Dir  string
	Keep bool
	// Exe is the kagzi binary whose `serve` command runs the services
	// (default this executable).
	Exe string
	// NATSServer is the nats-server binary ("" finds it; "embedded" runs
	// the embedded server in a child process).
	NATSServer string
	// NATSDefaults runs nats-server with its default pings (every 2
	// minutes) instead of Kagzi's (natsutil.ServerConfig): a frozen
	// process then keeps its connection and queue-group place for the
	// whole freeze. It needs a nats-server binary.
	NATSDefaults bool
	// Process timeouts: worker heartbeats, the reaper's worker timeout,
	// the lease.
	HeartbeatInterval, WorkerTimeout, Lease time.Duration
	// LogLevel of the services (their logs go to files in Dir).
	LogLevel string
	// Seed of the random choices (0: random).
	Seed uint64
	// Log receives progress lines (default discarded).
	Log io.Writer

	// Model runs model-test programs (tests/modeltest) instead of the
	// Chaos workflow: Runs programs generated from Seed (default
	// DefaultModelPrograms), then Regressions, each checked against the
	// model's prediction; a divergence is shrunk to a minimal program.
	Model       bool
	Regressions []modeltest.Program
	// ShrinkTries bounds the engine runs spent shrinking one divergence
	// (default 60); ShrinkMax the divergences shrunk (default 5).
	ShrinkTries, ShrinkMax int
	// NoFaults kills and restarts nothing (the model test of `make test`).
	NoFaults bool
	// Scenarios is the number of operator scenarios a fault-free model
	// run plays once its programs ended (modeltest.Scenario: pauses,
	// resumes, queries over search attributes, batches); 0 plays none.
	Scenarios int
	// Keys, if positive, starts each model program's run with one of Keys
	// concurrency keys under a per-key limit of PerKey runs of the model's
	// workflow type (default 4), and checks that no key ever had more
	// executions at once than that.
	Keys, PerKey int
	// DatabaseURL and NATSURL, if set, are a migrated database and a NATS
	// server to use instead of starting a cluster and a server of the
	// run's own; nothing restarts them.
	DatabaseURL, NATSURL string
}

// DefaultModelPrograms is the number of programs of a model run.
const DefaultModelPrograms = 3000

func (o *Options) defaults() error {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Model {
		def(&o.Runs, DefaultModelPrograms)
	}
	def(&o.Runs, DefaultRuns)
	def(&o.ShrinkTries, 60)
	def(&o.ShrinkMax, 5)
	def(&o.Steps, DefaultSteps)
	def(&o.Workers, DefaultWorkers)
	def(&o.Dispatchers, DefaultDispatchers)
	if o.Keys > 0 {
		def(&o.PerKey, 4)
	}
	if o.Model && o.Schedulers == 0 {
		// The model's programs need no schedule.
		o.Schedulers = -1
	}
	if o.Schedulers == 0 {
		o.Schedulers = DefaultSchedulers
	}
	def(&o.Concurrency, DefaultConcurrency)
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defD(&o.Duration, DefaultDuration)
	defD(&o.KillEvery, DefaultKillEvery)
	defD(&o.FreezeFor, DefaultFreezeFor)
	defD(&o.Timeout, DefaultTimeout)
	defD(&o.HeartbeatInterval, DefaultHeartbeat)
	defD(&o.WorkerTimeout, DefaultWorkerTimeout)
	defD(&o.Lease, DefaultLease)
	if o.SleepFraction < 0 || o.SleepFraction > 1 || o.EventFraction < 0 || o.EventFraction > 1 {
		return fmt.Errorf("%w: --sleep-fraction and --event-fraction are 0 to 1", store.ErrInvalidArgument)
	}
	if o.Steps < 3 && (o.SleepFraction > 0 || o.EventFraction > 0) {
		return fmt.Errorf("%w: --steps %d: sleeps come after step 2 and events after step 3; use at least 3", store.ErrInvalidArgument, o.Steps)
	}
	if o.Lease < 3*time.Second {
		return fmt.Errorf("%w: --lease %v: at least 3s", store.ErrInvalidArgument, o.Lease)
	}
	if o.Duration < 10*time.Second && !o.NoFaults {
		return fmt.Errorf("%w: --duration %v: at least 10s (the faults are spread over it)", store.ErrInvalidArgument, o.Duration)
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
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

// Result is the outcome of a chaos run.
type Result struct {
	Report   *Report
	Timeline []string
	// ServiceErrors counts the ERROR lines of the services' logs by
	// service, message and cause, most frequent first (not invariants:
	// the services retry).
	ServiceErrors []string
	Dir           string
	// Kept: Dir was left in place (Keep, a Dir given, or a violation).
	Kept    bool
	Elapsed time.Duration
}

// harness is one chaos run.
type harness struct {
	o     *Options
	dir   string
	pg    *pgcluster.Cluster
	ns    *natsServer
	dbURL string
	// natsURL is the services' NATS server.
	natsURL string
	common  []string

	pool interface{ Close() }
	st   *store.Store
	nc   *nats.Conn
	cl   *client.Client

	// t0ns is the start of the chaos phase (Unix ns; 0 before it).
	t0ns     atomic.Int64
	begun    time.Time
	stopping atomic.Bool
	// keep: the working directory holds something to read afterwards.
	keep atomic.Bool

	mu       sync.Mutex
	slots    map[string]*proc
	problems []string
	kills    []Kill
	outages  []Window
	timeline []string
	sched    *ScheduleData

	started   atomic.Int64 // runs whose start returned
	startDone atomic.Bool
	events    sync.WaitGroup
	monitors  sync.WaitGroup
	tornDown  sync.Once
}

// t0 is the start of the chaos phase (zero before it).
func (h *harness) t0() time.Time {
	if ns := h.t0ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (h *harness) logf(format string, args ...any) {
	el := time.Since(h.begun)
	if t0 := h.t0(); !t0.IsZero() {
		el = time.Since(t0)
	}
	fmt.Fprintf(h.o.Log, "chaos %+7.1fs  %s\n", el.Seconds(), fmt.Sprintf(format, args...))
}

// event records a fault in the timeline.
func (h *harness) event(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.timeline = append(h.timeline, fmt.Sprintf("%+7.1fs  %s", time.Since(h.t0()).Seconds(), msg))
	h.mu.Unlock()
	h.logf("%s", msg)
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.problems = append(h.problems, msg)
	h.mu.Unlock()
	h.logf("PROBLEM: %s", msg)
}

// Run runs the chaos scenario and checks it. An error means the harness
// itself could not run (a setup failure); a violated invariant is in the
// report.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	h := &harness{o: &o, slots: map[string]*proc{}, begun: time.Now()}
	res := &Result{}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kagzi-chaos-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The cluster runs as the postgres user when we are root: it must be
	// able to reach its directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	h.dir, res.Dir = dir, dir
	h.logf("working directory %s (seed %d)", dir, o.Seed)

	tctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// Cleanup and the check run on their own clock, also after a timeout
	// or an interrupt.
	cleanup := context.WithoutCancel(ctx)
	defer h.teardown(cleanup) // a no-op once done

	if err := h.setup(tctx); err != nil {
		return nil, err
	}
	if o.Model {
		res.Report = h.modelScenario(tctx, cleanup)
		h.stopServices()
		res.ServiceErrors = errorDigest(dir)
		h.teardown(cleanup)
		h.mu.Lock()
		res.Timeline = append([]string(nil), h.timeline...)
		h.mu.Unlock()
		res.Elapsed = time.Since(h.begun)
		res.Kept = o.Keep || o.Dir != "" || res.Report.Failed() || h.keep.Load()
		if !res.Kept {
			_ = os.RemoveAll(dir)
		}
		return res, nil
	}
	h.scenario(tctx)
	h.stopServices()

	cctx, ccancel := context.WithTimeout(cleanup, 5*time.Minute)
	defer ccancel()
	h.logf("collecting runs, steps and logs")
	in, err := h.collect(cctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: collect: %w", err)
	}
	res.Report = Check(in)
	res.ServiceErrors = errorDigest(dir)
	h.teardown(cleanup)
	h.mu.Lock()
	res.Timeline = append([]string(nil), h.timeline...)
	h.mu.Unlock()
	res.Elapsed = time.Since(h.begun)
	// A directory given with --dir is never removed.
	res.Kept = o.Keep || o.Dir != "" || res.Report.Failed()
	if !res.Kept {
		_ = os.RemoveAll(dir)
	}
	return res, nil
}

func withApp(u, app string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := p.Query()
	q.Set("application_name", app)
	p.RawQuery = q.Encode()
	return p.String()
}

func (h *harness) setup(ctx context.Context) error {
	o := h.o
	var err error
	if o.DatabaseURL != "" {
		h.dbURL = o.DatabaseURL
	} else {
		h.logf("starting Postgres (own cluster)")
		pg, err := pgcluster.Start(ctx, filepath.Join(h.dir, "pg"), pgcluster.Options{})
		if err != nil {
			return err
		}
		h.pg = pg
		if err := dbadmin.DatabaseCreate(ctx, pg.AdminURL(), dbName, ""); err != nil {
			return err
		}
		if h.dbURL, err = dbadmin.DatabaseURL(pg.AdminURL(), dbName); err != nil {
			return err
		}
		if _, err := migrate.Up(ctx, h.dbURL); err != nil {
			return err
		}
	}

	natsURL := o.NATSURL
	if natsURL == "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		h.ns = &natsServer{exe: o.Exe, port: port, log: filepath.Join(h.dir, "nats.log")}
		switch o.NATSServer {
		case "":
			h.ns.bin = NATSBinary()
		case "embedded":
		default:
			h.ns.bin = o.NATSServer
		}
		which := h.ns.bin
		if which == "" {
			which = "embedded server in a child process"
		}
		if o.NATSDefaults {
			if h.ns.bin == "" {
				return errors.New("chaos: --nats-defaults needs a nats-server binary (--nats-server, or one installed)")
			}
			h.ns.defaults = true
			which += ", default pings"
		}
		h.logf("starting NATS on %s (%s)", h.ns.url(), which)
		if err := h.ns.start(ctx); err != nil {
			return err
		}
		natsURL = h.ns.url()
	}
	h.natsURL = natsURL

	pool, err := store.Connect(ctx, withApp(h.dbURL, "kagzi-chaos"))
	if err != nil {
		return err
	}
	h.pool, h.st = pool, store.New(pool, store.Options{})
	h.nc, err = nats.Connect(natsURL, nats.Name("kagzi-chaos"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	h.cl, err = client.NewFromStore(h.st, h.nc, client.Options{Namespace: Namespace, Queue: Queue})
	if err != nil {
		return err
	}

	h.common = []string{
		"KAGZI_NATS_URL=" + natsURL, "KAGZI_LOG_LEVEL=" + o.LogLevel,
		"KAGZI_NAMESPACE=" + Namespace, "KAGZI_QUEUE=" + Queue,
		"KAGZI_LEASE=" + o.Lease.String(),
		"KAGZI_WORKER_TIMEOUT=" + o.WorkerTimeout.String(),
		"KAGZI_HEARTBEAT_INTERVAL=" + o.HeartbeatInterval.String(),
		// Flushes at most a third of the lease; the grace is at least two
		// flushes and less than the lease.
		"KAGZI_FLUSH_INTERVAL=" + min(time.Second, o.Lease/3).String(),
		"KAGZI_LEASE_GRACE=" + max(2*min(time.Second, o.Lease/3), min(4*time.Second, o.Lease/2)).String(),
		"KAGZI_DRAIN_TIMEOUT=1s",
		"KAGZI_MAX_CONCURRENCY=" + fmt.Sprint(o.Concurrency),
		testflows.ChaosDirEnv + "=" + h.dir,
		modeltest.DirEnv + "=" + h.dir,
		"OTEL_SDK_DISABLED=true",
	}

	relayUp := make(chan struct{}, 16)
	sub, err := h.nc.Subscribe(protocol.SubjectRelayUp, func(*nats.Msg) {
		select {
		case relayUp <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		return err
	}
	for i := 0; i < o.Dispatchers; i++ {
		if _, err := h.spawn(fmt.Sprintf("dispatcher-%d", i), "dispatcher"); err != nil {
			return err
		}
	}
	select {
	case <-relayUp:
	case <-time.After(30 * time.Second):
		return errors.New("chaos: no dispatcher relay came up within 30 s")
	case <-ctx.Done():
		return ctx.Err()
	}
	for i := 0; i < o.Schedulers; i++ {
		if _, err := h.spawn(fmt.Sprintf("scheduler-%d", i), "scheduler"); err != nil {
			return err
		}
	}
	rp, err := h.spawn("reaper-0", "reaper")
	if err != nil {
		return err
	}
	if err := h.waitReadyz(ctx, rp, "reaper: leader", 30*time.Second); err != nil {
		return err
	}
	var pids []int
	regs, unsub, err := h.registrations()
	if err != nil {
		return err
	}
	defer unsub()
	for i := 0; i < o.Workers; i++ {
		p, err := h.spawn(fmt.Sprintf("worker-%d", i), "worker")
		if err != nil {
			return err
		}
		pids = append(pids, p.pid)
	}
	if err := waitRegistered(ctx, regs, pids, 30*time.Second); err != nil {
		return err
	}
	h.logf("services up: %d dispatchers, %d schedulers, 1 reaper, %d workers", o.Dispatchers, max(o.Schedulers, 0), o.Workers)
	return nil
}
