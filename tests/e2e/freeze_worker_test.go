package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// frozenWorkerService, as envServe, makes the test binary a worker
// process serving FreezeProbe; freezeProbeDirEnv names the directory its
// step bodies log to.
// freezeProbeSelfEnv, set, has FreezeProbe stop its own process
// (SIGSTOP) before its first step, after logging freezeProbeSelfMsg.
const (
	frozenWorkerService = "freeze-probe-worker"
	freezeProbeDirEnv   = "KAGZI_E2E_FREEZE_PROBE_DIR"
	freezeProbeSelfEnv  = "KAGZI_E2E_FREEZE_PROBE_SELF"
	freezeProbeSelfMsg  = "freeze probe: stopping its own process"
)

// init runs the worker process before TestMain, whose services register
// no workflow.
func init() {
	if os.Getenv(envServe) != frozenWorkerService {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := devserver.Serve(ctx, "worker", func(w *worker.Worker) error {
		return worker.Register(w, "FreezeProbe", freezeProbe)
	})
	failed := err != nil && ctx.Err() == nil
	stop()
	if failed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// freezeProbeSteps is the number of steps of a FreezeProbe run.
const freezeProbeSteps = 3

// freezeProbe runs freezeProbeSteps steps, each of which logs that its
// body ran: "<run> <run attempt> <step> <step attempt> <pid>", one
// write(2) to a file opened O_APPEND, so a line is never torn or lost.
func freezeProbe(ctx workflow.Context, _ struct{}) (int, error) {
	f, err := os.OpenFile(filepath.Join(os.Getenv(freezeProbeDirEnv), fmt.Sprintf("steps-%d.log", os.Getpid())),
		os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if os.Getenv(freezeProbeSelfEnv) != "" {
		// The run was delivered, so nothing of it is held to report: the
		// first step's body is the next thing the worker would do.
		ctx.Logger().Info(freezeProbeSelfMsg)
		// To this thread: it stops as the call returns, before the next
		// line (a SIGSTOP to the process may be taken by another thread
		// while this one runs on for a while).
		runtime.LockOSThread()
		err := syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
		runtime.UnlockOSThread()
		if err != nil {
			return 0, err
		}
	}
	for k := 1; k <= freezeProbeSteps; k++ {
		id := "s" + strconv.Itoa(k)
		_, err := workflow.Step(ctx, id, func(sctx context.Context) (int, error) {
			info, _ := workflow.StepInfoFrom(sctx)
			_, err := fmt.Fprintf(f, "%s %d %s %d %d\n", ctx.RunID(), ctx.Attempt(), id, info.Attempt, os.Getpid())
			return k, err
		})
		if err != nil {
			return 0, err
		}
	}
	return freezeProbeSteps, nil
}

// A worker frozen (SIGSTOP) while a delivery waits in its socket for
// longer than the dispatcher's delivery timeout (5 s) resumes with it: the
// dispatcher released those runs long ago and another worker ran them.
// The resumed worker must refuse the delivery — every step body runs at
// most once per attempt — and every run completes.
//
// It runs on a server with the deployment's pings, which closes the frozen
// worker's connection, and on one with NATS's defaults, which keeps it.
func TestFrozenWorkerRunsNoReleasedDelivery(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	for _, c := range pingSettings {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			frozenWorkerRunsNoReleasedDelivery(t, c.start(t), c.evicts)
		})
	}
}

// frozenWorkerRunsNoReleasedDelivery runs the test on ns, which closes a
// frozen client's connection if evicts.
func frozenWorkerRunsNoReleasedDelivery(t *testing.T, ns *testnats.Server, evicts bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.New(t)
	st := openStore(t, url, nil)
	// Beacons a minute apart: on resume, the worker's liveness timer would
	// otherwise find the dispatcher silent (its beacons wait unread in the
	// socket) and renew the request, which may refuse the delivery before
	// the worker knows it stalled. The test is of the latter.
	comps := dispatcher.Assemble(dispatcherConfig(t, url, func(c *dispatcher.Config) { c.BeaconInterval = protocol.MaxBeaconInterval }), st, ns.Connect(t), nil).Components
	for i, c := range comps {
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(comps[i].Stop)
	}
	cl := newClient(t, st, ns.Connect(t))

	// The test watches work requests and deliveries from a connection of
	// its own.
	nc := ns.Connect(t)
	requests, deliveries := make(chan *nats.Msg, 256), make(chan *nats.Msg, 256)
	for _, s := range []string{protocol.SubjectWorkAll, protocol.SubjectDirectWorkAll} {
		if _, err := nc.ChanSubscribe(s, requests); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.ChanSubscribe(protocol.WorkerInbox("default", worker.DefaultIdentity)+".>", deliveries); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	const credits = 4
	env := []string{"KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info",
		"KAGZI_HEARTBEAT_INTERVAL=1s", "KAGZI_MAX_CONCURRENCY=" + strconv.Itoa(credits), freezeProbeDirEnv + "=" + dir}
	a := startChild(t, "worker A (frozen)", env, frozenWorkerService)
	// A's request is the only one, so the dispatcher delivers the runs
	// started next to A.
	var aID uuid.UUID
	select {
	case m := <-requests:
		var r protocol.WorkRequest
		if err := protocol.Decode(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		aID = r.WorkerID
	case <-time.After(30 * time.Second):
		t.Fatal("worker A sent no work request")
	}

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	var hs []*client.Handle
	for range credits {
		h, err := cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	// The runs sit in A's socket now: the dispatcher waits for an ack
	// that cannot come, then releases them.
	for delivered := false; !delivered; {
		select {
		case m := <-deliveries:
			var d protocol.Delivery
			delivered = protocol.Decode(m.Data, &d) == nil && d.WorkerID == aID && len(d.Runs) > 0
		case <-time.After(30 * time.Second):
			t.Fatal("nothing was delivered to the frozen worker")
		}
	}
	// B runs them once they are released.
	startChild(t, "worker B", env, frozenWorkerService)
	waitAll(t, hs, time.Minute)
	t.Logf("the runs completed %.1f s after A froze", time.Since(frozen).Seconds())

	// Frozen past the delivery timeout and past NATS's eviction of A.
	time.Sleep(time.Until(frozen.Add(8 * time.Second)))
	// Taken before the signal: the resumed process may log before this
	// goroutine runs again.
	at := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// NATS closed A's connection while it was frozen: it reconnects first
	// thing, and anything it would run it has begun a moment later. A
	// server with the default pings kept it: A reads the delivery waiting
	// in its socket first thing, and refuses it.
	resumedMsg := "reconnected to NATS: registering again"
	if !evicts {
		resumedMsg = "delivery refused"
	}
	if _, err := a.await(ctx, resumedMsg, at, 15*time.Second); err != nil {
		t.Fatalf("resumed worker A: %v", err)
	}
	time.Sleep(2 * time.Second)

	checkFreezeProbeSteps(t, dir, hs, a.cmd.Process.Pid)
	// It read the delivery, and refused it.
	if _, err := a.await(ctx, "delivery refused", at, time.Second); err != nil {
		t.Errorf("resumed worker A: %v", err)
	}
	a.mu.Lock()
	for _, l := range a.lines {
		if l.msg == "delivery refused" || l.msg == "renewing work request" {
			t.Logf("resumed worker A: %s", l.raw)
		}
	}
	a.mu.Unlock()
}

// checkFreezeProbeSteps reads the step logs of the FreezeProbe runs hs in
// dir: every step body ran, none twice for one attempt, and none in the
// frozen process frozenPID.
func checkFreezeProbeSteps(t *testing.T, dir string, hs []*client.Handle, frozenPID int) {
	t.Helper()
	ran := map[string]int{}       // by run, run attempt, step, step attempt
	stepsRan := map[string]bool{} // by run and step
	byPID := map[string]int{}
	files, err := filepath.Glob(filepath.Join(dir, "steps-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 5 {
				t.Fatalf("%s: bad line %q", file, line)
			}
			ran[strings.Join(f[:4], " ")]++
			stepsRan[f[0]+" "+f[2]] = true
			byPID[f[4]]++
		}
	}
	for key, n := range ran {
		if n > 1 {
			t.Errorf("step body ran %d times for one attempt (run, attempt, step, step attempt: %s)", n, key)
		}
	}
	for _, h := range hs {
		for k := 1; k <= freezeProbeSteps; k++ {
			if !stepsRan[fmt.Sprintf("%s s%d", h.RunID, k)] {
				t.Errorf("run %s completed, but its step s%d never ran", h.RunID, k)
			}
		}
	}
	if n := byPID[strconv.Itoa(frozenPID)]; n > 0 {
		t.Errorf("the resumed worker ran %d step bodies of runs released while it was frozen", n)
	}
}

// A worker frozen (SIGSTOP) while it holds a run, with nothing of the run
// left to report, resumes after the reaper declared it dead and another
// worker finished the run. Its next step would be its first contact with
// the engine since the freeze, but a step's body acts outside the run:
// the resumed worker must find its lease gone before the body runs, not
// after, and run no step body at all.
func TestFrozenWorkerBeginsNoStepOfARunFinishedElsewhere(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	for _, c := range pingCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			frozenWorkerBeginsNoStep(t, c.start(t))
		})
	}
}

func frozenWorkerBeginsNoStep(t *testing.T, ns *testnats.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.New(t)
	rcfg := defaults[reaper.Config](t)
	rcfg.WorkerTimeout = 2 * time.Second
	srv, err := devserver.Start(ctx, devserver.Options{DatabaseURL: url, NATSURL: ns.URL(), Workers: -1, Schedulers: -1, Reaper: rcfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cl := newClient(t, srv.Store, ns.Connect(t))

	dir := t.TempDir()
	env := []string{"KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info",
		"KAGZI_HEARTBEAT_INTERVAL=500ms", freezeProbeDirEnv + "=" + dir}
	a := startChild(t, "worker A (freezes itself)", append(env, freezeProbeSelfEnv+"=1"), frozenWorkerService)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	h, err := cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.await(ctx, freezeProbeSelfMsg, time.Time{}, 30*time.Second); err != nil {
		t.Fatalf("worker A: %v", err)
	}
	// The reaper declares A dead (no heartbeat for 2 s) and releases the
	// run; B runs it to its end.
	startChild(t, "worker B", env, frozenWorkerService)
	waitAll(t, []*client.Handle{h}, time.Minute)

	at := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// The resumed execution asks before its first step, and is told.
	if _, err := a.await(ctx, "lease lost: abandoning the run", at, 15*time.Second); err != nil {
		t.Fatalf("resumed worker A: %v", err)
	}
	checkFreezeProbeSteps(t, dir, []*client.Handle{h}, a.cmd.Process.Pid)
}
