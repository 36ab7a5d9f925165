package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Durable execution semantics, end to end: every service as in `kagzi dev`,
// real Postgres, real NATS.

// startWorker starts a worker of its own (own NATS connection) on e.
// Under KAGZI_E2E_NATS_AUTH it connects as the worker role.
func (e *env) startWorker(cfg worker.Config, register func(*worker.Worker) error) *worker.Worker {
	e.t.Helper()
	if e.auth == nil {
		return startWorker(e.t, e.ns, cfg, register)
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = worker.DefaultNamespace
	}
	w, err := worker.New(cfg, e.auth.ConnectAs(e.t, nil, protocol.RoleWorker, ns, worker.DefaultIdentity))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := register(w); err != nil {
		e.t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	return w
}

// result waits up to d for a run's result.
func result[T any](t *testing.T, h *client.Handle, d time.Duration) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out T
	err := h.Result(ctx, &out)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run %s did not finish within %v", h.RunID, d)
	}
	return out, err
}

func (e *env) steps(id uuid.UUID) []store.Step {
	e.t.Helper()
	steps, err := e.srv.Store.StepsList(context.Background(), "default", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return steps
}

func (e *env) claims() int64 {
	var n int64
	for _, d := range e.srv.Dispatchers {
		n += d.Stats().Claims
	}
	return n
}

// A sleeping run is woken by the dispatcher's timer, armed from the sleep's
// due time: no statement runs while it sleeps but the sleep itself and the
// claim that wakes it, however long the sleep.
func TestSleepWakesByTimerWithoutScans(t *testing.T) {
	t.Parallel()
	stmts := &stmtcount.Counter{}
	type mark struct{ stmts, claims int64 }
	var envp atomic.Pointer[env]
	claims := func() int64 { return envp.Load().claims() }
	marks := make(chan mark, 4)
	e := start(t, opts{workers: 1, stmts: stmts, register: func(w *worker.Worker) error {
		return worker.Register(w, "Nap", func(ctx workflow.Context, ms int) (int64, error) {
			if _, err := workflow.Step(ctx, "before", func(context.Context) (int, error) {
				marks <- mark{stmts.Load(), claims()}
				return 0, nil
			}); err != nil {
				return 0, err
			}
			if err := workflow.Sleep(ctx, "nap", time.Duration(ms)*time.Millisecond); err != nil {
				return 0, err
			}
			return workflow.Step(ctx, "after", func(context.Context) (int64, error) {
				marks <- mark{stmts.Load(), claims()}
				return time.Now().UnixNano(), nil
			})
		})
	}})
	envp.Store(e)
	ctx := context.Background()
	// nap sleeps one run for ms and returns what the sleep cost.
	nap := func(ms int) (n, claims int64, recent []string) {
		h, err := e.cl.Start(ctx, "Nap", ms, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before, after := <-marks, <-marks
		recent = stmts.Since(before.stmts)
		woke, err := result[int64](t, h, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		steps := e.steps(h.RunID)
		var due time.Time
		for _, s := range steps {
			if s.StepID == "nap" {
				if err := json.Unmarshal(s.Output, &due); err != nil {
					t.Fatal(err)
				}
			}
		}
		late := time.Unix(0, woke).Sub(due)
		n, claims = after.stmts-before.stmts, after.claims-before.claims
		t.Logf("sleep %d ms: %d statements, %d claims while asleep, woke %v after the due time", ms, n, claims, late)
		if late < 0 || late > 5*time.Second {
			t.Fatalf("woke %v after the due time", late)
		}
		return n, claims, recent[:min(int(n), len(recent))]
	}
	var counts []int64
	for _, ms := range []int{200, 800} {
		// The step report, the sleep report, the claim that woke it and the
		// next-due read, plus at most one batch of the reaper's heartbeat
		// writes; on a loaded machine a wakeup relayed after the due time
		// and a renewed request may each add one empty claim. A scan every
		// few milliseconds would cost far more, in every sleep: a sleep
		// that met a one-off burst (a leader's takeover reads, say) is
		// measured once more, and the second must hold.
		n, claims, recent := nap(ms)
		if n > 30 || claims > 4 {
			t.Logf("sleeping %d ms cost %d statements and %d claims, measured again: %q", ms, n, claims, recent)
			if n, claims, recent = nap(ms); n > 30 || claims > 4 {
				t.Fatalf("sleeping %d ms cost %d statements and %d claims, twice: %q", ms, n, claims, recent)
			}
		}
		counts = append(counts, n)
	}
	if counts[1] > counts[0]+8 {
		t.Fatalf("statements grow with the sleep: %d for 200 ms, %d for 800 ms", counts[0], counts[1])
	}
}

// An event sent before the run waits for it is kept and received when it
// waits; each event is received once; a wait times out with an error the
// workflow handles; events to finished or unknown runs are clear errors.
func TestEvents(t *testing.T) {
	t.Parallel()
	gates := sync.Map{} // run id -> chan struct{}: the "ready" step blocks on it
	gate := func(id uuid.UUID) chan struct{} {
		ch, _ := gates.LoadOrStore(id, make(chan struct{}))
		return ch.(chan struct{})
	}
	reached := make(chan uuid.UUID, 8)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Approval", func(ctx workflow.Context, timeoutMS int) ([]string, error) {
				id := ctx.RunID()
				if _, err := workflow.Step(ctx, "ready", func(context.Context) (int, error) {
					reached <- id
					<-gate(id)
					return 0, nil
				}); err != nil {
					return nil, err
				}
				var got []string
				for i := 0; i < 2; i++ {
					v, err := workflow.WaitForEvent[string](ctx, "approve", time.Duration(timeoutMS)*time.Millisecond)
					if errors.Is(err, workflow.ErrEventTimeout) {
						got = append(got, "timeout")
						continue
					}
					if err != nil {
						return nil, err
					}
					got = append(got, v)
				}
				return got, nil
			}),
		)
	}})
	ctx := context.Background()

	// Sent while the run runs, before it waits: kept, then received.
	h, err := e.cl.Start(ctx, "Approval", 60000, client.StartOptions{ExternalID: "exp-1"})
	if err != nil {
		t.Fatal(err)
	}
	if id := <-reached; id != h.RunID {
		t.Fatalf("run %s reached the gate", id)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "approve", "first"); err != nil {
		t.Fatal(err)
	}
	close(gate(h.RunID))
	// The second wait finds nothing and suspends the run; an event sent by
	// external id wakes it.
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	ev, err := e.cl.SendEventByExternalID(ctx, "exp-1", "approve", "second")
	if err != nil || !ev.Woken {
		t.Fatalf("send to a waiting run: %+v %v", ev, err)
	}
	got, err := result[[]string](t, h, 30*time.Second)
	if err != nil || fmt.Sprint(got) != "[first second]" {
		t.Fatalf("received %v %v", got, err)
	}
	for _, s := range e.steps(h.RunID) {
		if s.Kind == store.StepEvent && s.Status != store.StepCompleted {
			t.Fatalf("event step %s is %s", s.StepID, s.Status)
		}
	}
	evs, err := e.srv.Store.EventsList(ctx, "default", h.RunID)
	if err != nil || len(evs) != 2 || evs[0].ConsumedBy != "event:approve" || evs[1].ConsumedBy != "event:approve#2" {
		t.Fatalf("events %+v %v", evs, err)
	}
	// The run is finished: sending is refused; to an unknown run too.
	if _, err := e.cl.SendEvent(ctx, h.RunID, "approve", "late"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("send to a finished run: %v", err)
	}
	if _, err := e.cl.SendEvent(ctx, uuid.New(), "approve", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("send to an unknown run: %v", err)
	}

	// Timeouts: one event comes, the second wait times out after 300 ms.
	h2, err := e.cl.Start(ctx, "Approval", 300, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	if _, err := e.cl.SendEvent(ctx, h2.RunID, "approve", "only"); err != nil {
		t.Fatal(err)
	}
	close(gate(h2.RunID))
	got, err = result[[]string](t, h2, 30*time.Second)
	if err != nil || fmt.Sprint(got) != "[only timeout]" {
		t.Fatalf("with a timeout: %v %v", got, err)
	}
}

// waitStatus waits (by polling the store, at most 10 s) until the run has
// the status: the test's own observation, not a synchronisation of the
// system under test.
func waitStatus(t *testing.T, e *env, id uuid.UUID, want client.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.cl.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", id, r.Status, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A step failing twice then succeeding is invoked 3 times and recorded as 3
// attempts; a non-retryable error fails the run after 1 attempt; a long
// backoff suspends the run; a workflow that keeps failing is failed after
// its run's max attempts.
func TestRetries(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	register := func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Flaky", func(ctx workflow.Context, failures int) (int, error) {
				return workflow.Step(ctx, "call", func(sctx context.Context) (int, error) {
					calls.inc("%s", ctx.RunID())
					info, _ := workflow.StepInfoFrom(sctx)
					if info.Attempt <= failures {
						return 0, fmt.Errorf("attempt %d failed", info.Attempt)
					}
					return info.Attempt, nil
				}, workflow.WithRetry(retry.Policy{MaxAttempts: 5, InitialInterval: 20 * time.Millisecond}))
			}),
			worker.Register(w, "Doomed", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Step(ctx, "call", func(context.Context) (int, error) {
					calls.inc("%s", ctx.RunID())
					return 0, workflow.NonRetryable(errors.New("card declined"))
				})
			}),
			worker.Register(w, "Poison", func(ctx workflow.Context, _ struct{}) (int, error) {
				calls.inc("%s", ctx.RunID())
				return 0, errors.New("always broken")
			}),
		)
	}
	e := start(t, opts{workers: 1, register: register})
	ctx := context.Background()

	h, err := e.cl.Start(ctx, "Flaky", 2, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](t, h, 30*time.Second); err != nil || n != 3 {
		t.Fatalf("flaky: %d %v", n, err)
	}
	if n := calls.snapshot()[h.RunID.String()]; n != 3 {
		t.Fatalf("step invoked %d times, want 3", n)
	}
	steps := e.steps(h.RunID)
	if len(steps) != 3 {
		t.Fatalf("%d step attempts recorded, want 3", len(steps))
	}
	for i, s := range steps {
		wantStatus, latest := store.StepFailed, false
		if i == 2 {
			wantStatus, latest = store.StepCompleted, true
		}
		if s.Attempt != i+1 || s.Status != wantStatus || s.IsLatest != latest || (i < 2 && s.RetryAt == nil) {
			t.Fatalf("attempt %d: %+v", i+1, s)
		}
	}

	h, err = e.cl.Start(ctx, "Doomed", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed || re.Message != "card declined" {
		t.Fatalf("doomed: %v", err)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 1 || calls.snapshot()[h.RunID.String()] != 1 {
		t.Fatalf("a non-retryable error took %d run attempts, %d calls", r.Attempts, calls.snapshot()[h.RunID.String()])
	}

	h, err = e.cl.Start(ctx, "Poison", nil, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed {
		t.Fatalf("poison: %v", err)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 3 || calls.snapshot()[h.RunID.String()] != 3 {
		t.Fatalf("poison run: %d attempts, %d calls; want 3 and 3", r.Attempts, calls.snapshot()[h.RunID.String()])
	}

	// A worker that waits for no backoff in place: the retry suspends the
	// run, and it completes on its next delivery.
	w := e.startWorker(worker.Config{Queue: "suspending", MaxInlineRetry: -1}, register)
	h, err = e.cl.Start(ctx, "Flaky", 1, client.StartOptions{Queue: "suspending"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](t, h, 30*time.Second); err != nil || n != 2 {
		t.Fatalf("suspended retry: %d %v", n, err)
	}
	// Two deliveries: the first suspended for the backoff, the second
	// completed (the result above).
	if s := w.Stats(); s.RunsSuspended != 1 || s.RunsStarted != 2 {
		t.Fatalf("worker stats %+v: want the run delivered twice, suspended once", s)
	}
}

// Cancelling a run blocked in a step cancels the step's context at once
// (pushed, within 500 ms under load); its late reports are refused; a sleeping run asked to cancel ends
// CANCELLED, and a terminated one at once.
func TestCancel(t *testing.T) {
	t.Parallel()
	inStep := make(chan struct{}, 1)
	stepDone := make(chan time.Time, 1)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Blocked", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Step(ctx, "block", func(sctx context.Context) (int, error) {
					inStep <- struct{}{}
					<-sctx.Done()
					stepDone <- time.Now()
					return 0, sctx.Err()
				})
			}),
			worker.Register(w, "Sleepy", func(ctx workflow.Context, _ struct{}) (int, error) {
				return 0, workflow.Sleep(ctx, "nap", time.Hour)
			}),
		)
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Blocked", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-inStep
	// The lease token is the engine's, not the client's: read the store.
	running, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
	if err != nil || running.Status != store.StatusRunning {
		t.Fatalf("run %+v %v", running, err)
	}
	cancelled := time.Now()
	if err := e.cl.Cancel(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-stepDone:
		// Pushed, not polled: tens of milliseconds on an idle machine. The
		// bound leaves room for the race detector beside every other
		// package's tests on two cores; a poll would take seconds.
		if took := at.Sub(cancelled); took > 500*time.Millisecond {
			t.Fatalf("the step's context ended %v after the cancel, want within 500 ms", took)
		} else {
			t.Logf("step context cancelled %v after the cancel", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the step's context was not cancelled")
	}
	var re *client.RunError
	if _, err := result[int](t, h, 10*time.Second); !errors.As(err, &re) || re.Status != client.StatusCancelled {
		t.Fatalf("result of a cancelled run: %v", err)
	}
	// A late report from the cancelled attempt is refused.
	rep := report(t, e.nc, &protocol.Report{WorkerID: uuid.New(), Namespace: "default", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: h.RunID, LeaseToken: running.LeaseToken, StepID: "block", Attempt: 1, Output: json.RawMessage(`1`)},
		{Kind: protocol.ReportRunCompleted, RunID: h.RunID, LeaseToken: running.LeaseToken, Output: json.RawMessage(`1`)},
	}})
	for i, r := range rep.Results {
		if r.Code != protocol.ResultLeaseLost {
			t.Fatalf("late item %d: %s %s", i, r.Code, r.Message)
		}
	}
	if steps := e.steps(h.RunID); len(steps) != 0 {
		t.Fatalf("the cancelled step was recorded: %+v", steps)
	}

	// A sleeping run asked to cancel is delivered at once, its sleep
	// returns the cancellation, and it ends CANCELLED.
	h, err = e.cl.Start(ctx, "Sleepy", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	if err := e.cl.Cancel(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := result[int](t, h, 10*time.Second); !errors.As(err, &re) || re.Status != client.StatusCancelled ||
		!strings.Contains(re.Message, "cancelled") {
		t.Fatalf("sleeping run asked to cancel: %v", err)
	}
	// A terminated sleeping run ends at once.
	h, err = e.cl.Start(ctx, "Sleepy", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	if err := e.cl.Terminate(ctx, h.RunID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Status != client.StatusCancelled || r.AvailableAt != nil || r.Error != "terminated: no longer needed" {
		t.Fatalf("terminated sleeping run: %s due %v %q", r.Status, r.AvailableAt, r.Error)
	}
}

// A parent with 10 children completes with all 10 results, on a single
// worker with a single slot: the waiting parent holds no slot. Each child
// is started once. Cancelling a parent asks its running children to cancel.
func TestChildrenFanOutFanIn(t *testing.T) {
	t.Parallel()
	childBlocked := make(chan struct{}, 1)
	childDone := make(chan error, 1)
	e := start(t, opts{workers: 1, concurrency: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "FanOut", func(ctx workflow.Context, n int) ([]int, error) {
				fs := make([]*workflow.ChildFuture[int], n)
				for i := range fs {
					fs[i] = workflow.StartChild[int](ctx, fmt.Sprintf("child-%d", i), "Square", i)
				}
				return workflow.ChildAll(ctx, fs)
			}),
			worker.Register(w, "Square", func(ctx workflow.Context, n int) (int, error) {
				return workflow.Step(ctx, "square", func(context.Context) (int, error) { return n * n, nil })
			}),
			worker.Register(w, "Parent", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Child[int](ctx, "blocker", "Blocker", nil)
			}),
			worker.Register(w, "Blocker", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Step(ctx, "block", func(sctx context.Context) (int, error) {
					childBlocked <- struct{}{}
					<-sctx.Done()
					childDone <- context.Cause(sctx)
					return 0, sctx.Err()
				})
			}),
		)
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "FanOut", 10, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := result[[]int](t, h, 60*time.Second)
	if err != nil || fmt.Sprint(got) != "[0 1 4 9 16 25 36 49 64 81]" {
		t.Fatalf("fan-in: %v %v", got, err)
	}
	kids, _, err := e.srv.Store.RunsList(ctx, store.RunsListParams{Namespace: "default", ParentID: &h.RunID, Limit: 100})
	if err != nil || len(kids) != 10 {
		t.Fatalf("%d children, want 10 (%v)", len(kids), err)
	}
	for _, k := range kids {
		if k.Status != store.StatusCompleted || k.ParentStepID == "" || k.ID != protocol.ChildRunID(h.RunID, k.ParentStepID, 1) {
			t.Fatalf("child %+v", k)
		}
	}
	for _, s := range e.steps(h.RunID) {
		if s.Kind != store.StepChild || s.Status != store.StepCompleted || s.ChildRunID == nil {
			t.Fatalf("parent step %+v", s)
		}
	}

	// Cancel cascades. The parent waits (holding no slot) while its child
	// blocks in a step (holding the worker's one slot).
	p, err := e.cl.Start(ctx, "Parent", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-childBlocked
	waitStatus(t, e, p.RunID, client.StatusSleeping)
	if err := e.cl.Cancel(ctx, p.RunID); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-childDone:
		if !errors.Is(cause, workflow.ErrCancelled) {
			t.Fatalf("child's context ended with %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the child of a cancelled parent kept running")
	}
	// Both handle the request and end CANCELLED.
	child := protocol.ChildRunID(p.RunID, "blocker", 1)
	for _, id := range []uuid.UUID{child, p.RunID} {
		var re *client.RunError
		if _, err := result[int](t, e.cl.Handle(id), 10*time.Second); !errors.As(err, &re) || re.Status != client.StatusCancelled {
			t.Fatalf("run %s after the parent's cancel: %v", id, err)
		}
	}
}

// Several steps of one run execute at once, each memoized on its own.
func TestParallelSteps(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int32
	all := make(chan struct{})
	var arrived atomic.Int32
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Fetch3", func(ctx workflow.Context, _ struct{}) (int, error) {
			vals := make([]int, 3)
			branches := make([]func(workflow.Context) error, 3)
			for i := range branches {
				branches[i] = func(ctx workflow.Context) (err error) {
					vals[i], err = workflow.Step(ctx, fmt.Sprintf("fetch-%d", i), func(context.Context) (int, error) {
						n := inFlight.Add(1)
						defer inFlight.Add(-1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						if arrived.Add(1) == 3 {
							close(all)
						}
						<-all // every branch is in its step at once
						return i + 1, nil
					})
					return err
				}
			}
			if err := workflow.Parallel(ctx, workflow.CollectAll, branches...); err != nil {
				return 0, err
			}
			return vals[0] + vals[1] + vals[2], nil
		})
	}})
	h, err := e.cl.Start(context.Background(), "Fetch3", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](t, h, 30*time.Second); err != nil || n != 6 {
		t.Fatalf("result %d %v", n, err)
	}
	if peak.Load() != 3 || len(e.steps(h.RunID)) != 3 {
		t.Fatalf("peak %d steps in flight, %d recorded", peak.Load(), len(e.steps(h.RunID)))
	}
}

// A worker that dies between two steps (its NATS connection gone, its run
// recovered as the reaper does) does not make the next worker run the
// first step again.
func TestWorkerCrashBetweenStepsDoesNotRerunFirst(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	inSecond := make(chan struct{}, 1)
	var first atomic.Bool
	first.Store(true)
	register := func(w *worker.Worker) error {
		return worker.Register(w, "TwoSteps", func(ctx workflow.Context, _ struct{}) (string, error) {
			a, err := workflow.Step(ctx, "one", func(context.Context) (string, error) {
				calls.inc("one")
				return "a", nil
			})
			if err != nil {
				return "", err
			}
			b, err := workflow.Step(ctx, "two", func(sctx context.Context) (string, error) {
				calls.inc("two")
				if first.CompareAndSwap(true, false) {
					inSecond <- struct{}{}
					<-sctx.Done() // the first worker hangs here until it is stopped
					return "", sctx.Err()
				}
				return "b", nil
			})
			return a + b, err
		})
	}
	e := start(t, opts{workers: -1})
	ctx := context.Background()
	nc := e.ns.Connect(t, worker.Inbox("", ""))
	w1, err := worker.New(worker.Config{DrainTimeout: time.Millisecond}, nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := register(w1); err != nil {
		t.Fatal(err)
	}
	if err := w1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := e.cl.Start(ctx, "TwoSteps", nil, client.StartOptions{RetryPolicy: &retry.Policy{InitialInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	<-inSecond
	// The crash: the worker's connection is gone; nothing it does reaches
	// the engine any more. The reaper would recover its runs, which its
	// last heartbeat listed: do it now.
	// (A row the reaper's flush holds at that moment is skipped: again.)
	nc.Close()
	var rec []store.RecoveredRun
	waitUntil(t, 10*time.Second, "the run to be recovered", func() bool {
		if rec, err = e.srv.Store.RunsRecoverWorker(ctx, w1.ID(), h.RunID); err != nil {
			t.Fatal(err)
		}
		return len(rec) > 0
	})
	if len(rec) != 1 || rec[0].RunID != h.RunID || rec[0].Status != store.StatusPending || rec[0].Undelivered {
		t.Fatalf("recover: %+v", rec)
	}
	t.Cleanup(w1.Stop)
	e.startWorker(worker.Config{}, register)
	if out, err := result[string](t, h, 30*time.Second); err != nil || out != "ab" {
		t.Fatalf("result %q %v", out, err)
	}
	if got := calls.snapshot(); got["one"] != 1 || got["two"] != 2 {
		t.Fatalf("step calls %v: step one must run once", got)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", r.Attempts)
	}
}

// Two workers registering v1 and v2 of a type each receive only the runs
// of their version.
func TestVersionsRouteToTheirWorkers(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1})
	for _, v := range []string{"v1", "v2"} {
		e.startWorker(worker.Config{}, func(w *worker.Worker) error {
			return worker.Register(w, "Greet", func(ctx workflow.Context, _ struct{}) (string, error) {
				return "worker " + v + " ran " + ctx.Version(), nil
			}, worker.WithVersion(v))
		})
	}
	ctx := context.Background()
	var hs []*client.Handle
	var want []string
	for i := 0; i < 10; i++ {
		v := []string{"v1", "v2"}[i%2]
		h, err := e.cl.Start(ctx, "Greet", nil, client.StartOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		want = append(want, "worker "+v+" ran "+v)
	}
	for i, h := range hs {
		if got, err := result[string](t, h, 30*time.Second); err != nil || got != want[i] {
			t.Fatalf("run %d: %q %v, want %q", i, got, err, want[i])
		}
	}
}

// gated registers "Gated": a step that counts runs in flight (and the peak)
// and waits for the gate to open.
type gated struct {
	inFlight, peak atomic.Int32
	arrived        chan struct{}
	open           chan struct{}
}

func newGated() *gated { return &gated{arrived: make(chan struct{}, 100), open: make(chan struct{})} }

func (g *gated) register(w *worker.Worker) error {
	return worker.Register(w, "Gated", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.Step(ctx, "work", func(context.Context) (int, error) {
			n := g.inFlight.Add(1)
			defer g.inFlight.Add(-1)
			for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
			}
			g.arrived <- struct{}{}
			<-g.open
			return 1, nil
		})
	})
}

// A worker runs at most its max concurrency at once; a global limit caps a
// type across workers.
func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	g := newGated()
	e := start(t, opts{workers: 1, concurrency: 2, register: g.register})
	ctx := context.Background()
	launch := func(n int, queue string) []*client.Handle {
		hs := make([]*client.Handle, n)
		for i := range hs {
			h, err := e.cl.Start(ctx, "Gated", nil, client.StartOptions{Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			hs[i] = h
		}
		return hs
	}
	hs := launch(6, "")
	<-g.arrived
	<-g.arrived
	waitRunning(t, e, 2)
	close(g.open)
	waitAll(t, hs, 30*time.Second)
	if p := g.peak.Load(); p != 2 {
		t.Fatalf("peak %d runs at once on a worker of max concurrency 2", p)
	}

	// Global: 2 of type Gated in queue "limited", across two workers of 5.
	// Runs waiting for a slot are claimed when a running one finishes (its
	// end announces the queue), not by claiming again and again meanwhile.
	g2 := newGated()
	claims0 := e.claims()
	if _, err := e.cl.SetConcurrencyLimit(ctx, "limited", "Gated", 2); err != nil {
		t.Fatal(err)
	}
	e.startWorker(worker.Config{Queue: "limited", MaxConcurrency: 5}, g2.register)
	e.startWorker(worker.Config{Queue: "limited", MaxConcurrency: 5}, g2.register)
	hs = launch(8, "limited")
	<-g2.arrived
	<-g2.arrived
	waitRunning(t, e, 2)
	close(g2.open)
	waitAll(t, hs, 30*time.Second)
	if p := g2.peak.Load(); p != 2 {
		t.Fatalf("peak %d runs at once under a global limit of 2 (10 slots)", p)
	}
	if n := e.claims() - claims0; n > 60 {
		t.Fatalf("%d claims for 8 runs under a limit: the dispatcher polled", n)
	}
}

// A due run that no worker can take (a type nobody registered) does not
// make the dispatcher claim in a loop: it looks again with a backoff.
func TestUnservedRunsDoNotSpinTheDispatcher(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: threeSteps(newCounter())})
	ctx := context.Background()
	if _, err := e.cl.Start(ctx, "NobodyServesThis", nil, client.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := e.cl.Start(ctx, "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result[int](t, h, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c0 := e.claims()
	time.Sleep(2 * time.Second) // the measured window
	// Backing off from 100 ms: at most a handful of looks in 2 s.
	if n := e.claims() - c0; n > 10 {
		t.Fatalf("%d claims in 2 s with one unserved run", n)
	}
	// Work for the served type still runs at once.
	h, err = e.cl.Start(ctx, "Three", 2, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result[int](t, h, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitRunning checks, once n runs are in their step, that the store shows
// exactly n RUNNING: none beyond the limit was claimed.
func waitRunning(t *testing.T, e *env, n int) {
	t.Helper()
	runs, _, err := e.srv.Store.RunsList(context.Background(), store.RunsListParams{Namespace: "default",
		Statuses: []store.RunStatus{store.StatusRunning}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("%d runs RUNNING, want %d", len(runs), n)
	}
}

// Runs are claimed highest priority first, then oldest.
func TestPriorities(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []int
	e := start(t, opts{workers: -1})
	ctx := context.Background()
	prios := []int{0, 5, 1, 5, 10, -3}
	for i, p := range prios {
		if _, err := e.cl.Start(ctx, "Prio", i, client.StartOptions{Priority: p}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{}, len(prios))
	e.startWorker(worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) error {
		return worker.Register(w, "Prio", func(ctx workflow.Context, i int) (int, error) {
			return workflow.Step(ctx, "run", func(context.Context) (int, error) {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				done <- struct{}{}
				return i, nil
			})
		})
	})
	for range prios {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("runs did not all run")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// By priority: 10 (#4), 5 (#1, then #3), 1 (#2), 0 (#0), -3 (#5).
	if fmt.Sprint(order) != "[4 1 3 2 0 5]" {
		t.Fatalf("ran in order %v", order)
	}
}

// A failed run (a dead letter) retried by the client resumes after its
// last completed step with a fresh budget.
func TestRetryFailedRun(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	var broken atomic.Bool
	broken.Store(true)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Fragile", func(ctx workflow.Context, _ struct{}) (string, error) {
			a, err := workflow.Step(ctx, "prepare", func(context.Context) (string, error) {
				calls.inc("prepare")
				return "prepared", nil
			})
			if err != nil {
				return "", err
			}
			return workflow.Step(ctx, "commit", func(context.Context) (string, error) {
				calls.inc("commit")
				if broken.Load() {
					return "", errors.New("downstream is down")
				}
				return a + "+committed", nil
			}, workflow.WithRetry(retry.Policy{MaxAttempts: 2, InitialInterval: 10 * time.Millisecond}))
		})
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Fragile", nil, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result[string](t, h, 30*time.Second); err == nil {
		t.Fatal("the run did not fail")
	}
	dead, _, err := e.cl.List(ctx, client.ListOptions{Statuses: []client.RunStatus{client.StatusFailed}})
	if err != nil || len(dead) != 1 || dead[0].ID != h.RunID {
		t.Fatalf("dead letters %v %v", dead, err)
	}
	broken.Store(false)
	if _, err := e.cl.Retry(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	if out, err := result[string](t, h, 30*time.Second); err != nil || out != "prepared+committed" {
		t.Fatalf("after retry: %q %v", out, err)
	}
	if got := calls.snapshot(); got["prepare"] != 1 || got["commit"] != 3 {
		t.Fatalf("calls %v: prepare must not run again; commit fails twice then succeeds", got)
	}
}

// A run past its deadline has its context ended in the worker (which
// reports nothing) and is failed by the reaper with store.DeadlineError.
func TestDeadline(t *testing.T) {
	t.Parallel()
	stepStarted, stepEnded := make(chan struct{}, 1), make(chan error, 1)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Slow", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "slow", func(sctx context.Context) (int, error) {
				stepStarted <- struct{}{}
				<-sctx.Done()
				stepEnded <- context.Cause(sctx)
				return 0, sctx.Err()
			})
		})
	}})
	h, err := e.cl.Start(context.Background(), "Slow", nil, client.StartOptions{Deadline: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed || re.Message != store.DeadlineError {
		t.Fatalf("result past the deadline: %v", err)
	}
	select {
	case <-stepStarted:
		select {
		case cause := <-stepEnded:
			if !errors.Is(cause, context.DeadlineExceeded) {
				t.Fatalf("the step's context ended with %v", cause)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the step's context did not end at the deadline")
		}
	default:
		// On a slow machine the deadline can pass before the run is
		// delivered: the reaper fails it and the step never starts.
	}
	if steps := e.steps(h.RunID); len(steps) != 0 {
		t.Fatalf("the abandoned step was recorded: %+v", steps)
	}
}
