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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
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

// registrations subscribes to worker registrations (pids).
func (h *harness) registrations() (<-chan int, func(), error) {
	ch := make(chan int, 64)
	sub, err := h.nc.Subscribe(protocol.SubjectWorkerRegisterAll, func(m *nats.Msg) {
		var r protocol.WorkerRegister
		if protocol.Decode(m.Data, &r) == nil {
			select {
			case ch <- r.PID:
			default:
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := h.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, err
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}

func waitRegistered(ctx context.Context, regs <-chan int, pids []int, limit time.Duration) error {
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	timeout := time.After(limit)
	for len(want) > 0 {
		select {
		case pid := <-regs:
			delete(want, pid)
		case <-timeout:
			return fmt.Errorf("chaos: %d of %d workers did not register within %v", len(want), len(pids), limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (h *harness) waitReadyz(ctx context.Context, p *proc, want string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if strings.Contains(p.readyz(ctx), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s's /readyz did not say %q within %v", p.name, want, limit)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// spawn starts the service role in slot (replacing what ran there) and
// watches it: a process that exits without being killed or stopped on
// purpose is a problem, and is restarted.
func (h *harness) spawn(slot, role string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := append(append(os.Environ(), h.common...), "KAGZI_HTTP_ADDR="+addr)
	if role != "worker" {
		env = append(env, "KAGZI_DATABASE_URL="+withApp(h.dbURL, "kagzi-"+role))
	} else if h.o.Model {
		env = append(env, "KAGZI_MAX_INLINE_RETRY="+inlineRetry(slot))
	}
	p, err := startProc(slot, role, filepath.Join(h.dir, slot+".log"), env, h.o.Exe, "serve", role)
	if err != nil {
		return nil, err
	}
	p.httpAddr = addr
	h.mu.Lock()
	h.slots[slot] = p
	h.mu.Unlock()
	h.monitors.Add(1)
	go h.monitor(slot, p)
	return p, nil
}

func (h *harness) monitor(slot string, p *proc) {
	defer h.monitors.Done()
	<-p.done
	if p.wasIntended() || h.stopping.Load() {
		return
	}
	h.problem("%s (pid %d) exited on its own after %.1fs: %v; last log lines: %s",
		slot, p.pid, time.Since(p.started).Seconds(), p.err, p.tail(3))
	time.Sleep(time.Second)
	h.mu.Lock()
	current := h.slots[slot] == p
	h.mu.Unlock()
	if current && !h.stopping.Load() {
		if _, err := h.spawn(slot, p.role); err != nil {
			h.problem("restart %s: %v", slot, err)
		}
	}
}

func (h *harness) slot(name string) *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots[name]
}

// slotsOf lists the slots of a role, sorted.
func (h *harness) slotsOf(role string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, p := range h.slots {
		if p.role == role {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// killAndRestart SIGKILLs the process in slot, waits pause, and starts
// a new one there.
func (h *harness) killAndRestart(ctx context.Context, slot, why string, pause time.Duration) {
	p := h.slot(slot)
	if p == nil || !p.alive() {
		h.problem("kill %s: not running", slot)
		return
	}
	p.kill()
	h.event("SIGKILL %s%s (pid %d)", slot, why, p.pid)
	if err := sleepCtx(ctx, pause); err != nil {
		return
	}
	np, err := h.spawn(slot, p.role)
	if err != nil {
		h.problem("restart %s: %v", slot, err)
		return
	}
	h.event("restarted %s (pid %d)", slot, np.pid)
}

// freeze stops the process in slot (SIGSTOP) for FreezeFor and lets it
// go on (SIGCONT): alive to the kernel, which keeps its sessions, locks and
// subscriptions, but making no progress.
func (h *harness) freeze(ctx context.Context, slot, why string) {
	if h.o.FreezeFor < 0 {
		return
	}
	p := h.slot(slot)
	if p == nil || !p.alive() {
		h.problem("freeze %s: not running", slot)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	h.event("SIGSTOP %s%s (pid %d) for %v", slot, why, p.pid, h.o.FreezeFor)
	// Resumed even when the run ends meanwhile, so it can be stopped.
	_ = sleepCtx(ctx, h.o.FreezeFor)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	h.event("SIGCONT %s (pid %d)", slot, p.pid)
}

// relayLeader returns the slot of the dispatcher whose /readyz says it
// relays ("" if none says so within ten seconds).
func (h *harness) relayLeader(ctx context.Context) string {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for _, s := range h.slotsOf("dispatcher") {
			if p := h.slot(s); p != nil && strings.Contains(p.readyz(ctx), "relay: leader") {
				return s
			}
		}
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			return ""
		}
	}
	return ""
}

// scenario drives the runs and the faults, then waits for every run to
// finish (or ctx to end).
func (h *harness) scenario(ctx context.Context) {
	o := h.o
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))

	// The every-second schedule, from now until the end of the chaos
	// phase.
	pol := &retry.Policy{MaxAttempts: -1, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second}
	sc, err := h.cl.CreateSchedule(ctx, "Chaos", testflows.ChaosInput{Steps: o.Steps}, client.ScheduleOptions{
		Cron: "* * * * * *", RetryPolicy: pol,
	})
	if err != nil {
		h.problem("create schedule: %v", err)
	} else {
		h.sched = &ScheduleData{ID: sc.ID, From: time.Now()}
	}
	h.t0ns.Store(time.Now().UnixNano())
	h.logf("chaos phase: %d runs over %v, worker SIGKILL every %v", o.Runs, o.Duration, o.KillEvery)

	end := h.t0().Add(o.Duration)
	stopProgress := make(chan struct{})
	defer close(stopProgress)
	go h.progress(ctx, stopProgress)
	var wg sync.WaitGroup
	wg.Add(3)
	driveRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	killRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	go func() { defer wg.Done(); h.drive(ctx, driveRng, pol) }()
	go func() { defer wg.Done(); h.killWorkers(ctx, killRng, end) }()
	go func() { defer wg.Done(); h.faults(ctx) }()
	if err := sleepCtx(ctx, time.Until(end)); err == nil && h.sched != nil {
		for {
			if _, err := h.cl.PauseSchedule(ctx, h.sched.ID); err == nil {
				break
			} else if ctx.Err() != nil {
				break
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
		// A fire time just before the pause may still be in flight.
		h.sched.To = time.Now().Add(-3 * time.Second)
		h.event("schedule paused")
	}
	wg.Wait()
	h.waitDone(ctx)
	// Give a zombie execution (one that lost its lease without knowing) a
	// moment to show itself in the logs.
	time.Sleep(2 * time.Second)
	if h.sched != nil && h.sched.To.IsZero() {
		h.sched.To = time.Now().Add(-3 * time.Second)
	}
}

// drive starts the runs, spread over the first 80% of the chaos phase, in
// batches; event runs get their event from a goroutine 0–500 ms after
// their start returned.
func (h *harness) drive(ctx context.Context, rng *rand.Rand, pol *retry.Policy) {
	defer h.startDone.Store(true)
	o := h.o
	span := o.Duration * 8 / 10
	const batch = 25
	failing := false
	for i := 0; i < o.Runs; i += batch {
		n := min(batch, o.Runs-i)
		reqs := make([]client.StartRequest, n)
		ins := make([]testflows.ChaosInput, n)
		for j := range reqs {
			in := testflows.ChaosInput{N: i + j + 1, Steps: o.Steps}
			if rng.Float64() < o.SleepFraction {
				in.SleepMS = 100 + rng.IntN(401)
			}
			if rng.Float64() < o.EventFraction {
				in.Event = true
			}
			ins[j] = in
			reqs[j] = client.StartRequest{Type: "Chaos", Input: in, Options: client.StartOptions{
				ExternalID: externalID(in.N), RetryPolicy: pol,
			}}
		}
		var hs []*client.Handle
		for {
			var err error
			hs, err = h.cl.StartMany(ctx, reqs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				h.problem("starting runs: stopped at run %d of %d: %v", i+1, o.Runs, ctx.Err())
				return
			}
			if !failing {
				h.logf("start failed (retrying; external ids make it idempotent): %v", err)
				failing = true
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
		if failing {
			h.logf("starts succeed again")
			failing = false
		}
		h.started.Add(int64(n))
		for j, hd := range hs {
			if ins[j].Event {
				h.sendEventLater(ctx, hd.RunID, ins[j].N, time.Duration(rng.IntN(501))*time.Millisecond)
			}
		}
		next := h.t0().Add(time.Duration(float64(span) * float64(i+n) / float64(o.Runs)))
		_ = sleepCtx(ctx, time.Until(next))
	}
}

func externalID(n int) string { return fmt.Sprintf("chaos-%d", n) }

func (h *harness) sendEventLater(ctx context.Context, id uuid.UUID, n int, after time.Duration) {
	h.events.Add(1)
	go func() {
		defer h.events.Done()
		if err := sleepCtx(ctx, after); err != nil {
			h.problem("event for run %s not sent: %v", id, err)
			return
		}
		for {
			_, err := h.cl.SendEvent(ctx, id, testflows.ChaosEventName, testflows.ChaosEvent{N: n})
			switch {
			case err == nil:
				return
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInvalidArgument):
				h.problem("event for run %s: %v", id, err)
				return
			case ctx.Err() != nil:
				h.problem("event for run %s not sent: %v", id, err)
				return
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
}

// killWorkers SIGKILLs a random worker every KillEvery until end, and
// starts a replacement at once.
func (h *harness) killWorkers(ctx context.Context, rng *rand.Rand, end time.Time) {
	t := time.NewTicker(h.o.KillEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.After(end) {
				h.event("stopped killing workers after %d kills", n)
				return
			}
		}
		slots := h.slotsOf("worker")
		var alive []*proc
		for _, s := range slots {
			if p := h.slot(s); p != nil && p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			continue
		}
		p := alive[rng.IntN(len(alive))]
		at := p.kill()
		n++
		h.mu.Lock()
		h.kills = append(h.kills, Kill{PID: p.pid, At: at})
		h.mu.Unlock()
		np, err := h.spawn(p.name, "worker")
		if err != nil {
			h.problem("replace %s: %v", p.name, err)
			continue
		}
		h.logf("SIGKILL %s (pid %d), replaced by pid %d", p.name, p.pid, np.pid)
	}
}

// faults kills the relay leader, a scheduler and the reaper once each,
// restarts NATS and restarts Postgres, spread over the chaos phase.
func (h *harness) faults(ctx context.Context) {
	d := h.o.Duration
	at := func(frac float64) error { return sleepCtx(ctx, time.Until(h.t0().Add(time.Duration(frac*float64(d))))) }

	if at(0.15) != nil {
		return
	}
	leader := h.relayLeader(ctx)
	if leader == "" {
		h.problem("no dispatcher's /readyz says relay: leader")
	} else {
		h.killAndRestart(ctx, leader, " (relay leader)", time.Second)
	}

	if at(0.22) != nil {
		return
	}
	if leader := h.relayLeader(ctx); leader != "" {
		h.freeze(ctx, leader, " (relay leader)")
	}

	if at(0.30) != nil {
		return
	}
	if h.slot("scheduler-0") != nil {
		h.killAndRestart(ctx, "scheduler-0", "", time.Second)
	}

	if at(0.38) != nil {
		return
	}
	h.freeze(ctx, "reaper-0", " (leader)")

	if at(0.45) != nil {
		return
	}
	h.killAndRestart(ctx, "reaper-0", " (leader)", time.Second)

	if at(0.52) != nil {
		return
	}
	if ws := h.slotsOf("worker"); len(ws) > 0 {
		h.freeze(ctx, ws[0], "")
	}
	if ss := h.slotsOf("scheduler"); len(ss) > 1 {
		h.freeze(ctx, ss[1], "")
	}

	if at(0.60) != nil {
		return
	}
	if h.ns == nil {
		h.event("NATS is not the run's own: not restarted")
	} else if p := h.ns.p; p != nil {
		p.kill()
		h.event("SIGKILL nats server (pid %d)", p.pid)
		if sleepCtx(ctx, time.Second) != nil {
			return
		}
		if err := h.ns.start(ctx); err != nil {
			h.problem("restart NATS: %v", err)
		} else {
			h.event("restarted nats server (pid %d)", h.ns.p.pid)
		}
	}

	if at(0.68) != nil {
		return
	}
	if leader := h.relayLeader(ctx); leader != "" {
		for _, d := range h.slotsOf("dispatcher") {
			if d != leader {
				h.freeze(ctx, d, " (not relaying)")
				break
			}
		}
	}

	if at(0.75) != nil {
		return
	}
	if h.pg == nil {
		h.event("Postgres is not the run's own: not restarted")
		return
	}
	from := time.Now()
	h.event("pg_ctl restart -m fast")
	err := h.pg.Restart(ctx)
	to := time.Now()
	h.mu.Lock()
	h.outages = append(h.outages, Window{From: from, To: to})
	h.mu.Unlock()
	if err != nil {
		h.problem("restart Postgres: %v", err)
		return
	}
	h.event("Postgres is back after %d ms", to.Sub(from).Milliseconds())
}

// progress prints the runs by status every 5 s until stop is closed.
func (h *harness) progress(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
		if counts, err := h.st.RunsCount(ctx, Namespace); err == nil {
			live := counts[store.StatusPending] + counts[store.StatusRunning] + counts[store.StatusSleeping]
			h.logf("started %d of %d; completed %d, failed %d, live %d (pending %d, running %d, sleeping %d)",
				h.started.Load(), h.o.Runs, counts[store.StatusCompleted], counts[store.StatusFailed], live,
				counts[store.StatusPending], counts[store.StatusRunning], counts[store.StatusSleeping])
		}
	}
}

// waitDone waits until every run was started and every run of the
// namespace finished.
func (h *harness) waitDone(ctx context.Context) {
	done := make(chan struct{})
	go func() { h.events.Wait(); close(done) }()
	for {
		counts, err := h.st.RunsCount(ctx, Namespace)
		if err == nil {
			live := counts[store.StatusPending] + counts[store.StatusRunning] + counts[store.StatusSleeping]
			eventsSent := false
			select {
			case <-done:
				eventsSent = true
			default:
			}
			if h.startDone.Load() && eventsSent && live == 0 && time.Since(h.t0()) > h.o.Duration {
				h.logf("every run finished: completed %d, failed %d, cancelled %d",
					counts[store.StatusCompleted], counts[store.StatusFailed], counts[store.StatusCancelled])
				return
			}
		}
		if sleepCtx(ctx, 500*time.Millisecond) != nil {
			if counts, err := h.st.RunsCount(context.WithoutCancel(ctx), Namespace); err == nil {
				h.problem("timed out (--timeout %v) with %d runs pending, %d running, %d sleeping",
					h.o.Timeout, counts[store.StatusPending], counts[store.StatusRunning], counts[store.StatusSleeping])
			} else {
				h.problem("timed out (--timeout %v)", h.o.Timeout)
			}
			return
		}
	}
}

// stopServices stops the workers (draining) and then the other services.
func (h *harness) stopServices() {
	h.stopping.Store(true)
	stopRole := func(roles ...string) {
		var wg sync.WaitGroup
		for _, role := range roles {
			for _, s := range h.slotsOf(role) {
				if p := h.slot(s); p != nil {
					wg.Add(1)
					go func() { defer wg.Done(); p.stop(15 * time.Second) }()
				}
			}
		}
		wg.Wait()
	}
	stopRole("worker")
	stopRole("dispatcher", "scheduler", "reaper")
	h.monitors.Wait()
}

// teardown stops whatever still runs: services, NATS, Postgres (once).
func (h *harness) teardown(ctx context.Context) {
	h.tornDown.Do(func() { h.teardownOnce(ctx) })
}

func (h *harness) teardownOnce(ctx context.Context) {
	h.stopServices()
	if h.cl != nil {
		h.cl.Close()
	}
	if h.nc != nil {
		h.nc.Close()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.ns != nil && h.ns.p != nil {
		h.ns.p.stop(5 * time.Second)
	}
	if h.pg != nil {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := h.pg.Stop(sctx); err != nil {
			fmt.Fprintf(h.o.Log, "chaos: stop Postgres: %v\n", err)
		}
	}
}
