package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// forkFlow is a three-step workflow whose third step fails while broken
// holds (the bug); each step's calls are counted per run.
var forkFlow = workflow.New[int, string]("ForkThree")

func registerForkFlow(calls *counter, broken *atomic.Bool) func(*worker.Worker) error {
	return func(w *worker.Worker) error {
		return worker.Implement(w, forkFlow, func(ctx workflow.Context, n int) (string, error) {
			out := ""
			for _, id := range []string{"one", "two", "three"} {
				s, err := workflow.Step(ctx, id, func(context.Context) (string, error) {
					calls.inc("%s/%s", ctx.RunID(), id)
					if id == "three" && broken.Load() {
						return "", workflow.NonRetryable(fmt.Errorf("step three of %d is broken", n))
					}
					return id, nil
				})
				if err != nil {
					return "", err
				}
				out += s
			}
			return out, nil
		})
	}
}

// A run fails at its third step; after the fix, a fork from that step
// completes without executing the first two steps again, the failed run is
// unchanged, both are linked, and asking again returns the same fork.
func TestForkFromFailedStep(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	var broken atomic.Bool
	broken.Store(true)
	e := start(t, opts{workers: -1})
	e.startWorker(worker.Config{}, registerForkFlow(calls, &broken))
	ctx := context.Background()

	h, err := client.StartWorkflow(ctx, e.cl, forkFlow, 7, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[string](t, h.Handle, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed {
		t.Fatalf("first run: %v", err)
	}
	old, err := e.cl.Get(ctx, h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	oldSteps := len(e.steps(h.RunID))

	broken.Store(false) // the fix is deployed
	fork, err := client.ForkWorkflow(ctx, e.cl, forkFlow, h.RunID, client.ForkOptions{Step: "three"})
	if err != nil {
		t.Fatal(err)
	}
	if !fork.Created || fork.RunID == h.RunID {
		t.Fatalf("fork %+v", fork.Handle)
	}
	ctx30, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := fork.Result(ctx30)
	if err != nil || out != "onetwothree" {
		t.Fatalf("fork result %q, %v", out, err)
	}
	got := calls.snapshot()
	f := fork.RunID.String()
	if got[f+"/one"] != 0 || got[f+"/two"] != 0 || got[f+"/three"] != 1 {
		t.Fatalf("fork's step calls %v: only step three may execute", got)
	}
	o := h.RunID.String()
	if got[o+"/one"] != 1 || got[o+"/two"] != 1 || got[o+"/three"] != 1 {
		t.Fatalf("old run's step calls %v", got)
	}

	// The failed run is unchanged, and lists its fork.
	now, err := e.cl.Get(ctx, h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Status != client.StatusFailed || now.Error != old.Error || !now.FinishedAt.Equal(*old.FinishedAt) ||
		now.Attempts != old.Attempts || len(e.steps(h.RunID)) != oldSteps {
		t.Fatalf("old run changed: %+v, was %+v", now, old)
	}
	if now.ForkedFrom != nil || len(now.Forks) != 1 || now.Forks[0].RunID != fork.RunID || now.Forks[0].Step != "three" ||
		now.Forks[0].Status != client.StatusCompleted {
		t.Fatalf("old run's links: from %v, forks %+v", now.ForkedFrom, now.Forks)
	}
	fr, err := e.cl.Get(ctx, fork.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if fr.ForkedFrom == nil || *fr.ForkedFrom != h.RunID || fr.ForkedAtStep != "three" || fr.Status != client.StatusCompleted ||
		fr.Type != old.Type || fr.Queue != old.Queue || string(fr.Input) != string(old.Input) {
		t.Fatalf("fork run %+v", fr)
	}

	// Asking again returns the same fork.
	again, err := e.cl.Fork(ctx, h.RunID, client.ForkOptions{Step: "three"})
	if err != nil || again.Created || again.RunID != fork.RunID {
		t.Fatalf("fork again: %+v, %v", again, err)
	}
	// An unknown step or run is refused; a fork as another type is too.
	if _, err := e.cl.Fork(ctx, h.RunID, client.ForkOptions{Step: "four"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("unknown step: %v", err)
	}
	if _, err := e.cl.Fork(ctx, uuid.New(), client.ForkOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	other := workflow.New[int, string]("Other")
	if _, err := client.ForkWorkflow(ctx, e.cl, other, h.RunID, client.ForkOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("fork as another type: %v", err)
	}
}

// Several failed runs forked in bulk from their failed step, twice: each
// is forked once, and every fork completes.
func TestForkManyFailedRuns(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	var broken atomic.Bool
	broken.Store(true)
	e := start(t, opts{workers: -1})
	e.startWorker(worker.Config{}, registerForkFlow(calls, &broken))
	ctx := context.Background()

	const n = 5
	var failed []*client.Handle
	for i := range n {
		h, err := e.cl.Start(ctx, forkFlow.Name(), i, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		failed = append(failed, h)
	}
	for _, h := range failed {
		if _, err := result[string](t, h, 30*time.Second); err == nil {
			t.Fatalf("run %s did not fail", h.RunID)
		}
	}
	broken.Store(false)

	filter := client.ForkFilter{Type: forkFlow.Name(), FromFailedStep: true, Since: time.Now().Add(-time.Hour)}
	res, err := e.cl.ForkMany(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != n || res.Forked != n || res.AlreadyForked != 0 || len(res.Forks) != n {
		t.Fatalf("first: %+v", res)
	}
	var forks []*client.Handle
	for _, f := range res.Forks {
		if f.Step != "three" || !f.Created || !slices.ContainsFunc(failed, func(h *client.Handle) bool { return h.RunID == f.From }) {
			t.Fatalf("fork %+v", f)
		}
		forks = append(forks, e.cl.Handle(f.RunID))
	}
	again, err := e.cl.ForkMany(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	if again.Matched != n || again.Forked != 0 || again.AlreadyForked != n {
		t.Fatalf("second: %+v", again)
	}
	for i, f := range again.Forks {
		if f.Created || !slices.ContainsFunc(res.Forks, func(g client.ForkedRun) bool { return g.RunID == f.RunID }) {
			t.Fatalf("second fork %d: %+v", i, f)
		}
	}
	waitAll(t, forks, 30*time.Second)
	got := calls.snapshot()
	for _, h := range forks {
		if got[h.RunID.String()+"/one"] != 0 || got[h.RunID.String()+"/three"] != 1 {
			t.Fatalf("fork %s's step calls %v", h.RunID, got)
		}
	}
}
