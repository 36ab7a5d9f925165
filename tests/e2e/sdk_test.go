package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The SDK's surface, end to end through every service: typed references
// for runs and children, recorded Now and SideEffect, several versions of a
// type with the operator's default, continue-as-new, remote drain.

var (
	sdkParent = workflow.New[int, sdkOut]("SdkParent")
	sdkDouble = workflow.New[int, int]("SdkDouble")
	sdkLoop   = workflow.New[int, int]("SdkLoop")
	sdkVer    = workflow.New[struct{}, string]("SdkVer")
)

type sdkOut struct {
	Child int
	At    time.Time
	Side  int
}

// sdkClient is a client made the way applications make one: from the
// database URL and a NATS connection, without the data layer.
func sdkClient(t *testing.T, e *env) *client.Client {
	t.Helper()
	cl, err := client.Connect(context.Background(), e.url, e.nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestSDKTypedRunsNowSideEffect(t *testing.T) {
	t.Parallel()
	sides := newCounter()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Implement(w, sdkParent, func(ctx workflow.Context, in int) (sdkOut, error) {
				at := workflow.Now(ctx)
				side, err := workflow.SideEffect(ctx, "pick", func() int { sides.inc("pick"); return in + 1 })
				if err != nil {
					return sdkOut{}, err
				}
				// The child suspends the parent: what follows is a replay,
				// in which Now and SideEffect return what they recorded.
				c, err := sdkDouble.Child(ctx, "double", side)
				if err != nil {
					return sdkOut{}, err
				}
				if again := workflow.Now(ctx); again.Before(at) {
					return sdkOut{}, fmt.Errorf("second Now %v is before the first %v", again, at)
				}
				return sdkOut{Child: c, At: at, Side: side}, nil
			}),
			worker.Implement(w, sdkDouble, func(ctx workflow.Context, in int) (int, error) { return 2 * in, nil }),
		)
	}})
	cl := sdkClient(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := client.StartWorkflow(ctx, cl, sdkParent, 20, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Child != 42 || out.Side != 21 {
		t.Fatalf("result %+v, want child 42, side 21", out)
	}
	if n := sides.snapshot()["pick"]; n != 1 {
		t.Fatalf("side effect ran %d times over the run's executions, want 1", n)
	}
	var recorded time.Time
	for _, s := range e.steps(h.RunID) {
		if s.StepID == "now" {
			if err := recorded.UnmarshalJSON(s.Output); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !recorded.Equal(out.At) {
		t.Fatalf("Now returned %v, the run recorded %v", out.At, recorded)
	}
	// A handle for an existing run is typed too.
	again, err := client.HandleFor(cl, sdkParent, h.RunID).Result(ctx)
	if err != nil || again != out {
		t.Fatalf("typed handle for the run: %+v %v", again, err)
	}
	// Errors are the client's own.
	if _, err := cl.Get(ctx, sdkClientUnknownID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get of an unknown run: %v, want client.ErrNotFound", err)
	}
}

var sdkClientUnknownID = [16]byte{1, 2, 3}

func TestSDKContinueAsNew(t *testing.T) {
	t.Parallel()
	loopParent := workflow.New[int, string]("SdkLoopParent")
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Implement(w, sdkLoop, func(ctx workflow.Context, n int) (int, error) {
				if _, err := workflow.Step(ctx, "work", func(context.Context) (int, error) { return n, nil }); err != nil {
					return 0, err
				}
				if n < 3 {
					return 0, sdkLoop.ContinueAsNew(ctx, n+1)
				}
				return n * 10, nil
			}),
			// A child cannot continue as new: it fails, and its parent
			// sees the failure.
			worker.Implement(w, loopParent, func(ctx workflow.Context, n int) (string, error) {
				_, err := sdkLoop.Child(ctx, "loop", n)
				return workflow.ErrorType(err), nil
			}),
		)
	}})
	cl := sdkClient(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := client.StartWorkflow(ctx, cl, sdkLoop, 0, client.StartOptions{ExternalID: "loop-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.Result(ctx); err != nil || got != 30 {
		t.Fatalf("result through the chain: %d %v, want 30", got, err)
	}
	// Four runs, each with one step, chained by continued_as, one external id.
	id, n := h.RunID, 0
	for {
		r, err := cl.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r.ExternalID != "loop-1" || r.Status != client.StatusCompleted {
			t.Fatalf("run %d of the chain: %s %q", n, r.Status, r.ExternalID)
		}
		if steps := e.steps(id); len(steps) != 1 {
			t.Fatalf("run %d of the chain has %d steps, want its own one", n, len(steps))
		}
		if r.ContinuedAs == nil {
			if string(r.Output) != "30" {
				t.Fatalf("last run's output %s", r.Output)
			}
			break
		}
		id = *r.ContinuedAs
	}
	if n != 4 {
		t.Fatalf("%d runs in the chain, want 4", n)
	}

	ph, err := client.StartWorkflow(ctx, cl, loopParent, 0, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ph.Result(ctx); err != nil || got != "ChildFailed" {
		t.Fatalf("parent of a child that continued as new: %q %v, want ChildFailed", got, err)
	}
	child, err := cl.Get(ctx, protocol.ChildRunID(ph.RunID, "loop", 1))
	if err != nil || child.Status != client.StatusFailed || !strings.Contains(child.Error, "child run cannot continue as new") || child.ContinuedAs != nil {
		t.Fatalf("child that tried to continue as new: %+v %v", child, err)
	}
}

func TestSDKVersionsAndDefault(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Implement(w, sdkVer, func(ctx workflow.Context, _ struct{}) (string, error) { return "one", nil }, worker.WithVersion("v1")),
			worker.Implement(w, sdkVer, func(ctx workflow.Context, _ struct{}) (string, error) {
				v, err := workflow.Version(ctx, "greeting", workflow.DefaultVersion, 1)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("two/%d", v), nil
			}, worker.WithVersion("v2")),
		)
	}})
	cl := sdkClient(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(o client.StartOptions) (string, string) {
		t.Helper()
		h, err := client.StartWorkflow(ctx, cl, sdkVer, struct{}{}, o)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cl.Get(ctx, h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return out, r.Version
	}
	// Without a default, the first registered version.
	if out, v := run(client.StartOptions{}); out != "one" || v != "v1" {
		t.Fatalf("no default: %q at %q", out, v)
	}
	if err := cl.SetDefaultVersion(ctx, sdkVer.Name(), "v2"); err != nil {
		t.Fatal(err)
	}
	if out, v := run(client.StartOptions{}); out != "two/1" || v != "v2" {
		t.Fatalf("default v2: %q at %q", out, v)
	}
	if out, v := run(client.StartOptions{Version: "v1"}); out != "one" || v != "v1" {
		t.Fatalf("pinned v1: %q at %q", out, v)
	}
	// A version no worker serves waits, and RequireWorker refuses it.
	if _, err := client.StartWorkflow(ctx, cl, sdkVer, struct{}{}, client.StartOptions{Version: "v3", RequireWorker: true}); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("start of an unserved version with RequireWorker: %v", err)
	}
}

func TestSDKDrainWorker(t *testing.T) {
	t.Parallel()
	double := func(w *worker.Worker) error {
		return worker.Implement(w, sdkDouble, func(ctx workflow.Context, in int) (int, error) { return 2 * in, nil })
	}
	e := start(t, opts{workers: 1, register: double})
	w := startWorker(t, e.ns, worker.Config{Queue: "drained"}, double)
	cl := sdkClient(t, e)
	ctx := context.Background()
	waitUntil(t, 20*time.Second, "the worker to register", func() bool {
		_, err := e.srv.Store.WorkersGet(ctx, "default", w.ID())
		return err == nil
	})
	got, err := cl.DrainWorker(ctx, w.ID())
	if err != nil || got.Status != client.WorkerDraining {
		t.Fatalf("drain: %+v %v", got, err)
	}
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not drain")
	}
	waitUntil(t, 20*time.Second, "the worker to deregister", func() bool {
		r, err := e.srv.Store.WorkersGet(ctx, "default", w.ID())
		return err == nil && r.Status == store.WorkerOffline && r.DeregisteredAt != nil
	})
	if _, err := cl.DrainWorker(ctx, w.ID()); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("draining an offline worker: %v, want ErrConflict", err)
	}
}
