package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Failure paths end as documented, end to end: each of these ran away
// while a delivery dropped the step fields that replay needs (error type,
// retry time, run attempt, tries).

// A child that fails non-retryably fails its parent's Get once per parent
// attempt: the parent starts one child per attempt and then fails, instead
// of starting children without end.
func TestChildFailureEndsParent(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Refuser", func(ctx workflow.Context, _ struct{}) (int, error) {
				return 0, workflow.NonRetryable(errors.New("refused"))
			}),
			worker.Register(w, "Parent", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Child[int](ctx, "child", "Refuser", nil, workflow.WithChildRetry(retry.Policy{MaxAttempts: 1}))
			}),
		)
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Parent", nil, client.StartOptions{
		RetryPolicy: &retry.Policy{MaxAttempts: 2, InitialInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed {
		t.Fatalf("parent: %v", err)
	}
	children := e.children(h.RunID)
	if len(children) != 2 {
		t.Fatalf("the parent started %d children over 2 attempts, want 2", len(children))
	}
	for _, c := range children {
		if c.Status != store.StatusFailed {
			t.Fatalf("child %s is %s", c.ID, c.Status)
		}
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 2 {
		t.Fatalf("parent made %d attempts, want 2", r.Attempts)
	}
}

// A step's retry budget holds across suspensions: MaxAttempts 3 with a
// backoff the worker does not wait for in place is three invocations, then
// the failure is final and the run fails once (its own policy allows one
// attempt).
func TestStepRetryBudgetAcrossSuspensions(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	register := func(w *worker.Worker) error {
		return worker.Register(w, "AlwaysFails", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "flaky", func(context.Context) (int, error) {
				calls.inc("%s", ctx.RunID())
				return 0, errors.New("still broken")
			}, workflow.WithRetry(retry.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond}))
		})
	}
	e := start(t, opts{workers: -1, register: register})
	w := e.startWorker(worker.Config{Queue: "budget", MaxInlineRetry: -1}, register)
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "AlwaysFails", nil, client.StartOptions{Queue: "budget", RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed || re.Message != "still broken" {
		t.Fatalf("run: %v", err)
	}
	if n := calls.snapshot()[h.RunID.String()]; n != 3 {
		t.Fatalf("the step ran %d times, want 3", n)
	}
	r, _ := e.cl.Get(ctx, h.RunID)
	if r.Attempts != 1 {
		t.Fatalf("run attempts %d, want 1", r.Attempts)
	}
	// Three deliveries: two suspended for a backoff, the third failed.
	if s := idleStats(t, w); s.RunsStarted != 3 || s.RunsSuspended != 2 || s.RunsFailed != 1 {
		t.Fatalf("worker stats %+v: want 3 deliveries, 2 suspensions, 1 failure", s)
	}
	var failed int
	for _, s := range e.steps(h.RunID) {
		if s.Status == store.StepFailed {
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("%d failed attempts recorded, want 3", failed)
	}
}

// A step failure recorded as final is returned again on the next delivery
// (the workflow handled it and slept) with its message and type, without
// running the step again.
func TestFinalStepFailureIsReplayed(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Handles", func(ctx workflow.Context, _ struct{}) (string, error) {
			_, err := workflow.Step(ctx, "once", func(context.Context) (int, error) {
				calls.inc("%s", ctx.RunID())
				return 0, fmt.Errorf("charge: %w", &declined{})
			}, workflow.WithRetry(retry.Policy{MaxAttempts: 1}))
			if err == nil {
				return "", errors.New("the failing step succeeded")
			}
			if err := workflow.Sleep(ctx, "nap", 50*time.Millisecond); err != nil {
				return "", err
			}
			return workflow.ErrorType(err) + ": " + err.Error(), nil
		})
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Handles", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := result[string](t, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := "declined: charge: card declined"; got != want {
		t.Fatalf("replayed failure %q, want %q", got, want)
	}
	if n := calls.snapshot()[h.RunID.String()]; n != 1 {
		t.Fatalf("the step ran %d times, want 1", n)
	}
}

type declined struct{}

func (*declined) Error() string { return "card declined" }

// A wait that timed out stays timed out: an event sent afterwards is not
// taken by a later replay of the wait, and stays unconsumed.
func TestEventTimeoutIsReplayed(t *testing.T) {
	t.Parallel()
	timedOut := make(chan struct{}, 1)
	sent := make(chan struct{})
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Waits", func(ctx workflow.Context, _ struct{}) (string, error) {
			v, err := workflow.WaitForEvent[string](ctx, "go", 100*time.Millisecond)
			outcome := "got " + v
			if errors.Is(err, workflow.ErrEventTimeout) {
				outcome = "timed out"
			} else if err != nil {
				return "", err
			}
			if _, err := workflow.Step(ctx, "signal", func(context.Context) (int, error) {
				select {
				case timedOut <- struct{}{}:
				default:
				}
				<-sent
				return 0, nil
			}); err != nil {
				return "", err
			}
			// A durable sleep makes the run replay the wait once more.
			if err := workflow.Sleep(ctx, "nap", 50*time.Millisecond); err != nil {
				return "", err
			}
			return outcome, nil
		})
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Waits", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-timedOut
	ev, err := e.cl.SendEvent(ctx, h.RunID, "go", "late")
	close(sent)
	if err != nil {
		t.Fatal(err)
	}
	got, err := result[string](t, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got != "timed out" {
		t.Fatalf("result %q: the late event %s was taken by a replay of a wait that timed out", got, ev.ID)
	}
}

// idleStats returns w's counters once no run executes on it any more: the
// client learns a run's end from the engine before the worker has finished
// its own bookkeeping of the execution.
func idleStats(t *testing.T, w *worker.Worker) worker.Stats {
	t.Helper()
	var s worker.Stats
	waitUntil(t, 10*time.Second, "the worker's runs to end", func() bool {
		s = w.Stats()
		return s.Running == 0 && s.Ending == 0
	})
	return s
}

// children lists the child runs of a parent.
func (e *env) children(parent uuid.UUID) []store.Run {
	e.t.Helper()
	runs, _, err := e.srv.Store.RunsList(context.Background(), store.RunsListParams{Namespace: "default", ParentID: &parent, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}
