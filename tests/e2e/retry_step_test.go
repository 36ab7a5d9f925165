package e2e_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// A run backing off an hour before a failing step's next attempt tries it
// at once when asked (RetryStepNow): the attempt count goes on from where
// it was. A paused run's attempt waits for its resume; a run not backing
// off is a conflict.
func TestRetryStepNow(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Flaky", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "call", func(context.Context) (int, error) {
				if n := calls.Add(1); n%2 == 1 {
					return 0, errors.New("vendor down")
				}
				return 7, nil
			}, workflow.WithRetry(retry.Policy{MaxAttempts: 5, InitialInterval: time.Hour}))
		})
	}})
	ctx := context.Background()
	backingOff := func(h *client.Handle) func() bool {
		return func() bool {
			w, ok, err := e.srv.Store.RunsWaiting(ctx, "default", h.RunID)
			return err == nil && ok && w.Reason == store.WaitRetry
		}
	}

	h, err := e.cl.Start(ctx, "Flaky", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the run to back off", backingOff(h))
	steps, err := e.cl.RetryStepNow(ctx, h.RunID)
	if err != nil || !slices.Equal(steps, []string{"call"}) {
		t.Fatalf("RetryStepNow: %v, %v", steps, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got int
	if err := h.Result(rctx, &got); err != nil || got != 7 {
		t.Fatalf("result %d, %v", got, err)
	}
	attempts, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || attempts[0].Status != store.StepFailed || attempts[1].Status != store.StepCompleted || attempts[1].Attempt != 2 {
		t.Fatalf("attempts %+v, want attempt 1 failed and 2 completed", attempts)
	}
	if _, err := e.cl.RetryStepNow(ctx, h.RunID); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("RetryStepNow of a finished run: %v, want ErrConflict", err)
	}

	// Paused: the retry waits for the resume.
	h, err = e.cl.Start(ctx, "Flaky", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the second run to back off", backingOff(h))
	if _, err := e.cl.PauseRun(ctx, h.RunID, client.PauseOptions{Reason: "fix first"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.RetryStepNow(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	if w, _, err := e.srv.Store.RunsWaiting(ctx, "default", h.RunID); err != nil || w.Reason != store.WaitPaused {
		t.Fatalf("a paused run asked to retry now waits for %q (%v), want paused", w.Reason, err)
	}
	if _, err := e.cl.ResumeRun(ctx, h.RunID); err != nil {
		t.Fatal(err)
	}
	if err := h.Result(rctx, &got); err != nil || got != 7 {
		t.Fatalf("resumed run: result %d, %v", got, err)
	}
}

// A step backing off an hour under its code's policy of 3 attempts, given
// new retry options with its retry now: 5 attempts 10 ms apart. Every
// attempt up to the fifth is made, at once, and the fifth failure is
// final; the run fails. Options of fewer attempts than were made make the
// next failure final.
func TestRetryStepNowWithOptions(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Down", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "call", func(context.Context) (int, error) {
				return 0, errors.New("vendor down")
			}, workflow.WithRetry(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour}))
		})
	}})
	ctx := context.Background()
	// failsAfter starts a run, lets its step back off after its first
	// failure, retries it now with o, and returns its failed attempts once
	// the run has failed.
	failsAfter := func(o client.RetryStepNowOptions) []store.Step {
		t.Helper()
		h, err := e.cl.Start(ctx, "Down", struct{}{}, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "the run to back off", func() bool {
			w, ok, err := e.srv.Store.RunsWaiting(ctx, "default", h.RunID)
			return err == nil && ok && w.Reason == store.WaitRetry
		})
		if _, err := e.cl.RetryStepNow(ctx, h.RunID, client.RetryStepNowOptions{MaxAttempts: retry.MaxOverrideAttempts + 1}); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("RetryStepNow with too many attempts: %v, want ErrInvalidArgument", err)
		}
		steps, err := e.cl.RetryStepNow(ctx, h.RunID, o)
		if err != nil || !slices.Equal(steps, []string{"call"}) {
			t.Fatalf("RetryStepNow(%+v): %v, %v", o, steps, err)
		}
		// The code's backoff is an hour: the run ends within the bound
		// only if the new options are used.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var re *client.RunError
		if err := h.Result(rctx, nil); !errors.As(err, &re) || re.Status != client.StatusFailed {
			t.Fatalf("result: %v, want the run failed", err)
		}
		attempts, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range attempts {
			if a.Status != store.StepFailed || a.Attempt != i+1 {
				t.Fatalf("attempt %d: %+v", i+1, a)
			}
		}
		if last := attempts[len(attempts)-1]; last.RetryAt != nil {
			t.Fatalf("last attempt %d is not final: retry at %v", last.Attempt, last.RetryAt)
		}
		return attempts
	}

	if got := failsAfter(client.RetryStepNowOptions{MaxAttempts: 5, InitialInterval: 10 * time.Millisecond}); len(got) != 5 {
		t.Fatalf("%d attempts with 5 allowed", len(got))
	}
	if got := failsAfter(client.RetryStepNowOptions{MaxAttempts: 1}); len(got) != 2 {
		t.Fatalf("%d attempts after lowering the max to 1, want the retry's failure final (2)", len(got))
	}
}
