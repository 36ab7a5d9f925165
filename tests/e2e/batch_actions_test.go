package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Batch actions through the services: an update batch's requests are
// answered by each run; a batch pauses runs waiting for an
// event, a signal batch's event waits with them, a resume batch lets them
// finish with it; a terminate batch ends the live runs a query matches; a
// retry batch restarts a failed run, a fork batch forks one from its
// failed step, once. Each batch completes with one
// outcome per run, and a batch of a finished run is refused.
func TestBatchActions(t *testing.T) {
	t.Parallel()
	var failFirst atomic.Bool
	failFirst.Store(true)
	e := start(t, opts{workers: 1, wait: time.Minute, register: func(w *worker.Worker) error {
		return errors.Join(
			registerCart(w),
			worker.Register(w, "BWait", func(ctx workflow.Context, _ struct{}) (string, error) {
				return workflow.WaitForEvent[string](ctx, "go", time.Hour)
			}),
			worker.Register(w, "BFail", func(ctx workflow.Context, _ struct{}) (int, error) {
				return workflow.Step(ctx, "call", func(context.Context) (int, error) {
					if failFirst.Swap(false) {
						return 0, errors.New("down")
					}
					return 7, nil
				}, workflow.WithRetry(retry.Policy{MaxAttempts: 1}))
			}),
		)
	}})
	ctx := context.Background()
	batch := func(t *testing.T, o client.BatchOptions, want int) client.Batch {
		t.Helper()
		b, err := e.cl.StartBatch(ctx, o)
		if err != nil || b.Total != want {
			t.Fatalf("start %s batch: %+v %v", o.Action, b, err)
		}
		var got client.Batch
		waitUntil(t, 30*time.Second, string(o.Action)+" batch completes", func() bool {
			got, err = e.cl.GetBatch(ctx, b.ID)
			return err == nil && got.State == client.BatchCompleted
		})
		if got.Done != want || got.Failed != 0 || got.Skipped != 0 {
			t.Fatalf("%s batch: %+v", o.Action, got)
		}
		return got
	}
	var waits []*client.Handle
	var ids []uuid.UUID
	for range 3 {
		h, err := e.cl.Start(ctx, "BWait", struct{}{}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waits, ids = append(waits, h), append(ids, h.RunID)
	}
	for _, h := range waits {
		waitUntil(t, 20*time.Second, "the run waits for its event", func() bool {
			r, err := e.cl.Get(ctx, h.RunID)
			return err == nil && r.Status == client.StatusSleeping
		})
	}
	batch(t, client.BatchOptions{Action: client.BatchPause, RunIDs: ids, Reason: "vendor down", By: "e2e"}, 3)
	for _, id := range ids {
		if r, err := e.cl.Get(ctx, id); err != nil || r.Paused == nil || r.Paused.Reason != "vendor down" {
			t.Fatalf("run after the pause batch: %+v %v", r, err)
		}
	}
	batch(t, client.BatchOptions{Action: client.BatchSignal, Query: "type = 'BWait'", EventName: "go", Payload: "ok"}, 3)
	for _, id := range ids {
		if r, err := e.cl.Get(ctx, id); err != nil || r.Status.Terminal() {
			t.Fatalf("a paused run went on after the event: %+v %v", r.Status, err)
		}
	}
	batch(t, client.BatchOptions{Action: client.BatchResume, Query: "type = 'BWait' AND paused = true"}, 3)
	for _, h := range waits {
		if v, err := result[string](t, h, 20*time.Second); err != nil || v != "ok" {
			t.Fatalf("resumed run: %q %v", v, err)
		}
	}
	if _, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchCancel, RunIDs: ids[:1]}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a cancel batch of a finished run: %v, want ErrConflict", err)
	}

	h, err := e.cl.Start(ctx, "BWait", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batch(t, client.BatchOptions{Action: client.BatchTerminate, Query: "type = 'BWait'", Reason: "cleanup"}, 1)
	if r, err := e.cl.Wait(ctx, h.RunID); err != nil || r.Status != client.StatusCancelled {
		t.Fatalf("terminated run: %+v %v", r, err)
	}

	f, err := e.cl.Start(ctx, "BFail", struct{}{}, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.cl.Wait(ctx, f.RunID); err != nil || r.Status != client.StatusFailed {
		t.Fatalf("failing run: %+v %v", r, err)
	}
	batch(t, client.BatchOptions{Action: client.BatchRetry, Query: "type = 'BFail'"}, 1)
	if v, err := result[int](t, f, 20*time.Second); err != nil || v != 7 {
		t.Fatalf("retried run: %d %v", v, err)
	}
	failFirst.Store(true)
	f2, err := e.cl.Start(ctx, "BFail", struct{}{}, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.cl.Wait(ctx, f2.RunID); err != nil || r.Status != client.StatusFailed {
		t.Fatalf("failing run: %+v %v", r, err)
	}
	batch(t, client.BatchOptions{Action: client.BatchFork, RunIDs: []uuid.UUID{f2.RunID}}, 1)
	r, err := e.cl.Get(ctx, f2.RunID)
	if err != nil || len(r.Forks) != 1 || r.Forks[0].Step != "call" {
		t.Fatalf("forked run: %+v %v", r, err)
	}
	if r, err := e.cl.Wait(ctx, r.Forks[0].RunID); err != nil || r.Status != client.StatusCompleted {
		t.Fatalf("the fork: %+v %v", r, err)
	}
	again, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchFork, RunIDs: []uuid.UUID{f2.RunID}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the second fork batch completes", func() bool {
		again, err = e.cl.GetBatch(ctx, again.ID)
		return err == nil && again.State == client.BatchCompleted
	})
	if again.Skipped != 1 {
		t.Fatalf("a second fork batch of the run: %+v", again)
	}
	var carts []uuid.UUID
	for range 2 {
		h, err := client.StartWorkflow(ctx, e.cl, cartFlow, 1, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		carts = append(carts, h.RunID)
	}
	up := batch(t, client.BatchOptions{Action: client.BatchUpdate, RunIDs: carts, EventName: "AddItem", Payload: cartItem{Name: "tea", Price: 5}}, 2)
	runs, err := e.cl.BatchRuns(ctx, up.ID, "done", uuid.Nil, 10)
	if err != nil || len(runs) != 2 {
		t.Fatalf("update batch runs: %+v %v", runs, err)
	}
	for _, r := range runs {
		updateID, err := uuid.Parse(strings.TrimPrefix(r.Detail, "update "))
		if err != nil {
			t.Fatalf("update batch run detail %q", r.Detail)
		}
		if answer, err := e.cl.UpdateResult(ctx, r.RunID, updateID); err != nil || string(answer) != "5" {
			t.Fatalf("the update's answer: %s %v", answer, err)
		}
	}
	bs, err := e.cl.ListBatches(ctx, 0)
	if err != nil || len(bs) != 8 {
		t.Fatalf("batches: %d %v", len(bs), err)
	}
}
