package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testnats"
)

type orderIn struct {
	Items int `json:"items"`
}

type orderOut struct {
	Total   int    `json:"total"`
	Receipt string `json:"receipt"`
}

// threeSteps registers "Order": reserve, charge, receipt; counts calls.
func threeSteps(calls *[3]atomic.Int32) func(w *worker.Worker) {
	return func(w *worker.Worker) {
		err := worker.Register(w, "Order", func(ctx workflow.Context, in orderIn) (orderOut, error) {
			reserved, err := workflow.Step(ctx, "reserve", func(context.Context) (int, error) {
				calls[0].Add(1)
				return in.Items, nil
			})
			if err != nil {
				return orderOut{}, err
			}
			total, err := workflow.Step(ctx, "charge", func(context.Context) (int, error) {
				calls[1].Add(1)
				return reserved * 10, nil
			})
			if err != nil {
				return orderOut{}, err
			}
			receipt, err := workflow.Step(ctx, "receipt", func(context.Context) (string, error) {
				calls[2].Add(1)
				return fmt.Sprintf("R-%d", total), nil
			})
			return orderOut{Total: total, Receipt: receipt}, err
		}, worker.WithVersion("v1"))
		if err != nil {
			panic(err)
		}
	}
}

func TestThreeStepWorkflowCompletes(t *testing.T) {
	t.Parallel()
	var calls [3]atomic.Int32
	d, w := start(t, worker.Config{MaxConcurrency: 4, Hostname: "host-a", Version: "1.2.3"}, threeSteps(&calls))

	reg := recv(t, d.registers, "register")
	if reg.WorkerID != w.ID() || reg.MaxConcurrency != 4 || reg.Hostname != "host-a" ||
		len(reg.Types) != 1 || reg.Types[0] != (protocol.TypeVersion{Type: "Order", Version: "v1"}) {
		t.Fatalf("register %+v", reg)
	}
	req := d.nextRequest(t)
	if req.Seq != 1 || req.Credits != 4 || req.WaitMS != 30000 || req.WorkerID != w.ID() || len(req.Types) != 1 {
		t.Fatalf("first request %+v", req.WorkRequest)
	}
	run := newRun(t, "Order", orderIn{Items: 3})
	run.Version = "v1"
	if !d.deliver(t, req, req.Seq, run) {
		t.Fatal("delivery refused")
	}
	// Accepting consumed the request: a new one follows with the free
	// slots (4 if the run already ended).
	if req2 := d.nextRequest(t); req2.Seq != 2 || req2.Credits < 3 {
		t.Fatalf("second request seq %d credits %d", req2.Seq, req2.Credits)
	}

	wantSteps := []struct{ id, out string }{{"reserve", "3"}, {"charge", "30"}, {"receipt", `"R-30"`}}
	for _, want := range wantSteps {
		it := d.nextItem(t)
		if it.Kind != protocol.ReportStepCompleted || it.StepID != want.id || string(it.Output) != want.out ||
			it.Attempt != 1 || it.RunID != run.RunID || it.LeaseToken != run.LeaseToken {
			t.Fatalf("want %s=%s, got %+v", want.id, want.out, it)
		}
	}
	it := d.nextItem(t)
	var out orderOut
	if it.Kind != protocol.ReportRunCompleted || json.Unmarshal(it.Output, &out) != nil || out != (orderOut{30, "R-30"}) {
		t.Fatalf("final report %+v", it)
	}
	for i := range calls {
		if n := calls[i].Load(); n != 1 {
			t.Fatalf("step %d ran %d times", i, n)
		}
	}
	// After a drain every report is in: nothing else came.
	w.Stop()
	d.noItems(t)
	if st := w.Stats(); st.RunsCompleted != 1 || st.Running != 0 || st.Accepted != 1 || st.Requests != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestReplayRunsOnlyTheMissingStep(t *testing.T) {
	t.Parallel()
	var calls [3]atomic.Int32
	d, _ := start(t, worker.Config{MaxConcurrency: 1}, threeSteps(&calls))
	req := d.nextRequest(t)
	run := newRun(t, "Order", orderIn{Items: 3},
		completedStep(t, "reserve", 7), // recorded values win over fresh ones
		completedStep(t, "charge", 70),
		protocol.StepState{StepID: "receipt", Status: "FAILED", Attempt: 2, Error: "printer on fire"})
	if !d.deliver(t, req, req.Seq, run) {
		t.Fatal("delivery refused")
	}
	it := d.nextItem(t)
	if it.Kind != protocol.ReportStepCompleted || it.StepID != "receipt" || it.Attempt != 3 || string(it.Output) != `"R-70"` {
		t.Fatalf("want receipt attempt 3, got %+v", it)
	}
	it = d.nextItem(t)
	if it.Kind != protocol.ReportRunCompleted || !strings.Contains(string(it.Output), `"total":70`) {
		t.Fatalf("final report %+v", it)
	}
	d.nextRequest(t) // slot freed
	d.noItems(t)
	if a, b, c := calls[0].Load(), calls[1].Load(), calls[2].Load(); a != 0 || b != 0 || c != 1 {
		t.Fatalf("invocations reserve=%d charge=%d receipt=%d, want 0 0 1", a, b, c)
	}
}

func TestDuplicateStepIDFailsRun(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Dup", func(ctx workflow.Context, _ struct{}) (int, error) {
			sum := 0
			for i := range 2 {
				v, err := workflow.Step(ctx, "fetch", func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		}))
	})
	req := d.nextRequest(t)
	run := newRun(t, "Dup", nil)
	d.deliver(t, req, req.Seq, run)
	if it := d.nextItem(t); it.Kind != protocol.ReportStepCompleted || it.StepID != "fetch" {
		t.Fatalf("first step %+v", it)
	}
	it := d.nextItem(t)
	if it.Kind != protocol.ReportRunFailed || !strings.Contains(it.Error, "duplicate step id") || !strings.Contains(it.Error, `"fetch"`) {
		t.Fatalf("want run_failed naming the duplicate, got %+v", it)
	}
}

func TestLeaseLostAbandonsRun(t *testing.T) {
	t.Parallel()
	var secondRan atomic.Int32
	ctxs := make(chan workflow.Context, 1)
	d, w := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Lease", func(ctx workflow.Context, _ struct{}) (int, error) {
			ctxs <- ctx
			if _, err := workflow.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			_, err := workflow.Step(ctx, "two", func(context.Context) (int, error) { secondRan.Add(1); return 2, nil })
			return 2, err
		}))
	})
	d.setAnswer(func(it protocol.ReportItem) protocol.ResultCode {
		if it.StepID == "one" {
			return protocol.ResultLeaseLost
		}
		return protocol.ResultOK
	})
	req := d.nextRequest(t)
	d.deliver(t, req, req.Seq, newRun(t, "Lease", nil))
	ctx := recv(t, ctxs, "workflow start")
	if it := d.nextItem(t); it.StepID != "one" {
		t.Fatalf("first report %+v", it)
	}
	closed(t, ctx.Done(), "run context cancelled")
	if cause := context.Cause(ctx); !errors.Is(cause, workflow.ErrLeaseLost) {
		t.Fatalf("cause %v, want lease lost", cause)
	}
	d.nextRequest(t) // the run ended and freed its slot
	d.noItems(t)
	if secondRan.Load() != 0 {
		t.Fatal("the workflow went on after losing its lease")
	}
	if st := w.Stats(); st.RunsAbandoned != 1 || st.RunsCompleted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// longRun is a run of "Long", whose one step blocks until its context
// ends, delivered to a worker with one slot and in its step.
type longRun struct {
	run protocol.DeliveredRun
	// ctxs receives the workflow's context.
	ctxs chan workflow.Context
	// stepDone receives when the step's context ended.
	stepDone chan time.Time
}

func startLong(t *testing.T) (*fakeDispatcher, *worker.Worker, *longRun) {
	t.Helper()
	started := make(chan struct{})
	l := &longRun{ctxs: make(chan workflow.Context, 1), stepDone: make(chan time.Time, 1)}
	d, w := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Long", func(ctx workflow.Context, _ struct{}) (int, error) {
			l.ctxs <- ctx
			return workflow.Step(ctx, "wait", func(sctx context.Context) (int, error) {
				close(started)
				<-sctx.Done()
				l.stepDone <- time.Now()
				return 0, sctx.Err()
			})
		}))
	})
	req := d.nextRequest(t)
	l.run = newRun(t, "Long", nil)
	d.deliver(t, req, req.Seq, l.run)
	closed(t, started, "step start")
	return d, w, l
}

// A request to cancel cancels the running step's context at once; the
// attempt it interrupted is not recorded, and the workflow, which returns
// the cancellation, reports its end (the engine records it CANCELLED).
func TestCancelStopsRunningStepQuickly(t *testing.T) {
	t.Parallel()
	d, w, l := startLong(t)
	sent := time.Now()
	d.cancel(t, w.ID(), l.run.RunID)
	if elapsed := recv(t, l.stepDone, "step cancelled").Sub(sent); elapsed > 100*time.Millisecond {
		t.Fatalf("step context cancelled after %v, want within 100ms", elapsed)
	}
	if cause := context.Cause(recv(t, l.ctxs, "ctx")); !errors.Is(cause, workflow.ErrCancelled) {
		t.Fatalf("cause %v", cause)
	}
	if it := d.nextItem(t); it.Kind != protocol.ReportRunFailed || !strings.Contains(it.Error, "cancelled") {
		t.Fatalf("after the request: %+v, want run_failed (no step_failed)", it)
	}
	d.nextRequest(t) // slot freed
	d.noItems(t)
}

// A terminated run is abandoned: its step's context ends at once and
// nothing more is reported (the lease is void).
func TestTerminateAbandonsRun(t *testing.T) {
	t.Parallel()
	d, w, l := startLong(t)
	d.terminate(t, w.ID(), l.run.RunID)
	recv(t, l.stepDone, "step context ended")
	if cause := context.Cause(recv(t, l.ctxs, "ctx")); !errors.Is(cause, workflow.ErrTerminated) {
		t.Fatalf("cause %v", cause)
	}
	d.nextRequest(t) // slot freed
	d.noItems(t)     // no step_failed, no run_failed
	if st := w.Stats(); st.RunsAbandoned != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCreditsNeverExceedMaxConcurrency(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	started := make(chan struct{}, 100)
	var running, peak, startedRuns atomic.Int32
	d, w := start(t, worker.Config{MaxConcurrency: 3}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Block", func(ctx workflow.Context, _ struct{}) (int, error) {
			startedRuns.Add(1)
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			started <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return 1, nil
		}))
	})
	runs := func(n int) []protocol.DeliveredRun {
		rs := make([]protocol.DeliveredRun, n)
		for i := range rs {
			rs[i] = newRun(t, "Block", nil)
		}
		return rs
	}
	req1 := d.nextRequest(t)
	if req1.Credits != 3 || req1.Seq != 1 {
		t.Fatalf("req1 %+v", req1.WorkRequest)
	}
	if d.deliver(t, req1, req1.Seq+7, runs(1)...) {
		t.Fatal("accepted a delivery for an unknown seq")
	}
	if d.deliver(t, req1, req1.Seq, runs(4)...) {
		t.Fatal("accepted 4 runs for 3 credits")
	}
	if !d.deliver(t, req1, req1.Seq, runs(2)...) {
		t.Fatal("refused 2 runs for 3 credits")
	}
	req2 := d.nextRequest(t)
	if req2.Credits != 1 || req2.Seq != 2 {
		t.Fatalf("req2 %+v", req2.WorkRequest)
	}
	if d.deliver(t, req1, req1.Seq, runs(1)...) {
		t.Fatal("accepted a delivery for a consumed request")
	}
	if d.deliver(t, req2, req2.Seq, runs(2)...) {
		t.Fatal("accepted 2 runs for 1 credit")
	}
	if !d.deliver(t, req2, req2.Seq, runs(1)...) {
		t.Fatal("refused 1 run for 1 credit")
	}
	if d.deliver(t, req2, req2.Seq, runs(1)...) {
		t.Fatal("accepted a second delivery for one request")
	}
	for range 3 {
		recv(t, started, "run start")
	}
	// Full: the worker asks for nothing until a run ends. The next request
	// is therefore seq 3 with 1 credit.
	gate <- struct{}{}
	if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted {
		t.Fatalf("report %+v", it)
	}
	req3 := d.nextRequest(t)
	if req3.Seq != 3 || req3.Credits != 1 {
		t.Fatalf("req3 seq %d credits %d, want 3 and 1", req3.Seq, req3.Credits)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
	if n := startedRuns.Load(); n != 3 {
		t.Fatalf("%d runs started, want 3", n)
	}
	if st := w.Stats(); st.Refused != 5 || st.Accepted != 2 || st.Running != 2 {
		t.Fatalf("stats %+v", st)
	}
	close(gate)
}

func TestHeartbeatsListHeldRuns(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	d, w := start(t, worker.Config{MaxConcurrency: 2, HeartbeatInterval: 20 * time.Millisecond}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Block", func(ctx workflow.Context, _ struct{}) (int, error) {
			<-gate
			return 1, nil
		}))
	})
	req := d.nextRequest(t)
	a, b := newRun(t, "Block", nil), newRun(t, "Block", nil)
	if !d.deliver(t, req, req.Seq, a, b) {
		t.Fatal("refused")
	}
	waitHeartbeat := func(want ...uuid.UUID) {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			select {
			case hb := <-d.heartbeats:
				if hb.WorkerID != w.ID() || hb.Draining {
					t.Fatalf("heartbeat %+v", hb)
				}
				if sameIDs(hb.Runs, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no heartbeat listing %v", want)
			}
		}
	}
	waitHeartbeat(a.RunID, b.RunID)
	close(gate)
	d.nextItem(t)
	d.nextItem(t)
	waitHeartbeat()
}

// An accepted delivery is announced at once by one heartbeat listing all
// its runs, however far off the next tick is: the reaper counts a lost
// attempt only for a run a heartbeat listed, so a run that crashes its
// worker right away must be listed right away.
func TestAcceptedDeliveryIsAnnouncedAtOnce(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	defer close(gate)
	entered := make(chan struct{}, 3)
	d, w := start(t, worker.Config{MaxConcurrency: 4, HeartbeatInterval: time.Hour}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Block", func(ctx workflow.Context, _ struct{}) (int, error) {
			entered <- struct{}{}
			<-gate
			return 1, nil
		}))
	})
	req := d.nextRequest(t)
	runs := []protocol.DeliveredRun{newRun(t, "Block", nil), newRun(t, "Block", nil), newRun(t, "Block", nil)}
	if !d.deliver(t, req, req.Seq, runs...) {
		t.Fatal("refused")
	}
	hb := recv(t, d.heartbeats, "a heartbeat after the delivery")
	if hb.WorkerID != w.ID() || !sameIDs(hb.Runs, []uuid.UUID{runs[0].RunID, runs[1].RunID, runs[2].RunID}) {
		t.Fatalf("heartbeat after the delivery %+v, want all three runs", hb)
	}
	for range runs {
		recv(t, entered, "the runs started")
	}
	// One heartbeat for the delivery: the next is an hour away.
	d.nextRequest(t)
	select {
	case hb := <-d.heartbeats:
		t.Fatalf("a second heartbeat %+v", hb)
	default:
	}
}

func sameIDs(got, want []uuid.UUID) bool {
	if len(got) != len(want) {
		return false
	}
	set := map[uuid.UUID]bool{}
	for _, id := range got {
		set[id] = true
	}
	for _, id := range want {
		if !set[id] {
			return false
		}
	}
	return true
}

func TestStopDrainsAndIsSafeTwice(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	d, w := start(t, worker.Config{MaxConcurrency: 2, DrainTimeout: waitLimit, HeartbeatInterval: time.Hour}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Slow", func(ctx workflow.Context, _ struct{}) (string, error) {
			close(started)
			<-release // ignores ctx: the drain must wait for it
			return "done", nil
		}))
	})
	req := d.nextRequest(t)
	run := newRun(t, "Slow", nil)
	d.deliver(t, req, req.Seq, run)
	if hb := recv(t, d.heartbeats, "the heartbeat announcing the run"); hb.Draining || !sameIDs(hb.Runs, []uuid.UUID{run.RunID}) {
		t.Fatalf("heartbeat after the delivery %+v", hb)
	}
	req2 := d.nextRequest(t)
	closed(t, started, "run start")

	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	if hb := recv(t, d.heartbeats, "draining heartbeat"); !hb.Draining || !sameIDs(hb.Runs, []uuid.UUID{run.RunID}) {
		t.Fatalf("drain heartbeat %+v", hb)
	}
	if d.deliver(t, req2, req2.Seq, newRun(t, "Slow", nil)) {
		t.Fatal("a draining worker accepted a delivery")
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a run was in flight")
	default:
	}
	close(release)
	closed(t, stopped, "Stop")
	recv(t, d.deregs, "deregister")

	// Order: the run completed, then the worker deregistered, and it asked
	// for no work once draining.
	var kinds []string
	for _, e := range d.eventLog() {
		k := e.kind
		if e.kind == "report" {
			k = string(e.item.Kind)
		}
		if e.kind == "heartbeat" && e.hb.Draining {
			k = "draining"
		}
		kinds = append(kinds, k)
	}
	got := strings.Join(kinds, ",")
	if want := "probe,register,request,heartbeat,request,draining,run_completed,deregister"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}

	second := make(chan struct{})
	go func() {
		w.Stop()
		close(second)
	}()
	closed(t, second, "second Stop")
	closed(t, w.Done(), "Done")
}

func TestDrainTimeoutCancelsAndReleasesRuns(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 1)
	started := make(chan struct{})
	d, w := start(t, worker.Config{MaxConcurrency: 1, DrainTimeout: 50 * time.Millisecond}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Forever", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "wait", func(sctx context.Context) (int, error) {
				close(started)
				<-sctx.Done()
				causes <- context.Cause(sctx)
				return 0, sctx.Err()
			})
		}))
	})
	req := d.nextRequest(t)
	run := newRun(t, "Forever", nil)
	run.LeaseToken = 42
	d.deliver(t, req, req.Seq, run)
	closed(t, started, "run start")
	w.Stop()
	if cause := recv(t, causes, "cause"); !errors.Is(cause, workflow.ErrDraining) {
		t.Fatalf("cause %v", cause)
	}
	it := d.nextItem(t)
	if it.Kind != protocol.ReportRunRelease || it.RunID != run.RunID || it.LeaseToken != 42 {
		t.Fatalf("want release of the run, got %+v", it)
	}
	recv(t, d.deregs, "deregister")
	d.noItems(t) // no step_failed for the cancelled step
	if st := w.Stats(); st.RunsReleased != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCancellingStartContextDrains(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	d := newFakeDispatcher(t, s)
	w, err := worker.New(worker.Config{}, s.Connect(t))
	must(t, err)
	must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	recv(t, d.registers, "register")
	d.nextRequest(t)
	cancel()
	closed(t, w.Done(), "drain after ctx cancel")
	if err := recv(t, runErr, "Run"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if dr := recv(t, d.deregs, "deregister"); dr.WorkerID != w.ID() {
		t.Fatalf("deregister %+v", dr)
	}
	if err := w.Start(t.Context()); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("Start after stop: %v", err)
	}
}

func TestMalformedMessagesAreCountedAndDropped(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{})
	d, w := start(t, worker.Config{MaxConcurrency: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Wait", func(ctx workflow.Context, block bool) (int, error) {
			if !block {
				return 7, nil
			}
			started <- struct{}{}
			<-ctx.Done()
			close(cancelled)
			return 0, ctx.Err()
		}))
	})
	req := d.nextRequest(t)
	if d.ack(t, req.reply, []byte("{not json")) {
		t.Fatal("garbage delivery accepted")
	}
	if d.ack(t, req.reply, []byte(`{"v":99,"worker_id":"`+req.WorkerID.String()+`","seq":1,"runs":[]}`)) {
		t.Fatal("wrong-version delivery accepted")
	}
	// The worker still takes work for the same request.
	run := newRun(t, "Wait", true)
	if !d.deliver(t, req, req.Seq, run) {
		t.Fatal("valid delivery refused after malformed ones")
	}
	recv(t, started, "run start")
	must(t, d.nc.Publish(protocol.SubjectCancel(w.Config().Namespace, w.ID()), []byte(`{"v":1,"run_id":"nope"}`)))
	d.cancel(t, w.ID(), run.RunID) // same subscription: handled after the garbage
	closed(t, cancelled, "run cancelled")
	if it := d.nextItem(t); it.Kind != protocol.ReportRunFailed {
		t.Fatalf("the run asked to cancel reported %+v", it)
	}
	if st := w.Stats(); st.Malformed != 3 {
		t.Fatalf("malformed %d, want 3", st.Malformed)
	}
	if !strings.Contains(logs.String(), "malformed") {
		t.Fatalf("malformed messages not logged: %s", logs.String())
	}
	// And keeps working.
	req2 := d.nextRequest(t)
	d.deliver(t, req2, req2.Seq, newRun(t, "Wait", false))
	if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted || string(it.Output) != "7" {
		t.Fatalf("after malformed messages: %+v", it)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSleepSuspendsAndResumesAfterWakeTime(t *testing.T) {
	t.Parallel()
	var before, after atomic.Int32
	d, w := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Nap", func(ctx workflow.Context, _ struct{}) (string, error) {
			if _, err := workflow.Step(ctx, "before", func(context.Context) (int, error) { before.Add(1); return 1, nil }); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, "nap", time.Hour); err != nil {
				return "", err
			}
			_, err := workflow.Step(ctx, "after", func(context.Context) (int, error) { after.Add(1); return 2, nil })
			return "rested", err
		}))
	})
	req := d.nextRequest(t)
	run := newRun(t, "Nap", nil)
	t0 := time.Now()
	d.deliver(t, req, req.Seq, run)
	if it := d.nextItem(t); it.StepID != "before" {
		t.Fatalf("first report %+v", it)
	}
	step := d.nextItem(t)
	var wake time.Time
	if step.Kind != protocol.ReportStepCompleted || step.StepID != "nap" || step.StepKind != "SLEEP" ||
		json.Unmarshal(step.Output, &wake) != nil || wake.Before(t0.Add(time.Hour)) || wake.After(time.Now().Add(time.Hour)) {
		t.Fatalf("sleep step %+v", step)
	}
	sleep := d.nextItem(t)
	if sleep.Kind != protocol.ReportRunSleep || sleep.Until == nil || !sleep.Until.Equal(wake) {
		t.Fatalf("run_sleep %+v, wake %v", sleep, wake)
	}
	req2 := d.nextRequest(t) // suspended: the slot is free
	d.noItems(t)             // no run_completed, no "after"
	if after.Load() != 0 || w.Stats().RunsSuspended != 1 {
		t.Fatalf("after=%d stats %+v", after.Load(), w.Stats())
	}

	// Delivered again before the wake time: sleeps the rest at once.
	early := run
	early.LeaseToken = 2
	early.Steps = []protocol.StepState{completedStep(t, "before", 1), {StepID: "nap", Status: "COMPLETED", Attempt: 1, Output: step.Output}}
	d.deliver(t, req2, req2.Seq, early)
	if it := d.nextItem(t); it.Kind != protocol.ReportRunSleep || !it.Until.Equal(wake) || it.LeaseToken != 2 {
		t.Fatalf("early replay %+v", it)
	}
	req3 := d.nextRequest(t)

	// Delivered after the wake time: continues after the sleep.
	late := run
	late.LeaseToken = 3
	late.Steps = []protocol.StepState{completedStep(t, "before", 1), completedStep(t, "nap", time.Now().Add(-time.Second).UTC())}
	d.deliver(t, req3, req3.Seq, late)
	if it := d.nextItem(t); it.StepID != "after" || it.Kind != protocol.ReportStepCompleted {
		t.Fatalf("after the wake: %+v", it)
	}
	if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted || string(it.Output) != `"rested"` {
		t.Fatalf("final %+v", it)
	}
	if before.Load() != 1 || after.Load() != 1 {
		t.Fatalf("before ran %d, after ran %d; want 1 and 1", before.Load(), after.Load())
	}
}

func TestWorkflowPanicIsReportedAsRunFailed(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Panic", func(ctx workflow.Context, _ struct{}) (int, error) {
			panic("boom at the depot")
		}))
	})
	req := d.nextRequest(t)
	d.deliver(t, req, req.Seq, newRun(t, "Panic", nil))
	it := d.nextItem(t)
	if it.Kind != protocol.ReportRunFailed || !strings.Contains(it.Error, "boom at the depot") ||
		!strings.Contains(it.Error, "goroutine") || it.ErrorType != "panic" {
		t.Fatalf("want run_failed with message and stack, got %+v", it)
	}
	d.nextRequest(t) // the worker survived and asks for more
}

func TestNonRetryableAndBadInputFailWithoutRetry(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Picky", func(ctx workflow.Context, in orderIn) (int, error) {
			return 0, workflow.NonRetryable(fmt.Errorf("no stock for %d items", in.Items))
		}))
	})
	req := d.nextRequest(t)
	d.deliver(t, req, req.Seq, newRun(t, "Picky", orderIn{Items: 2}))
	if it := d.nextItem(t); it.Kind != protocol.ReportRunFailed || !it.NonRetryable || it.Error != "no stock for 2 items" {
		t.Fatalf("report %+v", it)
	}
	req = d.nextRequest(t)
	d.deliver(t, req, req.Seq, newRun(t, "Picky", "not an object"))
	if it := d.nextItem(t); it.Kind != protocol.ReportRunFailed || !it.NonRetryable || !strings.Contains(it.Error, "decode input") {
		t.Fatalf("report %+v", it)
	}
}

func TestTransientReportErrorIsRetried(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	d, w := start(t, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Retry", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "a", func(context.Context) (int, error) { ran.Add(1); return 5, nil })
		}))
	})
	var failed atomic.Bool
	d.setAnswer(func(it protocol.ReportItem) protocol.ResultCode {
		if it.StepID == "a" && failed.CompareAndSwap(false, true) {
			return protocol.ResultError
		}
		return protocol.ResultOK
	})
	req := d.nextRequest(t)
	d.deliver(t, req, req.Seq, newRun(t, "Retry", nil))
	// The step's result goes with the completion, in one report, sent
	// again as a whole.
	for try := 1; try <= 2; try++ {
		step, end := d.nextItem(t), d.nextItem(t)
		if step.StepID != "a" || step.Attempt != 1 || string(step.Output) != "5" || end.Kind != protocol.ReportRunCompleted {
			t.Fatalf("try %d: want the step and the completion, got %+v and %+v", try, step, end)
		}
	}
	if ran.Load() != 1 || w.Stats().ReportRetries < 1 {
		t.Fatalf("step ran %d times, stats %+v", ran.Load(), w.Stats())
	}
}

func TestUnregisteredTypeFailsRun(t *testing.T) {
	t.Parallel()
	var calls [3]atomic.Int32
	d, _ := start(t, worker.Config{MaxConcurrency: 1}, threeSteps(&calls))
	req := d.nextRequest(t)
	other := newRun(t, "Order", nil)
	other.Version = "v9" // registered as v1
	d.deliver(t, req, req.Seq, other)
	if it := d.nextItem(t); it.Kind != protocol.ReportRunFailed || !strings.Contains(it.Error, "Order@v9 is not registered") {
		t.Fatalf("report %+v", it)
	}
	if calls[0].Load() != 0 {
		t.Fatal("ran a workflow of the wrong version")
	}
}

func TestUnansweredRequestIsRenewed(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{MaxConcurrency: 2, WaitTimeout: 20 * time.Millisecond}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	req1 := d.nextRequest(t)
	req2 := d.nextRequest(t)
	if req1.WaitMS != 20 || req2.Seq != req1.Seq+1 || req2.Credits != 2 {
		t.Fatalf("req1 %+v req2 %+v", req1.WorkRequest, req2.WorkRequest)
	}
	if d.deliver(t, req1, req1.Seq, newRun(t, "X", nil)) {
		t.Fatal("accepted a delivery for an expired request")
	}
}

// Slots freed one by one do not keep a worker at one run per request: once
// its free slots reach twice the outstanding request's credits, it replaces
// the request with a larger one.
func TestRequestIsToppedUpAsSlotsFree(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	started := make(chan struct{}, 100)
	d, w := start(t, worker.Config{MaxConcurrency: 10}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Block", func(ctx workflow.Context, _ struct{}) (int, error) {
			started <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return 1, nil
		}))
	})
	runs := func(n int) []protocol.DeliveredRun {
		rs := make([]protocol.DeliveredRun, n)
		for i := range rs {
			rs[i] = newRun(t, "Block", nil)
		}
		return rs
	}
	req1 := d.nextRequest(t)
	if !d.deliver(t, req1, req1.Seq, runs(10)...) {
		t.Fatal("refused a full delivery")
	}
	for range 10 {
		recv(t, started, "run start")
	}
	// One run ends: a request for 1 slot.
	gate <- struct{}{}
	if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted {
		t.Fatalf("report %+v", it)
	}
	req2 := d.nextRequest(t)
	if req2.Credits != 1 {
		t.Fatalf("req2 credits %d", req2.Credits)
	}
	// Four more end: 5 free, at least twice 1 and 4 more: a larger request
	// supersedes it.
	for range 4 {
		gate <- struct{}{}
		if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted {
			t.Fatalf("report %+v", it)
		}
	}
	req3 := d.nextRequest(t)
	if req3.Seq <= req2.Seq || req3.Credits < 5 {
		t.Fatalf("top-up request seq %d credits %d after seq %d", req3.Seq, req3.Credits, req2.Seq)
	}
	if d.deliver(t, req2, req2.Seq, runs(1)...) {
		t.Fatal("accepted a delivery for the superseded request")
	}
	if !d.deliver(t, req3, req3.Seq, runs(req3.Credits)...) {
		t.Fatal("refused a delivery for the top-up request")
	}
	for range req3.Credits {
		recv(t, started, "run start")
	}
	if st := w.Stats(); st.Running != 10 {
		t.Fatalf("running %d, want 10", st.Running)
	}
	close(gate)
}

// DispatchHops hears of each delivered run when its delivery arrived and
// when its execution began, in that order, before the run's first report.
func TestDispatchHopsMarksDeliveryAndExecution(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	marks := map[string]int64{}
	var calls [3]atomic.Int32
	d, _ := start(t, worker.Config{MaxConcurrency: 2, DispatchHops: func(id uuid.UUID, hop string, ns int64) {
		mu.Lock()
		defer mu.Unlock()
		marks[id.String()+" "+hop] = ns
	}}, threeSteps(&calls))
	req := d.nextRequest(t)
	run := newRun(t, "Order", orderIn{Items: 1})
	run.Version = "v1"
	before := time.Now().UnixNano()
	if !d.deliver(t, req, req.Seq, run) {
		t.Fatal("delivery refused")
	}
	_ = d.nextItem(t) // the first step's report: the execution began
	mu.Lock()
	defer mu.Unlock()
	got, began := marks[run.RunID.String()+" received"], marks[run.RunID.String()+" executing"]
	if got < before || began < got || len(marks) != 2 {
		t.Fatalf("marks %v (delivered after %d): want received, then executing", marks, before)
	}
}
