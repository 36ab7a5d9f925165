package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
)

// Pause and resume, end to end: a run paused in a sleep, in an event wait,
// in a retry backoff and in the middle of a step is not claimed while
// paused, whatever comes due, and completes once resumed, with one run
// attempt and each step run once per attempt it needs.
func TestPauseRun(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	var gates sync.Map // run id -> chan struct{}: step "a" of PMid blocks on it
	gate := func(id uuid.UUID) chan struct{} {
		ch, _ := gates.LoadOrStore(id, make(chan struct{}))
		return ch.(chan struct{})
	}
	reached := make(chan uuid.UUID, 1)
	step := func(ctx workflow.Context, name string) error {
		_, err := workflow.Step(ctx, name, func(context.Context) (int, error) {
			calls.inc("%s %s", ctx.RunID(), name)
			return 0, nil
		})
		return err
	}
	register := func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "PSleep", func(ctx workflow.Context, ms int) (int, error) {
				if err := step(ctx, "a"); err != nil {
					return 0, err
				}
				if err := workflow.Sleep(ctx, "nap", time.Duration(ms)*time.Millisecond); err != nil {
					return 0, err
				}
				return 1, step(ctx, "b")
			}),
			worker.Register(w, "PEvent", func(ctx workflow.Context, _ struct{}) (string, error) {
				if err := step(ctx, "a"); err != nil {
					return "", err
				}
				v, err := workflow.WaitForEvent[string](ctx, "go", time.Minute)
				if err != nil {
					return "", err
				}
				return v, step(ctx, "b")
			}),
			worker.Register(w, "PRetry", func(ctx workflow.Context, ms int) (int, error) {
				return workflow.Step(ctx, "call", func(sctx context.Context) (int, error) {
					calls.inc("%s call", ctx.RunID())
					info, _ := workflow.StepInfoFrom(sctx)
					if info.Attempt == 1 {
						return 0, errors.New("first attempt fails")
					}
					return info.Attempt, nil
				}, workflow.WithRetry(retry.Policy{MaxAttempts: 3, InitialInterval: time.Duration(ms) * time.Millisecond}))
			}),
			worker.Register(w, "PMid", func(ctx workflow.Context, _ struct{}) (int, error) {
				id := ctx.RunID()
				if _, err := workflow.Step(ctx, "a", func(context.Context) (int, error) {
					calls.inc("%s a", id)
					reached <- id
					<-gate(id)
					return 0, nil
				}); err != nil {
					return 0, err
				}
				return 2, step(ctx, "b")
			}),
		)
	}
	e := start(t, opts{workers: 1, register: register})
	// Step retries wait in place up to a bound; this worker waits for none,
	// so a backoff suspends the run.
	e.startWorker(worker.Config{Queue: "suspending", MaxInlineRetry: -1}, register)
	ctx := context.Background()
	// A second dispatcher replica with a meter of its own, to read the
	// paused-runs gauge it exports.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	d := dispatcher.New(defaults[dispatcher.Config](t), dispatcher.Deps{MeterProvider: mp}, e.srv.Store, e.ns.Connect(t), nil)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	by := client.PauseOptions{By: "e2e", Reason: "maintenance"}
	get := func(t *testing.T, id uuid.UUID) *client.Run {
		t.Helper()
		r, err := e.cl.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	called := func(id uuid.UUID, name string) int { return calls.snapshot()[fmt.Sprintf("%s %s", id, name)] }
	pause := func(t *testing.T, id uuid.UUID) {
		t.Helper()
		p, err := e.cl.PauseRun(ctx, id, by)
		if err != nil || p.AlreadyPaused || p.Pause.By != "e2e" {
			t.Fatalf("pause: %+v %v", p, err)
		}
		r := get(t, id)
		if r.Paused == nil || r.Paused.Reason != "maintenance" {
			t.Fatalf("paused run reads %+v", r.Paused)
		}
		if w, ok, err := e.srv.Store.RunsWaiting(ctx, "default", id); r.Status != client.StatusRunning && (err != nil || !ok || w.Reason != store.WaitPaused) {
			t.Fatalf("a paused run waits for %+v (%v %v)", w, ok, err)
		}
	}
	// stillHeld checks, once the time it would have been due is past, that
	// the run is not claimable (a claim of its queue and type takes
	// nothing) and has not run step notRun.
	stillHeld := func(t *testing.T, id uuid.UUID, due time.Time, notRun string) {
		t.Helper()
		waitUntil(t, 20*time.Second, "the due time to pass", func() bool { return time.Now().After(due) })
		r := get(t, id)
		got, err := e.srv.Store.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: r.Queue, WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: r.Type}}, Limit: 10, Lease: time.Minute})
		if err != nil || len(got) != 0 {
			t.Fatalf("a claim of a paused run's queue took %d runs (%v)", len(got), err)
		}
		if r.Status.Terminal() || r.Status == client.StatusRunning || r.Paused == nil || called(id, notRun) != 0 {
			t.Fatalf("paused run is %s (paused %v), step %s ran %d times", r.Status, r.Paused, notRun, called(id, notRun))
		}
	}
	// resume resumes the run twice at once: one resumes it, the other
	// finds it resumed (done then checks it ran once more, not twice).
	resume := func(t *testing.T, id uuid.UUID) {
		t.Helper()
		res := make(chan client.RunResume, 2)
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				r, err := e.cl.ResumeRun(ctx, id)
				res <- r
				errs <- err
			}()
		}
		a, b := <-res, <-res
		if err := errors.Join(<-errs, <-errs); err != nil || a.WasPaused == b.WasPaused {
			t.Fatalf("two resumes: %+v and %+v, %v", a, b, err)
		}
	}
	done := func(t *testing.T, h *client.Handle) {
		t.Helper()
		r := get(t, h.RunID)
		if r.Status != client.StatusCompleted || r.Attempts != 1 || r.Paused != nil {
			t.Fatalf("run %s after resume: %s, %d attempts, paused %v", h.RunID, r.Status, r.Attempts, r.Paused)
		}
	}

	t.Run("sleep", func(t *testing.T) {
		// The nap and the backoff below are long enough that the pause
		// lands before they are due on a loaded machine (-race, parallel
		// packages): a run claimed before its pause is paused mid-step,
		// which is the last case's, not this one's.
		h, err := e.cl.Start(ctx, "PSleep", 3000, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the run to sleep", func() bool { return get(t, h.RunID).Status == client.StatusSleeping })
		wake := *get(t, h.RunID).AvailableAt
		pause(t, h.RunID)
		if n := pausedGauge(t, reader, "default"); n != 1 {
			t.Fatalf("kagzi.runs.paused is %d with one run paused", n)
		}
		stillHeld(t, h.RunID, wake, "b")
		resume(t, h.RunID)
		if n, err := result[int](t, h, 30*time.Second); err != nil || n != 1 {
			t.Fatalf("result: %d %v", n, err)
		}
		if called(h.RunID, "a") != 1 || called(h.RunID, "b") != 1 {
			t.Fatalf("steps ran %v", calls.snapshot())
		}
		done(t, h)
	})

	t.Run("event", func(t *testing.T) {
		h, err := e.cl.Start(ctx, "PEvent", nil, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the run to wait", func() bool { return get(t, h.RunID).Status == client.StatusSleeping })
		pause(t, h.RunID)
		ev, err := e.cl.SendEvent(ctx, h.RunID, "go", "yes")
		if err != nil || !ev.Woken {
			t.Fatalf("event: %+v %v", ev, err)
		}
		stillHeld(t, h.RunID, time.Now(), "b")
		resume(t, h.RunID)
		if v, err := result[string](t, h, 30*time.Second); err != nil || v != "yes" {
			t.Fatalf("result: %q %v", v, err)
		}
		done(t, h)
	})

	t.Run("retry", func(t *testing.T) {
		h, err := e.cl.Start(ctx, "PRetry", 3000, client.StartOptions{Queue: "suspending"})
		if err != nil {
			t.Fatal(err)
		}
		var retryAt time.Time
		// The step's call is counted before the run is read: read first,
		// the run could be seen PENDING as created, due now, and then
		// claimed and run before the count, and the pause would land on
		// a running run (the mid-step case, not this one). And suspended
		// means due at the retry, ~3 s ahead.
		waitUntil(t, 20*time.Second, "the failed attempt to suspend the run", func() bool {
			if called(h.RunID, "call") == 0 {
				return false
			}
			r := get(t, h.RunID)
			if r.Status == client.StatusRunning || r.AvailableAt == nil || r.AvailableAt.Before(time.Now().Add(time.Second)) {
				return false
			}
			retryAt = *r.AvailableAt
			return true
		})
		pause(t, h.RunID)
		stillHeld(t, h.RunID, retryAt, "b")
		if n := called(h.RunID, "call"); n != 1 {
			t.Fatalf("the step was retried %d times while paused", n-1)
		}
		resume(t, h.RunID)
		if n, err := result[int](t, h, 30*time.Second); err != nil || n != 2 {
			t.Fatalf("result: %d %v", n, err)
		}
		if n := called(h.RunID, "call"); n != 2 {
			t.Fatalf("step called %d times, want 2", n)
		}
		done(t, h)
	})

	t.Run("mid-step", func(t *testing.T) {
		h, err := e.cl.Start(ctx, "PMid", nil, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if id := <-reached; id != h.RunID {
			t.Fatalf("run %s reached the gate", id)
		}
		pause(t, h.RunID)
		if r := get(t, h.RunID); r.Status != client.StatusRunning {
			t.Fatalf("a paused run in a step is %s", r.Status)
		}
		close(gate(h.RunID))
		// Its step is recorded; it gives its lease back and waits.
		waitUntil(t, 20*time.Second, "the step to be recorded and the run to stop", func() bool {
			r := get(t, h.RunID)
			return r.Status == client.StatusPending && len(e.steps(h.RunID)) == 1
		})
		stillHeld(t, h.RunID, time.Now(), "b")
		if s := e.steps(h.RunID); s[0].StepID != "a" || s[0].Status != store.StepCompleted {
			t.Fatalf("step: %+v", s[0])
		}
		resume(t, h.RunID)
		if n, err := result[int](t, h, 30*time.Second); err != nil || n != 2 {
			t.Fatalf("result: %d %v", n, err)
		}
		if called(h.RunID, "a") != 1 || called(h.RunID, "b") != 1 {
			t.Fatalf("steps ran %v", calls.snapshot())
		}
		done(t, h)
		if _, err := e.cl.PauseRun(ctx, h.RunID, by); !errors.Is(err, client.ErrRunFinished) {
			t.Fatalf("pause of a finished run: want ErrRunFinished, got %v", err)
		}
	})
}

// A paused queue or workflow type gets no claims: a run started into it
// waits, with the dispatcher woken by its start and claiming nothing; the
// resume wakes the dispatcher (the workers renew their requests only
// every minute here, and nothing polls), and the run completes at once.
func TestPauseQueueAndType(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, wait: time.Minute, register: func(w *worker.Worker) error {
		return worker.Register(w, "PQ", func(ctx workflow.Context, n int) (int, error) {
			return workflow.Step(ctx, "s", func(context.Context) (int, error) { return n + 1, nil })
		})
	}})
	ctx := context.Background()
	held := func(t *testing.T, pause func() error, resume func() error, start client.StartOptions) {
		t.Helper()
		if err := pause(); err != nil {
			t.Fatal(err)
		}
		claims := e.claims()
		h, err := e.cl.Start(ctx, "PQ", 1, start)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the start's claim", func() bool { return e.claims() > claims })
		if r, err := e.cl.Get(ctx, h.RunID); err != nil || r.Status != client.StatusPending {
			t.Fatalf("a run of a paused queue or type: %v %v", r.Status, err)
		}
		w, ok, err := e.srv.Store.RunsWaiting(ctx, "default", h.RunID)
		if err != nil || !ok || w.Reason != store.WaitPaused {
			t.Fatalf("waiting: %+v %v %v", w, ok, err)
		}
		began := time.Now()
		if err := resume(); err != nil {
			t.Fatal(err)
		}
		if n, err := result[int](t, h, 10*time.Second); err != nil || n != 2 {
			t.Fatalf("result: %d %v", n, err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("the resumed run completed after %v", d)
		}
	}
	o := client.PauseOptions{By: "e2e", Reason: "drain"}
	t.Run("queue", func(t *testing.T) {
		held(t, func() error {
			_, already, err := e.cl.PauseQueue(ctx, "default", o)
			if already {
				return errors.New("queue was paused already")
			}
			return err
		}, func() error { return e.cl.ResumeQueue(ctx, "default") }, client.StartOptions{})
		if err := e.cl.ResumeQueue(ctx, "default"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("resume of a queue not paused: want ErrNotFound, got %v", err)
		}
	})
	t.Run("type", func(t *testing.T) {
		held(t, func() error {
			_, _, err := e.cl.PauseType(ctx, "PQ", o)
			if err != nil {
				return err
			}
			ps, err := e.cl.ListPaused(ctx)
			if err != nil || len(ps) != 1 || ps[0].Kind != "type" || ps[0].By != "e2e" {
				return fmt.Errorf("paused: %+v %v", ps, err)
			}
			return nil
		}, func() error { return e.cl.ResumeType(ctx, "PQ") }, client.StartOptions{})
	})
}

// pausedGauge collects the kagzi.runs.paused gauge of a namespace.
func pausedGauge(t *testing.T, reader *sdkmetric.ManualReader, ns string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok || m.Name != "kagzi.runs.paused" {
				continue
			}
			for _, dp := range g.DataPoints {
				if n, _ := dp.Attributes.Value("namespace"); n.AsString() == ns && dp.Attributes.Len() == 1 {
					return dp.Value
				}
			}
		}
	}
	t.Fatalf("kagzi.runs.paused of %s not exported: %+v", ns, rm.ScopeMetrics)
	return 0
}
