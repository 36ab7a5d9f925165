package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// collect waits for as many "item" events as its input says and returns
// their payloads in the order it received them.
var collect = workflow.New[int, []string]("Collect")

// Concurrent signal-with-starts of one external id start one run, which
// receives every caller's event; once it finished, the id starts a new run.
func TestSignalWithStart(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Implement(w, collect, func(ctx workflow.Context, n int) ([]string, error) {
			got := make([]string, 0, n)
			for range n {
				v, err := workflow.WaitForEvent[string](ctx, "item", 0)
				if err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const n = 12
	var (
		wg      sync.WaitGroup
		begin   = make(chan struct{})
		handles [n]*client.TypedHandle[[]string]
		started [n]bool
		errs    [n]error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			handles[i], started[i], errs[i] = client.SignalWithStartWorkflow(ctx, e.cl, collect, "batch-1", n,
				"item", fmt.Sprintf("p%02d", i))
		}()
	}
	close(begin)
	wg.Wait()
	starts := 0
	var want []string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if handles[i].RunID != handles[0].RunID {
			t.Fatalf("caller %d reached run %s, caller 0 run %s", i, handles[i].RunID, handles[0].RunID)
		}
		if started[i] {
			starts++
		}
		want = append(want, fmt.Sprintf("p%02d", i))
	}
	if starts != 1 {
		t.Fatalf("%d callers started a run, want 1", starts)
	}
	got, err := handles[0].Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the run received %v, want %v", got, want)
	}
	runs, _, err := e.cl.List(ctx, client.ListOptions{Type: collect.Name(), Limit: 100})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %d %v", collect.Name(), len(runs), err)
	}

	// The run finished: the id starts a new run, which gets this event.
	h, ok, err := client.SignalWithStartWorkflow(ctx, e.cl, collect, "batch-1", 1, "item", "again")
	if err != nil || !ok || h.RunID == handles[0].RunID {
		t.Fatalf("after the run finished: %v started=%v %v", h, ok, err)
	}
	got, err = h.Result(ctx)
	if err != nil || !slices.Equal(got, []string{"again"}) {
		t.Fatalf("the new run received %v %v", got, err)
	}
}
