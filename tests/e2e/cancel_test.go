package e2e_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Cancel is a request the workflow handles: a run waiting for an event
// sees its wait return the cancellation, runs cleanup steps (one of them
// sleeping durably, so the cleanup itself is replayed), and ends
// CANCELLED; a workflow that answers the request with a result completes.
// The cleanup step runs once.
func TestCancelRequestRunsCleanup(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	waiting := make(chan uuid.UUID, 2)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Cleans", func(ctx workflow.Context, complete bool) (string, error) {
			if _, err := workflow.Step(ctx, "begin", func(context.Context) (int, error) {
				waiting <- ctx.RunID()
				return 1, nil
			}); err != nil {
				return "", err
			}
			_, err := workflow.WaitForEvent[string](ctx, "never", 0)
			if !errors.Is(err, workflow.ErrCancelled) {
				return "", errors.New("the wait did not return the cancellation")
			}
			// Work started with the cancelled context is refused.
			if _, serr := workflow.Step(ctx, "refused", func(context.Context) (int, error) {
				calls.inc("%s/refused", ctx.RunID())
				return 0, nil
			}); !errors.Is(serr, workflow.ErrCancelled) {
				return "", errors.New("a new step ran with the cancelled context")
			}
			clean := workflow.WithoutCancel(ctx)
			if err := workflow.Sleep(clean, "settle", 20*time.Millisecond); err != nil {
				return "", err
			}
			if _, err := workflow.Step(clean, "undo", func(context.Context) (int, error) {
				calls.inc("%s/undo", ctx.RunID())
				return 1, nil
			}); err != nil {
				return "", err
			}
			if complete {
				return "undone", nil
			}
			return "", err
		})
	}})
	ctx := context.Background()
	for _, complete := range []bool{false, true} {
		h, err := e.cl.Start(ctx, "Cleans", complete, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-waiting
		waitStatus(t, e, h.RunID, client.StatusSleeping)
		if err := e.cl.Cancel(ctx, h.RunID); err != nil {
			t.Fatal(err)
		}
		out, err := result[string](t, h, 20*time.Second)
		var re *client.RunError
		switch {
		case complete && (err != nil || out != "undone"):
			t.Fatalf("a workflow that answers the request with a result: %q %v", out, err)
		case !complete && (!errors.As(err, &re) || re.Status != client.StatusCancelled || re.Message != workflow.ErrCancelled.Error()):
			t.Fatalf("a workflow that stops on the request: %v", err)
		}
		c := calls.snapshot()
		if c[h.RunID.String()+"/undo"] != 1 || c[h.RunID.String()+"/refused"] != 0 {
			t.Fatalf("cleanup ran %d times, the refused step %d", c[h.RunID.String()+"/undo"], c[h.RunID.String()+"/refused"])
		}
	}
}

// When a parent ends (here it fails), each child still live gets its
// parent-close policy: the default terminates it, REQUEST_CANCEL asks it
// (it cleans up and ends CANCELLED), ABANDON leaves it running (it
// completes later). A parent that passes its deadline closes the same way.
func TestParentClosePolicies(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	started := make(chan string, 8)
	var allStarted chan struct{}
	var mu sync.Mutex
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Waiter", func(ctx workflow.Context, name string) (string, error) {
				if _, err := workflow.Step(ctx, "started", func(context.Context) (int, error) {
					started <- name
					return 0, nil
				}); err != nil {
					return "", err
				}
				v, err := workflow.WaitForEvent[string](ctx, "go", 0)
				if errors.Is(err, workflow.ErrCancelled) {
					_, _ = workflow.Step(workflow.WithoutCancel(ctx), "cleanup", func(context.Context) (int, error) {
						calls.inc("%s/cleanup", name)
						return 0, nil
					})
				}
				return v, err
			}),
			worker.Register(w, "Closer", func(ctx workflow.Context, sleep bool) (int, error) {
				for _, c := range []struct {
					name   string
					policy workflow.ParentClosePolicy
				}{{"terminate", ""}, {"request", workflow.ParentCloseRequestCancel}, {"abandon", workflow.ParentCloseAbandon}} {
					opts := []workflow.ChildOption{}
					if c.policy != "" {
						opts = append(opts, workflow.WithParentClosePolicy(c.policy))
					}
					workflow.StartChild[string](ctx, c.name, "Waiter", c.name, opts...)
				}
				// Child starts go with the next report, this step's.
				if _, err := workflow.Step(ctx, "sent", func(context.Context) (int, error) { return 0, nil }); err != nil {
					return 0, err
				}
				// Once every child runs (a child that never started would be
				// cancelled at once, whatever its policy).
				if _, err := workflow.Step(ctx, "spawned", func(context.Context) (int, error) {
					mu.Lock()
					ch := allStarted
					mu.Unlock()
					<-ch
					return 0, nil
				}); err != nil {
					return 0, err
				}
				if sleep {
					// Past the deadline: the reaper fails the parent.
					return 0, workflow.Sleep(ctx, "long", time.Hour)
				}
				return 0, workflow.NonRetryable(errors.New("parent gives up"))
			}),
		)
	}})
	ctx := context.Background()
	for _, byDeadline := range []bool{false, true} {
		o := client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}}
		if byDeadline {
			o.Deadline = time.Now().Add(2 * time.Second)
		}
		mu.Lock()
		allStarted = make(chan struct{})
		mu.Unlock()
		h, err := e.cl.Start(ctx, "Closer", byDeadline, o)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-started
		}
		close(allStarted)
		var re *client.RunError
		if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed {
			t.Fatalf("parent: %v", err)
		}
		child := func(step string) uuid.UUID { return protocol.ChildRunID(h.RunID, step, 1) }
		wait := func(step string, want client.RunStatus, msg string) {
			t.Helper()
			var re *client.RunError
			_, err := result[string](t, e.cl.Handle(child(step)), 20*time.Second)
			if !errors.As(err, &re) || re.Status != want || re.Message != msg {
				t.Fatalf("child %s (deadline %v): %v, want %s %q", step, byDeadline, err, want, msg)
			}
		}
		wait("terminate", client.StatusCancelled, "terminated: parent closed")
		wait("request", client.StatusCancelled, workflow.ErrCancelled.Error())
		if n := calls.snapshot()["request/cleanup"]; n != map[bool]int{false: 1, true: 2}[byDeadline] {
			t.Fatalf("the child asked to cancel cleaned up %d times in all", n)
		}
		if calls.snapshot()["terminate/cleanup"] != 0 {
			t.Fatal("the terminated child ran its cleanup")
		}
		// The abandoned child lives on and completes when its event comes.
		if r, _ := e.cl.Get(ctx, child("abandon")); r.Status.Terminal() || r.CancelRequestedAt != nil {
			t.Fatalf("abandoned child: %s asked %v", r.Status, r.CancelRequestedAt)
		}
		if _, err := e.cl.SendEvent(ctx, child("abandon"), "go", "later"); err != nil {
			t.Fatal(err)
		}
		if v, err := result[string](t, e.cl.Handle(child("abandon")), 20*time.Second); err != nil || v != "later" {
			t.Fatalf("abandoned child: %q %v", v, err)
		}
	}
}

// A worker that missed the pushed cancel notice (no relay was listening
// when the run was asked) learns it from the reply to the run's next step
// report: the step after it does not run.
func TestLostCancelNoticeIsLearnedAtTheNextStep(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	inA := make(chan struct{}, 1)
	release := make(chan struct{})
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Steps", func(ctx workflow.Context, _ struct{}) (int, error) {
			if _, err := workflow.Step(ctx, "a", func(context.Context) (int, error) {
				inA <- struct{}{}
				<-release
				return 1, nil
			}); err != nil {
				return 0, err
			}
			return workflow.Step(ctx, "b", func(context.Context) (int, error) {
				calls.inc("b")
				return 2, nil
			})
		})
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Steps", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-inA
	// No relay listens while the run is asked: the notice is never sent.
	for _, r := range e.srv.Relays {
		r.Stop()
	}
	if err := e.cl.Cancel(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	close(release)
	var re *client.RunError
	if _, err := result[int](t, h, 20*time.Second); !errors.As(err, &re) || re.Status != client.StatusCancelled {
		t.Fatalf("run asked to cancel: %v", err)
	}
	if n := calls.snapshot()["b"]; n != 0 {
		t.Fatalf("the step after the report that said the run was asked to cancel ran %d times", n)
	}
}
