package reaper_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The test binary doubles as a worker process (see runWorkerProcess).
const (
	envWorkerMode = "KAGZI_REAPER_TEST_WORKER"
	envNATS       = "KAGZI_REAPER_TEST_NATS"
	envFile       = "KAGZI_REAPER_TEST_FILE"
	// envHeartbeat overrides the worker process's heartbeat interval.
	envHeartbeat = "KAGZI_REAPER_TEST_HEARTBEAT"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWorkerMode) != "" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(m.Run())
}

// system is the whole engine in this process, as `kagzi dev` runs it,
// with no workers of its own.
type system struct {
	srv *devserver.Server
	cl  *client.Client
	nc  *nats.Conn
}

// startSystem starts it with the reaper's configuration at its defaults
// but for what setReaper changes.
func startSystem(t *testing.T, setReaper func(*reaper.Config)) *system {
	t.Helper()
	return startSystemWith(t, setReaper, nil)
}

// startSystemWith is startSystem with what setDispatcher (if not nil)
// changes in the dispatchers' configuration.
func startSystemWith(t *testing.T, setReaper func(*reaper.Config), setDispatcher func(*dispatcher.Config)) *system {
	t.Helper()
	return startSystemLogged(t, setReaper, setDispatcher, testLogger(t))
}

// startSystemLogged is startSystemWith, every service logging to log.
func startSystemLogged(t *testing.T, setReaper func(*reaper.Config), setDispatcher func(*dispatcher.Config), log *slog.Logger) *system {
	t.Helper()
	url := testdb.New(t)
	ns := testnats.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rcfg, err := config.Defaults[reaper.Config](ctx)
	if err != nil {
		t.Fatal(err)
	}
	setReaper(&rcfg)
	dcfg, err := config.Defaults[dispatcher.Config](ctx)
	if err != nil {
		t.Fatal(err)
	}
	if setDispatcher != nil {
		setDispatcher(&dcfg)
	}
	srv, err := devserver.Start(ctx, devserver.Options{DatabaseURL: url, NATSURL: ns.URL(), Workers: -1,
		Reaper: rcfg, Dispatcher: dcfg, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	nc := ns.Connect(t)
	cl, err := client.NewFromStore(srv.Store, nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	waitLeader(t, srv.Reapers...)
	eventually(t, 10*time.Second, "a relay is up", func() bool {
		for _, r := range srv.Relays {
			if r.IsLeader() {
				return true
			}
		}
		return false
	})
	return &system{srv: srv, cl: cl, nc: nc}
}

// startWorker runs an in-process worker on its own connection.
func (s *system) startWorker(t *testing.T, register func(*worker.Worker) error) *worker.Worker {
	t.Helper()
	nc, err := s.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{HeartbeatInterval: 200 * time.Millisecond, MaxConcurrency: 8,
		DrainTimeout: 30 * time.Second, WaitTimeout: 5 * time.Second, Logger: testLogger(t)}, nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := register(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// appendLine appends one line to path (O_APPEND: whole lines, even from
// two processes).
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// crashWorkflow has three steps that each append "<run> <step> <pid>" to
// path. With hang, step b hangs after appending (and announces itself on
// stdout), so the process can be killed in the middle of it.
func crashWorkflow(path string, hang bool) func(workflow.Context, int) (int, error) {
	step := func(ctx workflow.Context, id string) error {
		_, err := workflow.Step(ctx, id, func(sctx context.Context) (int, error) {
			if err := appendLine(path, fmt.Sprintf("%s %s %d", ctx.RunID(), id, os.Getpid())); err != nil {
				return 0, err
			}
			if hang && id == "b" {
				fmt.Printf("in-b %s\n", ctx.RunID())
				<-sctx.Done()
				return 0, sctx.Err()
			}
			return 1, nil
		})
		return err
	}
	return func(ctx workflow.Context, in int) (int, error) {
		for _, id := range []string{"a", "b", "c"} {
			if err := step(ctx, id); err != nil {
				return 0, err
			}
		}
		return in, nil
	}
}

// runWorkerProcess is the worker process the SIGKILL test starts and kills.
func runWorkerProcess() int {
	nc, err := nats.Connect(os.Getenv(envNATS))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hb := 200 * time.Millisecond
	if v := os.Getenv(envHeartbeat); v != "" {
		if hb, err = time.ParseDuration(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	w, err := worker.New(worker.Config{HeartbeatInterval: hb, MaxConcurrency: 8, WaitTimeout: 5 * time.Second}, nc)
	if err == nil {
		err = worker.Register(w, "Crash", crashWorkflow(os.Getenv(envFile), true))
	}
	if err == nil {
		// Poison announces itself and hangs: the test kills the process,
		// as a run that crashes its worker would.
		err = worker.Register(w, "Poison", func(ctx workflow.Context, _ int) (int, error) {
			fmt.Printf("poison %s\n", ctx.RunID())
			select {}
		})
	}
	if err == nil {
		err = w.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("started %s\n", w.ID())
	select {} // until killed
}

// workerProcess is the test binary running as a worker (runWorkerProcess).
type workerProcess struct {
	cmd *exec.Cmd
	id  uuid.UUID
	// next returns the process's next line of output.
	next func(what string) string
	// wait waits for the process to exit (once killed).
	wait func()
}

// startWorkerProcess starts a worker process on natsURL with the extra
// environment and waits until it says it started.
func startWorkerProcess(t *testing.T, natsURL string, env ...string) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envWorkerMode+"=1", envNATS+"="+natsURL), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitOnce sync.Once
	p := &workerProcess{cmd: cmd, wait: func() { waitOnce.Do(func() { _ = cmd.Wait() }) }}
	t.Cleanup(func() { _ = cmd.Process.Kill(); p.wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	p.next = func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("worker process exited before %s", what)
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("worker process: no %s", what)
		}
		return ""
	}
	id, ok := strings.CutPrefix(p.next("start"), "started ")
	if !ok {
		t.Fatalf("worker process did not say it started")
	}
	if p.id, err = uuid.Parse(id); err != nil {
		t.Fatal(err)
	}
	return p
}

// A worker process killed with SIGKILL in the middle of its runs: another
// worker completes them within the worker timeout plus a second, and the
// steps completed before the kill do not run again.
func TestKilledWorkerProcessRunsCompleteElsewhere(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = timeout, 100*time.Millisecond, 10*time.Second, time.Second
	})
	path := t.TempDir() + "/steps.log"
	proc := startWorkerProcess(t, s.srv.NATSURL, envFile+"="+path)
	cmd, next, wait := proc.cmd, proc.next, proc.wait

	ctx := context.Background()
	const n = 3
	var hs []*client.Handle
	for i := 0; i < n; i++ {
		h, err := s.cl.Start(ctx, "Crash", i, client.StartOptions{RetryPolicy: retryPolicy(5)})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	inB := map[string]bool{}
	for len(inB) < n {
		l := next("step b")
		if id, ok := strings.CutPrefix(l, "in-b "); ok {
			inB[id] = true
		}
	}
	// The survivor is up (and asking for work) before the kill.
	survivor := s.startWorker(t, func(w *worker.Worker) error {
		return worker.Register(w, "Crash", crashWorkflow(path, false))
	})

	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wait()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, h := range hs {
		if err := h.Result(wctx, nil); err != nil {
			t.Fatalf("run %s: %v", h.RunID, err)
		}
	}
	took := time.Since(killed)
	t.Logf("all %d runs of the killed worker completed %v after the kill (worker timeout %v)", n, took, timeout)
	if took > timeout+time.Second {
		t.Fatalf("runs completed %v after the kill, want within %v", took, timeout+time.Second)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	byPID := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("bad line %q", l)
		}
		count[f[0]+" "+f[1]]++
		byPID[f[0]+" "+f[1]+" "+f[2]] = l
	}
	me := fmt.Sprint(os.Getpid())
	child := fmt.Sprint(cmd.Process.Pid)
	for _, h := range hs {
		id := h.RunID.String()
		if count[id+" a"] != 1 || count[id+" b"] != 2 || count[id+" c"] != 1 {
			t.Fatalf("run %s ran a %d, b %d, c %d times; want 1, 2 (killed in the middle, then again), 1\n%s",
				id, count[id+" a"], count[id+" b"], count[id+" c"], data)
		}
		if byPID[id+" a "+child] == "" || byPID[id+" b "+child] == "" || byPID[id+" b "+me] == "" || byPID[id+" c "+me] == "" {
			t.Fatalf("run %s: steps ran in the wrong processes:\n%s", id, data)
		}
		run, err := s.srv.Store.RunsGet(ctx, "default", h.RunID)
		if err != nil || run.Status != store.StatusCompleted || run.Attempts != 2 {
			t.Fatalf("run %s: %s attempts %d %v", id, run.Status, run.Attempts, err)
		}
	}
	settled(t, s.srv.Reapers[0], "one worker lost, its runs retried, no lease expired", func(st reaper.Stats) bool {
		return st.WorkersLost == 1 && st.RunsRetried == n && st.LeasesExpired == 0
	})
	eventually(t, 5*time.Second, "survivor counts the runs it completed", func() bool {
		return survivor.Stats().RunsCompleted == n
	})
	w, err := s.srv.Store.WorkersGet(ctx, "default", proc.id)
	if err != nil || w.Status != store.WorkerOffline || w.DeregisteredAt != nil {
		t.Fatalf("killed worker: %+v %v", w, err)
	}
}

// A draining worker keeps heartbeating while it finishes its runs, however
// long they take; it deregisters at the end and nothing is recovered.
func TestDrainingWorkerFinishesItsRunsAndNothingIsRecovered(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = timeout, 100*time.Millisecond, 3*time.Second, time.Second
	})
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	w := s.startWorker(t, func(w *worker.Worker) error {
		return worker.Register(w, "Hold", func(ctx workflow.Context, in int) (int, error) {
			return workflow.Step(ctx, "hold", func(context.Context) (int, error) {
				entered <- struct{}{}
				<-release
				return in, nil
			})
		})
	})
	ctx := context.Background()
	const n = 2
	var hs []*client.Handle
	for i := 0; i < n; i++ {
		h, err := s.cl.Start(ctx, "Hold", i, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i := 0; i < n; i++ {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("runs did not start")
		}
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	eventually(t, 5*time.Second, "worker DRAINING", func() bool {
		wk, err := s.srv.Store.WorkersGet(ctx, "default", w.ID())
		return err == nil && wk.Status == store.WorkerDraining
	})
	// The runs outlast the timeout several times over (and the lease, which
	// the heartbeats extend); the worker is alive all along.
	select {
	case <-stopped:
		t.Fatal("the drain ended while runs were in flight")
	case <-time.After(4 * time.Second):
	}
	for _, h := range hs {
		if run, _ := s.srv.Store.RunsGet(ctx, "default", h.RunID); run.Status != store.StatusRunning || run.Attempts != 1 {
			t.Fatalf("run %s during the drain: %s attempts %d", h.RunID, run.Status, run.Attempts)
		}
	}
	close(release)
	for _, h := range hs {
		if err := h.Result(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not end")
	}
	eventually(t, 5*time.Second, "worker deregistered", func() bool {
		wk, err := s.srv.Store.WorkersGet(ctx, "default", w.ID())
		return err == nil && wk.Status == store.WorkerOffline && wk.DeregisteredAt != nil
	})
	for _, h := range hs {
		if run, _ := s.srv.Store.RunsGet(ctx, "default", h.RunID); run.Status != store.StatusCompleted || run.Attempts != 1 {
			t.Fatalf("run %s: %s attempts %d, want COMPLETED at attempt 1", h.RunID, run.Status, run.Attempts)
		}
	}
	settled(t, s.srv.Reapers[0], "one deregistration, nothing recovered or released", func(st reaper.Stats) bool {
		return st.WorkersLost == 0 && st.RunsRetried+st.RunsFailed+st.LeasesExpired+st.RunsReleased == 0 && st.Deregistered == 1
	})
}

// A run asleep when its deadline passes fails at the deadline.
func TestDeadlinePassesWhileRunSleeps(t *testing.T) {
	t.Parallel()
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = time.Second, 100*time.Millisecond, 3*time.Second, time.Second
	})
	s.startWorker(t, func(w *worker.Worker) error {
		return worker.Register(w, "Nap", func(ctx workflow.Context, in int) (int, error) {
			if err := workflow.Sleep(ctx, "nap", time.Hour); err != nil {
				return 0, err
			}
			return in, nil
		})
	})
	ctx := context.Background()
	deadline := time.Now().Add(1500 * time.Millisecond)
	h, err := s.cl.Start(ctx, "Nap", 1, client.StartOptions{Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "run asleep", func() bool {
		run, _ := s.srv.Store.RunsGet(ctx, "default", h.RunID)
		return run.Status == store.StatusSleeping
	})
	if time.Now().After(deadline) {
		t.Fatal("the run fell asleep after its deadline; the test proves nothing")
	}
	err = h.Result(ctx, nil)
	var re *client.RunError
	if !errors.As(err, &re) {
		t.Fatalf("result: %v, want a run error", err)
	}
	run, err := s.srv.Store.RunsGet(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.StatusFailed || run.Error != store.DeadlineError || run.FinishedAt == nil {
		t.Fatalf("run: %s %q", run.Status, run.Error)
	}
	late := run.FinishedAt.Sub(*run.DeadlineAt)
	t.Logf("failed %v after its deadline", late)
	if late < 0 || late > 300*time.Millisecond {
		t.Fatalf("run failed %v after its deadline, want within 300 ms", late)
	}
	settled(t, s.srv.Reapers[0], "one deadline missed", func(st reaper.Stats) bool { return st.DeadlinesMissed == 1 })
}

// A run claimed by a worker the reaper never heard of (no registration, no
// heartbeat) is taken back when its lease expires: claimable at once, and,
// since no heartbeat ever said it was received, without counting an
// attempt.
func TestExpiredLeaseIsRecovered(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = time.Second, 100*time.Millisecond, lease, 500*time.Millisecond
	})
	ctx := context.Background()
	st := s.srv.Store
	// Let the re-reads scheduled by taking over pass, so that only the
	// run's own wakeup can tell the reaper about its lease.
	eventually(t, 2*lease+time.Second, "start-up lease checks done", func() bool {
		rs := s.srv.Reapers[0].Stats()
		return rs.LeaseChecksPending == 0 && rs.LeaseQueries >= 2
	})
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: lease})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	expiry := *claimed[0].LeaseExpiresAt
	var got store.Run
	eventually(t, lease+3*time.Second, "lease expired and run recovered", func() bool {
		got, _ = st.RunsGet(ctx, "default", run.ID)
		return got.Status != store.StatusRunning
	})
	if got.Status != store.StatusPending || got.Attempts != 1 || got.LockedBy != nil || got.Error != "" ||
		got.AvailableAt == nil || got.AvailableAt.After(time.Now()) {
		t.Fatalf("run after its lease expired: %s attempts %d error %q due %v", got.Status, got.Attempts, got.Error, got.AvailableAt)
	}
	late := time.Since(expiry)
	t.Logf("recovered about %v after its lease expired", late)
	if late > 700*time.Millisecond {
		t.Fatalf("recovered %v after the lease expired, want within 700 ms", late)
	}
	settled(t, s.srv.Reapers[0], "one lease expired, undelivered", func(st reaper.Stats) bool {
		return st.LeasesExpired == 1 && st.RunsUndelivered == 1
	})
}

// A worker that asks for work but never registers nor heartbeats (a rogue
// or an old SDK) gets a run from the backlog; the reaper, which saw the
// request of a worker it does not track, takes the run back when the
// lease expires. No heartbeat ever listed the run, so no attempt counts.
func TestUntrackedClaimerLeaseExpires(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	s := startSystemWith(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = time.Second, 100*time.Millisecond, lease, 500*time.Millisecond
	}, func(c *dispatcher.Config) { c.Lease.Duration = lease })
	ctx := context.Background()
	st := s.srv.Store
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	// The run's wakeup has long been served when the claim comes.
	eventually(t, 2*lease+time.Second, "wakeup lease checks done", func() bool {
		rs := s.srv.Reapers[0].Stats()
		return rs.Wakeups >= 1 && rs.LeaseChecksPending == 0
	})
	rogue := uuid.New()
	inbox := s.nc.NewInbox()
	delivered := make(chan protocol.Delivery, 1)
	sub, err := s.nc.Subscribe(inbox, func(m *nats.Msg) {
		var d protocol.Delivery
		if err := protocol.Decode(m.Data, &d); err != nil {
			return
		}
		ack, _ := protocol.Encode(&protocol.DeliveryAck{Accepted: true})
		_ = m.Respond(ack)
		delivered <- d
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, err := protocol.Encode(&protocol.WorkRequest{WorkerID: rogue, Namespace: "default", Queue: "default", Credits: 1,
		Types: []protocol.TypeVersion{{Type: "T"}}, Seq: 1, WaitMS: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.nc.PublishRequest(protocol.SubjectWork("default", "default"), inbox, req); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-delivered:
		if len(d.Runs) != 1 || d.Runs[0].RunID != run.ID {
			t.Fatalf("delivery: %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	claimed, err := st.RunsGet(ctx, "default", run.ID)
	if err != nil || claimed.Status != store.StatusRunning || claimed.LeaseExpiresAt == nil {
		t.Fatalf("claimed run: %+v %v", claimed, err)
	}
	expiry := *claimed.LeaseExpiresAt
	var got store.Run
	eventually(t, lease+3*time.Second, "lease expired and run recovered", func() bool {
		got, _ = st.RunsGet(ctx, "default", run.ID)
		return got.Status != store.StatusRunning
	})
	late := time.Since(expiry)
	t.Logf("recovered about %v after its lease expired", late)
	if got.Status != store.StatusPending || got.Attempts != 1 || late > 700*time.Millisecond {
		t.Fatalf("run %s attempts %d error %q, recovered %v after its lease expired", got.Status, got.Attempts, got.Error, late)
	}
}

// Runs claimed for workers that never received them — the dispatcher died
// between claim and delivery — keep their attempt count when they are taken
// back, by the death of their worker or by their lease's expiry, and are
// never failed as exhausted (they allow one attempt); a worker then
// completes each in its first attempt.
func TestUndeliveredRunsKeepTheirAttempt(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = timeout, 100*time.Millisecond, 3*time.Second, 2*time.Second
	})
	ctx := context.Background()
	st := s.srv.Store
	// A live worker, made of NATS messages, that will die.
	dying := uuid.New()
	publish := func(subject string, m protocol.Message) {
		data, err := protocol.Encode(m)
		if err == nil {
			err = s.nc.Publish(subject, data)
		}
		if err == nil {
			err = s.nc.Flush()
		}
		if err != nil {
			t.Error(err)
		}
	}
	publish(protocol.SubjectWorkerRegister("default"), &protocol.WorkerRegister{WorkerID: dying, Namespace: "default", Queue: "q",
		Hostname: "dying", PID: 1, Types: []protocol.TypeVersion{{Type: "T"}}, MaxConcurrency: 4})
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			publish(protocol.SubjectWorkerHeartbeat("default"), &protocol.Heartbeat{WorkerID: dying, Namespace: "default", Queue: "q", SentAt: time.Now().UTC()})
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	eventually(t, 5*time.Second, "the dying worker registered", func() bool {
		w, err := st.WorkersGet(ctx, "default", dying)
		return err == nil && w.Status == store.WorkerOnline
	})
	once := &retry.Policy{MaxAttempts: 1}
	claim := func(worker uuid.UUID, lease time.Duration) store.Run {
		t.Helper()
		run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "T", RetryPolicy: once})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: worker,
			Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: lease})
		if err != nil || len(c) != 1 || c[0].ID != run.ID || c[0].Attempts != 1 {
			t.Fatalf("claim: %+v %v", c, err)
		}
		return run
	}
	// Claimed for the dying worker (its lease outlives the test: only the
	// worker's death can take it back), and for a worker nobody knows.
	ofDead := claim(dying, time.Hour)
	ofNobody := claim(uuid.New(), 2*time.Second)
	close(stop)
	<-stopped

	for _, id := range []uuid.UUID{ofDead.ID, ofNobody.ID} {
		var got store.Run
		eventually(t, 10*time.Second, "run taken back", func() bool {
			got, _ = st.RunsGet(ctx, "default", id)
			return got.Status != store.StatusRunning
		})
		if got.Status != store.StatusPending || got.Attempts != 1 || got.LockedBy != nil || got.Error != "" {
			t.Fatalf("run %s taken back: %s attempts %d error %q; want PENDING at its first attempt", id, got.Status, got.Attempts, got.Error)
		}
	}
	settled(t, s.srv.Reapers[0], "a worker lost, a lease expired, both runs undelivered", func(st reaper.Stats) bool {
		return st.WorkersLost == 1 && st.LeasesExpired == 1 && st.RunsUndelivered == 2 && st.RunsRetried+st.RunsFailed == 0
	})

	s.startWorker(t, func(w *worker.Worker) error {
		return worker.Register(w, "T", func(ctx workflow.Context, _ any) (int, error) { return 1, nil })
	})
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, id := range []uuid.UUID{ofDead.ID, ofNobody.ID} {
		run, err := s.cl.Wait(wctx, id)
		if err != nil || run.Status != client.StatusCompleted || run.Attempts != 1 {
			t.Fatalf("run %s: %+v %v; want COMPLETED in its first attempt", id, run, err)
		}
	}
}

// A poison run kills every worker that takes it, each time right after the
// worker accepted it (its heartbeats otherwise an hour apart, so the only
// one listing the run is the one sent on accepting it): each loss counts an
// attempt, and the run fails after its max attempts instead of killing
// workers for ever.
func TestPoisonRunThatKillsItsWorkerFails(t *testing.T) {
	t.Parallel()
	s := startSystem(t, func(c *reaper.Config) {
		c.WorkerTimeout, c.FlushInterval, c.Lease.Duration, c.LeaseGrace = 2*time.Second, 100*time.Millisecond, 30*time.Second, time.Second
	})
	beats := make(chan *nats.Msg, 10000)
	sub, err := s.nc.ChanSubscribe(protocol.SubjectWorkerHeartbeatAll, beats)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const maxAttempts = 3
	h, err := s.cl.Start(ctx, "Poison", 0, client.StartOptions{Queue: "default", RetryPolicy: retryPolicy(maxAttempts)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= maxAttempts; i++ {
		proc := startWorkerProcess(t, s.srv.NATSURL, envHeartbeat+"=1h")
		if l := proc.next("the poison run"); l != "poison "+h.RunID.String() {
			t.Fatalf("worker process %d: %q, want the poison run", i, l)
		}
		announced := false
		for deadline := time.After(10 * time.Second); !announced; {
			select {
			case m := <-beats:
				var hb protocol.Heartbeat
				if protocol.Decode(m.Data, &hb) == nil && hb.WorkerID == proc.id && slices.Contains(hb.Runs, h.RunID) {
					announced = true
				}
			case <-deadline:
				t.Fatalf("worker process %d never listed the run it accepted", i)
			}
		}
		if err := proc.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		proc.wait()
		var run store.Run
		eventually(t, 10*time.Second, "the poison run taken back", func() bool {
			run, _ = s.srv.Store.RunsGet(ctx, "default", h.RunID)
			return run.Status != store.StatusRunning
		})
		want, wantAttempts := store.StatusPending, i+1
		if i == maxAttempts {
			want, wantAttempts = store.StatusFailed, maxAttempts
		}
		if run.Status != want || run.Attempts != wantAttempts || !strings.Contains(run.Error, "lost") {
			t.Fatalf("after worker %d died: %s attempts %d error %q; want %s at attempt %d", i, run.Status, run.Attempts, run.Error, want, wantAttempts)
		}
	}
	var re *client.RunError
	if err := h.Result(ctx, nil); !errors.As(err, &re) || re.Status != client.StatusFailed {
		t.Fatalf("poison run: %v", err)
	}
	settled(t, s.srv.Reapers[0], "three workers lost, two retries, one failure", func(st reaper.Stats) bool {
		return st.WorkersLost == maxAttempts && st.RunsRetried == maxAttempts-1 && st.RunsFailed == 1 && st.RunsUndelivered == 0
	})
}
