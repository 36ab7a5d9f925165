package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// A step's result is held by the worker until the workflow reaches its next
// step or ends, and then sent under the run's lease. If the lease was lost
// in between, the engine refuses the held result: the execution stops
// before anything that came after the step runs, and the next execution
// runs the step again (steps are at least once) and every later step
// exactly once. Both places a held result is sent are covered: before the
// next step, and with the run's completion.
func TestLeaseLostWhileAStepResultIsHeld(t *testing.T) {
	for _, gate := range []string{"before-next-step", "before-completion"} {
		t.Run(gate, func(t *testing.T) {
			t.Parallel()
			calls := newCounter()
			reached, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			pause := func() { once.Do(func() { close(reached); <-resume }) }
			held := func(w *worker.Worker) error {
				return worker.Register(w, "Held", func(ctx workflow.Context, in int) (int, error) {
					a, err := workflow.Step(ctx, "a", func(context.Context) (int, error) {
						calls.inc("a")
						return in + 1, nil
					})
					if err != nil {
						return 0, err
					}
					if gate == "before-next-step" {
						pause()
					}
					b, err := workflow.Step(ctx, "b", func(context.Context) (int, error) {
						calls.inc("b")
						return a * 10, nil
					})
					if err != nil {
						return 0, err
					}
					if gate == "before-completion" {
						pause()
					}
					return b, nil
				})
			}
			// One slot: the run cannot be delivered again while its first
			// execution still holds the slot.
			e := start(t, opts{dispatchers: 1, workers: 1, concurrency: 1, register: held})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h, err := e.cl.Start(ctx, "Held", 4, client.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-reached:
			case <-ctx.Done():
				t.Fatal("the workflow never reached its pause")
			}
			// The result held at the pause is not recorded yet: it is the
			// one the lost lease will refuse.
			heldStep := map[string]string{"before-next-step": "a", "before-completion": "b"}[gate]
			steps, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				if s.StepID == heldStep {
					t.Fatalf("step %s is recorded before the workflow moved past it: results are not held", heldStep)
				}
			}
			// The lease is taken away (as the reaper does for a worker it
			// believes lost), then the workflow goes on.
			run, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.srv.Store.RunsRelease(ctx, store.Lease{Namespace: "default", RunID: h.RunID, Token: run.LeaseToken}); err != nil {
				t.Fatal(err)
			}
			close(resume)

			var out int
			if err := h.Result(ctx, &out); err != nil || out != 50 {
				t.Fatalf("result %d %v, want 50", out, err)
			}
			want := map[string]map[string]int{
				// Refused before b ran: a runs again, b once.
				"before-next-step": {"a": 2, "b": 1},
				// a was recorded when b started; b's result was refused
				// with the completion, so b runs again.
				"before-completion": {"a": 1, "b": 2},
			}[gate]
			got := calls.snapshot()
			if got["a"] != want["a"] || got["b"] != want["b"] {
				t.Fatalf("step calls %v, want %v", got, want)
			}
			steps, err = e.srv.Store.StepsList(ctx, "default", h.RunID)
			if err != nil {
				t.Fatal(err)
			}
			recorded := map[string]int{}
			for _, s := range steps {
				if s.Status != store.StepCompleted {
					t.Fatalf("step %s attempt %d is %s", s.StepID, s.Attempt, s.Status)
				}
				recorded[s.StepID]++
			}
			if recorded["a"] != 1 || recorded["b"] != 1 || len(recorded) != 2 {
				t.Fatalf("recorded steps %v, want a and b once each", recorded)
			}
			final, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if final.LeaseToken <= run.LeaseToken {
				t.Fatalf("completed under lease %d, the lost one was %d", final.LeaseToken, run.LeaseToken)
			}
		})
	}
}
