package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	workersvc "github.com/kagzi/kagzi/services/worker"
	"github.com/kagzi/kagzi/tests/pgcluster"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The Postgres failover tests run the dispatcher, the reaper and the
// scheduler as processes of their own, given a URL that lists a primary
// and its streaming standby with target_session_attrs=read-write, as
// docs/deployment.md's "Postgres failover" tells operators to; a worker (NATS only)
// and a client run in the test. Mid-load the primary crashes (immediate
// shutdown: no checkpoint, every session cut) and the standby is
// promoted. The services must ride through: their pools reconnect to the
// new primary, the relay LISTENs there and announces itself (every
// consumer reads its backlog again), the reaper is elected again.

// envHAFull runs the long and heavy Postgres failover cases (make test-ha).
const envHAFull = "KAGZI_HA_FULL"

const (
	// pgHARate is the pace of starts (runs per second) during the load.
	pgHARate = 20
	// haSteps is the number of steps of each run.
	haSteps = 3
	// haRecoveryMargin is how much longer than the fault (the failover
	// from crash to promotion, or the stall) the engine may take to start
	// and complete steps again.
	haRecoveryMargin = 5 * time.Second
)

// haFull skips t unless KAGZI_HA_FULL is set.
func haFull(t *testing.T) {
	t.Helper()
	if os.Getenv(envHAFull) == "" {
		t.Skipf("a long Postgres fault case: set %s=1 (make test-ha) to run it", envHAFull)
	}
}

// haTools skips t when the Postgres server binaries a throwaway cluster
// and its standby need are not installed.
func haTools(t *testing.T) {
	t.Helper()
	skipUnderAuth(t)
	bin, err := pgcluster.Bindir()
	if err != nil {
		t.Skipf("no Postgres server binaries to run a throwaway primary and standby: %v", err)
	}
	for _, tool := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Skipf("%s is missing from %s (install the postgresql server package)", tool, bin)
		}
	}
}

// haPair is a throwaway primary and, if asked for, its streaming standby.
type haPair struct {
	dir              string
	primary, standby *pgcluster.Cluster
	// admin is a store on the primary's kagzi database, for what the test
	// reads and does besides the services.
	admin *store.Store
	// oldPort is where the primary listened.
	oldPort int
}

// newHAPair starts a durable primary, a standby of it (synchronous if
// sync: the primary waits for it on every commit) and a migrated kagzi
// database. Both are stopped when t ends.
func newHAPair(t *testing.T, ctx context.Context, standby, sync bool) *haPair {
	t.Helper()
	dir, err := os.MkdirTemp("", "kagzi-ha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The clusters' directories below it belong to the postgres user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	settings := append([]string(nil), pgcluster.Durable...)
	if sync {
		settings = append(settings, "synchronous_standby_names=kagzi_standby")
	}
	p := &haPair{dir: dir}
	p.primary, err = pgcluster.Start(ctx, filepath.Join(dir, "primary"), pgcluster.Options{Settings: settings})
	if err != nil {
		t.Fatalf("throwaway primary: %v", err)
	}
	p.oldPort = p.primary.Port()
	haStopAtEnd(t, p.primary)
	if standby {
		p.standby, err = p.primary.Standby(ctx, filepath.Join(dir, "standby"), pgcluster.StandbyOptions{Name: "kagzi_standby",
			Settings: pgcluster.Durable})
		if err != nil {
			t.Fatalf("standby: %v", err)
		}
		haStopAtEnd(t, p.standby)
	}
	if err := dbadmin.DatabaseCreate(ctx, p.primary.AdminURL(), "kagzi", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, p.url()); err != nil {
		t.Fatal(err)
	}
	pool, err := store.Connect(ctx, p.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p.admin = store.New(pool, store.Options{})
	if standby {
		// The standby streams (and, if sync, is the one waited for).
		waitUntil(t, 30*time.Second, "the standby to stream", func() bool {
			streaming, synchronous, err := p.admin.ReplicationStandbys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return streaming == 1 && (!sync || synchronous == 1)
		})
	}
	return p
}

// haStopAtEnd stops c (immediately: nothing in it outlives the test) when
// t ends.
func haStopAtEnd(t *testing.T, c *pgcluster.Cluster) {
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Kill(sctx) // an error: already stopped
	})
}

// url is the multi-host URL of the kagzi database: the primary first, then
// the standby, for a read-write session.
func (p *haPair) url() string {
	hosts := fmt.Sprintf("%s:%d", p.primary.Host(), p.oldPort)
	if p.standby != nil {
		hosts += fmt.Sprintf(",%s:%d", p.standby.Host(), p.standby.Port())
	}
	return "postgres://postgres@" + hosts + "/kagzi?sslmode=disable&target_session_attrs=read-write&connect_timeout=5"
}

// failover crashes the primary and promotes the standby; it returns when
// the crash began and how long the failover took (until the standby
// accepted writes). With lag, the standby first falls behind for that
// long: the primary's WAL sender is stopped (SIGSTOP), and the primary then
// dies at once (SIGKILL of every process) with what it committed since
// unsent, as an asynchronous standby lags behind a busy primary when it
// crashes. Without, the primary stops in immediate mode.
func (p *haPair) failover(t *testing.T, ctx context.Context, lag time.Duration) (time.Time, time.Duration) {
	t.Helper()
	crash := p.primary.Kill
	if lag > 0 {
		sender, err := p.primary.Process("walsender")
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lag) // the fault's own duration
		crash = p.primary.Crash
	}
	at := time.Now()
	if err := crash(ctx); err != nil {
		t.Fatalf("crash the primary: %v", err)
	}
	if err := p.standby.Promote(ctx); err != nil {
		t.Fatalf("promote the standby: %v", err)
	}
	return at, time.Since(at)
}

// haServices are the service processes on a pair, and the test's worker
// and client.
type haServices struct {
	dispatcher, reaper, scheduler *child
	worker                        *worker.Worker
	cl                            *client.Client
	rec                           *haRecorder
}

// startHAServices starts the services as processes, with url for both
// their pooled and their session connections, and a worker and a client
// in the test (the client's pool on url too). The reaper declares a
// worker dead after 3 s and releases the runs a live worker does not hold
// after 1 s, unless extraEnv (which comes last, and wins) says otherwise.
func startHAServices(t *testing.T, ctx context.Context, url string, nsrv *testnats.Server, extraEnv ...string) *haServices {
	t.Helper()
	env := append([]string{"KAGZI_DATABASE_URL=" + url, "KAGZI_DATABASE_SESSION_URL=" + url, "KAGZI_NATS_URL=" + nsrv.URL(),
		"KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info", "KAGZI_WORKER_TIMEOUT=3s", "KAGZI_FLUSH_INTERVAL=100ms", "KAGZI_LEASE_GRACE=1s"}, extraEnv...)
	s := &haServices{rec: newHARecorder()}
	s.dispatcher = startChild(t, "dispatcher", env, "dispatcher")
	s.reaper = startChild(t, "reaper", env, "reaper")
	s.scheduler = startChild(t, "scheduler", env, "scheduler")
	if _, err := s.dispatcher.await(ctx, "relay is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatalf("dispatcher: %v", err)
	}
	if _, err := s.reaper.await(ctx, "reaper is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatalf("reaper: %v", err)
	}

	wcfg := defaults[workersvc.Config](t)
	wcfg.MaxConcurrency = 50
	nc := nsrv.Connect(t, worker.Inbox(wcfg.Namespace, wcfg.Identity))
	w, err := workersvc.New(wcfg, nc, nil, s.rec.register)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s.worker = w

	pool, err := store.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.cl, err = client.NewFromStore(store.New(pool, store.Options{}), nsrv.Connect(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cl.Close)
	return s
}

// haRecorder counts the executions of each step and when steps started
// and completed in the worker.
type haRecorder struct {
	mu       sync.Mutex
	executed map[string]int // run/step → executions of its function
	events   []time.Time    // step starts and completions
	// returned is when the run's function last returned its output.
	returned map[uuid.UUID]time.Time
	// work is how long each step takes.
	work time.Duration
}

func newHARecorder() *haRecorder {
	return &haRecorder{executed: map[string]int{}, returned: map[uuid.UUID]time.Time{}, work: 5 * time.Millisecond}
}

// register adds workflow HA: haSteps steps, step i of input n returning
// n*10+i; the output is their sum.
func (r *haRecorder) register(w *worker.Worker) error {
	return worker.Register(w, "HA", func(ctx workflow.Context, n int) (int, error) {
		sum := 0
		for i := 0; i < haSteps; i++ {
			v, err := workflow.Step(ctx, fmt.Sprintf("s%d", i), func(sctx context.Context) (int, error) {
				info, _ := workflow.StepInfoFrom(sctx)
				r.mu.Lock()
				r.executed[info.RunID+"/"+info.StepID]++
				r.events = append(r.events, time.Now())
				r.mu.Unlock()
				// Work, so that steps are in flight when Postgres
				// fails.
				time.Sleep(r.work)
				r.mu.Lock()
				r.events = append(r.events, time.Now())
				r.mu.Unlock()
				return n*10 + i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += v
		}
		r.mu.Lock()
		r.returned[ctx.RunID()] = time.Now()
		r.mu.Unlock()
		return sum, nil
	})
}

// haOutput is the output of run HA of input n.
func haOutput(n int) string { return fmt.Sprint(n*10*haSteps + haSteps*(haSteps-1)/2) }

// reexecuted counts the steps whose function ran more than once.
func (r *haRecorder) reexecuted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.executed {
		if c > 1 {
			n++
		}
	}
	return n
}

// longestGap returns the longest time without a step starting or
// completing between from and to, and when it began.
func (r *haRecorder) longestGap(from, to time.Time) (time.Duration, time.Time) {
	r.mu.Lock()
	ev := append([]time.Time(nil), r.events...)
	r.mu.Unlock()
	sort.Slice(ev, func(i, j int) bool { return ev[i].Before(ev[j]) })
	var gap time.Duration
	var at time.Time
	prev := from
	for _, e := range ev {
		if e.Before(from) || e.After(to) {
			continue
		}
		if d := e.Sub(prev); d > gap {
			gap, at = d, prev
		}
		prev = e
	}
	return gap, at
}

// pgHALoad starts runs of HA at pgHARate per second through the client, each
// start on its own (a start that waits for Postgres holds up no other),
// and keeps the acknowledged ones.
type pgHALoad struct {
	mu      sync.Mutex
	acked   map[int]*client.Handle // input → handle
	refused int                    // starts that returned an error
	wg      sync.WaitGroup
	begun   time.Time
}

// runHALoad starts runs for d in the background (wait waits for them).
func runHALoad(ctx context.Context, cl *client.Client, d time.Duration) *pgHALoad {
	l := &pgHALoad{acked: map[int]*client.Handle{}, begun: time.Now()}
	l.wg.Add(1)
	go l.run(ctx, cl, d)
	return l
}

// run paces the starts for d.
func (l *pgHALoad) run(ctx context.Context, cl *client.Client, d time.Duration) {
	defer l.wg.Done()
	tick := time.NewTicker(time.Second / pgHARate)
	defer tick.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		select {
		case <-end:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.wg.Add(1)
		go func(i int) {
			defer l.wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			h, err := cl.Start(sctx, "HA", i, client.StartOptions{})
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil {
				l.refused++
				return
			}
			l.acked[i] = h
		}(i)
	}
}

// wait returns once the load is over and every start returned.
func (l *pgHALoad) wait() { l.wg.Wait() }

// ackedCount is the number of acknowledged starts so far.
func (l *pgHALoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// haVerdict is what a fault did to the runs.
type haVerdict struct {
	acked, refused, lost, duplicates, failed, reexecuted int
	// missing counts the steps of completed runs without a result: an
	// asynchronous standby may lack results its primary acknowledged
	// while the run went on (its worker held them) and completed.
	missing int
}

// verify checks the acknowledged runs of l on the store st: a run found
// must complete (within limit) with the output of its input and at most
// one result per step, exactly one if strict; a run not found is lost.
// It returns the tally.
func verify(t *testing.T, ctx context.Context, st *store.Store, cl *client.Client, l *pgHALoad, rec *haRecorder, limit time.Duration, strict bool) haVerdict {
	t.Helper()
	l.mu.Lock()
	acked := make(map[int]*client.Handle, len(l.acked))
	for i, h := range l.acked {
		acked[i] = h
	}
	v := haVerdict{acked: len(acked), refused: l.refused}
	l.mu.Unlock()
	var found []*client.Handle
	for _, h := range acked {
		if _, err := cl.Get(ctx, h.RunID); errors.Is(err, client.ErrNotFound) {
			v.lost++
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		found = append(found, h)
	}
	waitAll(t, found, limit)
	for i, h := range acked {
		r, err := cl.Get(ctx, h.RunID)
		if errors.Is(err, client.ErrNotFound) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if r.Status != client.StatusCompleted {
			v.failed++
			t.Errorf("run %d: status %s (%s)", i, r.Status, r.Error)
			continue
		}
		if got := strings.TrimSpace(string(r.Output)); got != haOutput(i) {
			t.Errorf("run %d: output %s, want %s", i, got, haOutput(i))
		}
		ss, err := st.StepsList(ctx, r.Namespace, h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		results := map[string]int{}
		var rows []string
		for _, s := range ss {
			rows = append(rows, fmt.Sprintf("%s#%d %s latest=%v", s.StepID, s.Attempt, s.Status, s.IsLatest))
			if s.IsLatest && s.Status == store.StepCompleted {
				results[s.StepID]++
			}
		}
		for j := 0; j < haSteps; j++ {
			switch n := results[fmt.Sprintf("s%d", j)]; {
			case n == 0:
				v.missing++
				if strict {
					t.Errorf("run %d step s%d: no completed result (steps: %s)", i, j, strings.Join(rows, ", "))
				}
			case n > 1:
				v.duplicates++
				t.Errorf("run %d step s%d: %d completed results, want 1 (steps: %s)", i, j, n, strings.Join(rows, ", "))
			}
		}
	}
	v.reexecuted = rec.reexecuted()
	return v
}

// liveRuns lists the runs of st that have not finished.
func liveRuns(t *testing.T, ctx context.Context, st *store.Store) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	p := store.RunsListParams{Namespace: "default", Statuses: []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusSleeping}, Limit: 500}
	for {
		runs, next, err := st.RunsList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if next == nil {
			return ids
		}
		p.After = next
	}
}

// awaitNoLiveRuns fails t unless every run in st finishes within limit:
// nothing wedges, acknowledged or not (a start whose acknowledgement was
// lost with the primary may have committed).
func awaitNoLiveRuns(t *testing.T, ctx context.Context, st *store.Store, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		live := liveRuns(t, ctx, st)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still live %v after the fault (first %s)", len(live), limit, live[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// haFailover is the body of the failover cases: load for loadFor, the
// primary crashed (and the standby promoted) once a quarter of it went
// by, and every acknowledged run checked.
// pgHACase is a failover case.
type pgHACase struct {
	sync    bool          // the standby is synchronous
	loadFor time.Duration // how long runs are started
	lag     time.Duration // how long the standby lags before the crash (haPair.failover)
	work    time.Duration // how long each step takes (default 5 ms)
	env     []string      // extra settings of the services
}

func haFailover(t *testing.T, c pgHACase) (*haPair, *haServices, *testnats.Server, haVerdict) {
	t.Helper()
	haTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	pair := newHAPair(t, ctx, true, c.sync)
	nsrv := testnats.Start(t)
	svc := startHAServices(t, ctx, pair.url(), nsrv, c.env...)
	if c.work > 0 {
		svc.rec.work = c.work
	}
	loadFor := c.loadFor

	load := runHALoad(ctx, svc.cl, loadFor)
	want := int(loadFor.Seconds() * pgHARate / 4)
	waitUntil(t, loadFor, "a quarter of the load to be acknowledged", func() bool { return load.ackedCount() >= want })
	acked := load.ackedCount()
	crash, took := pair.failover(t, ctx, c.lag)
	if c.lag > 0 {
		t.Logf("primary crashed with %d starts acknowledged, %d of them while the standby lagged; the standby accepted writes %.2f s later",
			load.ackedCount(), load.ackedCount()-acked, took.Seconds())
	} else {
		t.Logf("primary crashed with %d starts acknowledged; the standby accepted writes %.2f s later", load.ackedCount(), took.Seconds())
	}
	// Runs whose function had returned before the crash, live on the new
	// primary: their completion was in flight, or committed on the old
	// primary and lost with it (an asynchronous standby's lag).
	var undone []uuid.UUID
	svc.rec.mu.Lock()
	for _, id := range liveRuns(t, ctx, pair.admin) {
		if at, ok := svc.rec.returned[id]; ok && at.Before(crash) {
			undone = append(undone, id)
		}
	}
	svc.rec.mu.Unlock()

	// Each leader is elected again on the new primary.
	for _, e := range []struct {
		c   *child
		msg string
	}{{svc.dispatcher, "relay is leader"}, {svc.reaper, "reaper is leader"}} {
		at, err := e.c.awaitSince(ctx, e.msg, crash, took+30*time.Second)
		if err != nil {
			t.Fatalf("%s after the failover: %v", e.c.name, err)
		}
		t.Logf("%s: %q %.2f s after the crash", e.c.name, e.msg, at.Sub(crash).Seconds())
	}

	load.wait()
	v := verify(t, ctx, pair.admin, svc.cl, load, svc.rec, 60*time.Second, c.sync)
	awaitNoLiveRuns(t, ctx, pair.admin, 60*time.Second)
	var redone time.Time
	for _, id := range undone {
		r, err := svc.cl.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.FinishedAt != nil && r.FinishedAt.After(redone) {
			redone = *r.FinishedAt
		}
	}
	if len(undone) > 0 {
		t.Logf("%d runs whose function returned before the crash were live on the new primary; all completed %.2f s after the crash",
			len(undone), redone.Sub(crash).Seconds())
	} else {
		t.Logf("no run whose function returned before the crash was live on the new primary")
	}
	gap, gapAt := svc.rec.longestGap(load.begun, time.Now())
	kind := map[bool]string{true: "sync", false: "async"}[c.sync]
	t.Logf("%s failover %.2f s: %d starts acknowledged, %d refused; lost %d, duplicate results %d, failed %d, steps re-executed %d, "+
		"step results missing from completed runs %d; longest gap in steps %.2f s (from %.2f s after the crash)",
		kind, took.Seconds(), v.acked, v.refused, v.lost, v.duplicates, v.failed, v.reexecuted, v.missing, gap.Seconds(), gapAt.Sub(crash).Seconds())
	if bound := took + haRecoveryMargin; gap > bound {
		t.Errorf("steps stopped for %v, want at most the failover's %v + %v", gap, took, haRecoveryMargin)
	}
	return pair, svc, nsrv, v
}

// TestHAPostgresSyncFailover crashes a primary whose commits wait for its
// synchronous standby, mid-load, and promotes the standby: every start
// the client acknowledged is on the standby, so every run completes, with
// one result per step, and steps resume within the failover plus
// haRecoveryMargin. A step may run again (its report was in flight when
// the primary crashed): at-least-once steps; the count is logged.
func TestHAPostgresSyncFailover(t *testing.T) {
	loadFor := 6 * time.Second
	if os.Getenv(envHAFull) != "" {
		loadFor = 20 * time.Second
	}
	_, _, _, v := haFailover(t, pgHACase{sync: true, loadFor: loadFor})
	if v.lost != 0 {
		t.Errorf("%d acknowledged starts lost with a synchronous standby, want 0", v.lost)
	}
}

// TestHAPostgresAsyncFailover is TestHAPostgresSyncFailover with an
// asynchronous standby: what the primary acknowledged and had not yet
// streamed is gone after the promotion (starts, claims, step results,
// completions), and the standby lags for a second before the crash so
// that there is some. A start so lost is lost. A run whose claim or
// completion is lost runs again (the reaper releases the runs no live
// worker holds), its lost step results re-executed. A run its worker
// still holds goes on and completes: the step results it reported during
// the lag are missing from its history (counted; its output is whole).
// Nothing may wedge: every run on the new primary completes, with at most
// one result per step.
func TestHAPostgresAsyncFailover(t *testing.T) {
	haFull(t)
	// Steps take long enough that runs claimed before the standby lagged
	// report during the lag. The reaper runs with its defaults: the lease
	// grace after which it releases the runs their live worker does not
	// hold (10 s) is what the runs whose completion was lost wait for.
	haFailover(t, pgHACase{loadFor: 20 * time.Second, lag: time.Second, work: 500 * time.Millisecond,
		env: []string{"KAGZI_WORKER_TIMEOUT=6s", "KAGZI_FLUSH_INTERVAL=2s", "KAGZI_LEASE_GRACE=10s"}})
}

// TestHAPostgresOldPrimaryReturns follows a synchronous failover with the
// old primary's host coming back as a standby of the new primary (a fresh
// base backup on the old port: read-only), first in every URL. The
// services then start again: every session they open, their pools' and
// their leaders', must skip the read-only host (target_session_attrs),
// and a new load must complete.
func TestHAPostgresOldPrimaryReturns(t *testing.T) {
	haFull(t)
	pair, svc, nsrv, _ := haFailover(t, pgHACase{sync: true, loadFor: 8 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	back, err := pair.standby.Standby(ctx, filepath.Join(pair.dir, "returned"), pgcluster.StandbyOptions{Name: "kagzi_old_primary",
		Port: pair.oldPort, Settings: pgcluster.Durable})
	if err != nil {
		t.Fatalf("old primary back as a standby: %v", err)
	}
	haStopAtEnd(t, back)
	// The URL's first host is now a standby.
	ro, err := store.Connect(ctx, strings.Replace(back.AdminURL(), "/postgres?", "/kagzi?", 1))
	if err != nil {
		t.Fatal(err)
	}
	inRecovery, err := store.New(ro, store.Options{}).ServerInRecovery(ctx)
	ro.Close()
	if err != nil || !inRecovery {
		t.Fatalf("the returned host is not a standby: in recovery %v, %v", inRecovery, err)
	}

	// The services start again (each process dies, and the worker and the
	// client go): every session they open, pooled or a leader's, goes
	// through a URL whose first host is now read-only.
	for _, c := range []*child{svc.dispatcher, svc.reaper, svc.scheduler} {
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	svc.worker.Stop()
	svc.cl.Close()
	again := time.Now()
	svc = startHAServices(t, ctx, pair.url(), nsrv)
	t.Logf("services started again, the old primary first in their URL: relay and reaper lead %.2f s after the start",
		time.Since(again).Seconds())
	load := runHALoad(ctx, svc.cl, 5*time.Second)
	load.wait()
	v := verify(t, ctx, pair.admin, svc.cl, load, svc.rec, 60*time.Second, true)
	if v.lost != 0 || v.refused != 0 {
		t.Errorf("with the old primary back as a standby: %d starts refused, %d lost, want 0 and 0", v.refused, v.lost)
	}
	t.Logf("old primary back as a standby, first in the URL: %d runs started and completed", v.acked)
}

// haStall is the body of the slow-Postgres cases: load on one durable
// cluster, stall applied once a quarter of it went by, every acknowledged
// run checked, and steps resumed within the stall plus haRecoveryMargin.
func haStall(t *testing.T, what string, stall func(ctx context.Context, pair *haPair) time.Duration) {
	t.Helper()
	haTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pair := newHAPair(t, ctx, false, false)
	nsrv := testnats.Start(t)
	svc := startHAServices(t, ctx, pair.url(), nsrv)
	const loadFor = 12 * time.Second
	load := runHALoad(ctx, svc.cl, loadFor)
	waitUntil(t, loadFor, "a quarter of the load to be acknowledged", func() bool { return load.ackedCount() >= int(loadFor.Seconds()*pgHARate/4) })
	at := time.Now()
	took := stall(ctx, pair)
	load.wait()
	v := verify(t, ctx, pair.admin, svc.cl, load, svc.rec, 60*time.Second, true)
	awaitNoLiveRuns(t, ctx, pair.admin, 30*time.Second)
	gap, gapAt := svc.rec.longestGap(load.begun, time.Now())
	t.Logf("%s for %.2f s: %d starts acknowledged, %d refused; lost %d, duplicate results %d, steps re-executed %d; "+
		"longest gap in steps %.2f s (from %.2f s after the stall began)",
		what, took.Seconds(), v.acked, v.refused, v.lost, v.duplicates, v.reexecuted, gap.Seconds(), gapAt.Sub(at).Seconds())
	if v.lost != 0 || v.refused != 0 {
		t.Errorf("%s: %d starts refused, %d acknowledged ones lost, want 0 and 0", what, v.refused, v.lost)
	}
	if bound := took + haRecoveryMargin; gap > bound {
		t.Errorf("steps stopped for %v, want at most the stall's %v + %v", gap, took, haRecoveryMargin)
	}
}

// haStallFor is how long the slow-Postgres cases stall it.
const haStallFor = 2 * time.Second

// TestHAPostgresLockStall holds an exclusive lock on the runs table for
// haStallFor mid-load (a careless migration): starts, claims and reports
// wait behind it; nothing is lost and steps resume once it goes.
func TestHAPostgresLockStall(t *testing.T) {
	haFull(t)
	haStall(t, "runs table locked", func(ctx context.Context, pair *haPair) time.Duration {
		at := time.Now()
		if err := pair.admin.RunsHold(ctx, haStallFor); err != nil {
			t.Fatalf("lock the runs table: %v", err)
		}
		return time.Since(at)
	})
}

// TestHAPostgresIOStall stops every process of the server (SIGSTOP) for
// haStallFor mid-load, as a stalled disk or a paused VM does: connections
// stay open and nothing answers. Nothing is lost and steps resume once
// it goes on (SIGCONT).
func TestHAPostgresIOStall(t *testing.T) {
	haFull(t)
	haStall(t, "Postgres stopped", func(ctx context.Context, pair *haPair) time.Duration {
		pids, err := pair.primary.Processes()
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		time.Sleep(haStallFor) // the fault's own duration
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		return time.Since(at)
	})
}

// awaitSince returns when the child logs msg after after (what it logged
// before, e.g. as the leader it was, does not count); it fails if the
// child exits, or does not log it within limit.
func (c *child) awaitSince(ctx context.Context, msg string, after time.Time, limit time.Duration) (time.Time, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	seen := 0
	for {
		c.mu.Lock()
		lines, changed := c.lines[seen:], c.changed
		seen = len(c.lines)
		c.mu.Unlock()
		for _, l := range lines {
			if l.msg == msg && !l.at.Before(after) {
				return l.at, nil
			}
		}
		select {
		case <-changed:
		case <-c.exited:
			return time.Time{}, fmt.Errorf("exited (%v) without logging %q", c.err, msg)
		case <-timer.C:
			return time.Time{}, fmt.Errorf("did not log %q within %v", msg, limit)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// envConsoleRuns sets the number of finished runs
// TestHAPostgresReplicaConsole reads (default haConsoleRuns).
const envConsoleRuns = "KAGZI_HA_CONSOLE_RUNS"

// haConsoleRuns is the default history of TestHAPostgresReplicaConsole.
const haConsoleRuns = 200_000

// TestHAPostgresReplicaConsole times the console's run listing, its
// counts and its queue statistics (the statements behind the runs page)
// on a streaming standby and on its primary, over a history of finished
// runs: what a console pointed at a replica costs, and whether the replica
// answers as fast. A figure for the docs rather than a bound: it fails
// only if the standby cannot answer or answers differently.
func TestHAPostgresReplicaConsole(t *testing.T) {
	haFull(t)
	haTools(t)
	runs := haConsoleRuns
	if v := os.Getenv(envConsoleRuns); v != "" {
		if _, err := fmt.Sscan(v, &runs); err != nil || runs < 1 {
			t.Fatalf("%s=%q: want a positive number", envConsoleRuns, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pair := newHAPair(t, ctx, true, false)
	at := time.Now()
	before := at.Add(-24 * time.Hour)
	const chunk = 100_000
	for from := 0; from < runs; from += chunk {
		n := min(chunk, runs-from)
		if _, err := pair.admin.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "default", Queue: "default", Type: "Order",
			From: int64(from), Count: int64(n), Before: before.Add(-time.Duration(from) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d finished runs inserted in %.1f s", runs, time.Since(at).Seconds())

	replicaURL := fmt.Sprintf("postgres://postgres@%s:%d/kagzi?sslmode=disable", pair.standby.Host(), pair.standby.Port())
	pool, err := store.Connect(ctx, replicaURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	replica := store.New(pool, store.Options{})
	want, err := pair.admin.RunsCount(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Minute, "the standby to replay the history", func() bool {
		got, err := replica.RunsCount(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})

	const repeat = 50
	time1 := func(fn func() error) (p50, p99 time.Duration) {
		if err := fn(); err != nil { // warm the caches
			t.Fatal(err)
		}
		d := make([]time.Duration, repeat)
		for i := range d {
			at := time.Now()
			if err := fn(); err != nil {
				t.Fatal(err)
			}
			d[i] = time.Since(at)
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[repeat/2], d[repeat*99/100]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// Twice each, alternately: what the first round meets (autovacuum
	// analysing the new history, cold caches) is the first round's.
	type side struct {
		name string
		st   *store.Store
	}
	for round, side := range []side{{"primary", pair.admin}, {"standby", replica}, {"primary", pair.admin}, {"standby", replica}} {
		listP50, listP99 := time1(func() error {
			_, _, err := side.st.RunsList(ctx, store.RunsListParams{Namespace: "default"})
			return err
		})
		doneP50, doneP99 := time1(func() error {
			_, _, err := side.st.RunsList(ctx, store.RunsListParams{Namespace: "default", Statuses: []store.RunStatus{store.StatusCompleted}, Type: "Order"})
			return err
		})
		countP50, countP99 := time1(func() error {
			_, err := side.st.RunsCount(ctx, "default")
			return err
		})
		statsP50, statsP99 := time1(func() error {
			_, err := side.st.RunsQueueStats(ctx, "default")
			return err
		})
		t.Logf("round %d, %s, %d finished runs, p50/p99 of %d: run list first page %.2f/%.2f ms; completed of a type %.2f/%.2f ms; "+
			"counts by status %.2f/%.2f ms; queue statistics %.2f/%.2f ms",
			round/2+1, side.name, runs, repeat, ms(listP50), ms(listP99), ms(doneP50), ms(doneP99), ms(countP50), ms(countP99), ms(statsP50), ms(statsP99))
	}
}
