package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// debouncedFlow returns its input once the test releases it.
var debouncedFlow = workflow.New[int, int]("Debounced")

// executions counts, per run, how often a workflow of these tests began.
type executions struct {
	mu sync.Mutex
	n  map[uuid.UUID]int
}

func (x *executions) add(id uuid.UUID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.n[id]++
}

func (x *executions) snapshot() map[uuid.UUID]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[uuid.UUID]int, len(x.n))
	for k, v := range x.n {
		out[k] = v
	}
	return out
}

// Fifty starts with one debounce key, from concurrent goroutines within
// the window, make one run, which executes once with the last start's
// input; a start after it was claimed makes a second run.
func TestDebouncedStarts(t *testing.T) {
	t.Parallel()
	ran := &executions{n: map[uuid.UUID]int{}}
	release := make(chan struct{})
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Implement(w, debouncedFlow, func(ctx workflow.Context, n int) (int, error) {
			ran.add(ctx.RunID())
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			return n, nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d := &client.Debounce{Key: "catalog", Window: 300 * time.Millisecond}

	const n = 50
	var (
		wg      sync.WaitGroup
		begin   = make(chan struct{})
		handles [n]*client.TypedHandle[int]
		errs    [n]error
	)
	// Forty-nine starts at once, then the last one, still within the
	// window of the others: its input is the one the run must get.
	for i := range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			handles[i], errs[i] = client.StartWorkflow(ctx, e.cl, debouncedFlow, i, client.StartOptions{Debounce: d})
		}()
	}
	close(begin)
	wg.Wait()
	handles[n-1], errs[n-1] = client.StartWorkflow(ctx, e.cl, debouncedFlow, 1000, client.StartOptions{Debounce: d})
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if handles[i].RunID != handles[0].RunID {
			t.Fatalf("start %d reached run %s, start 0 run %s", i, handles[i].RunID, handles[0].RunID)
		}
		if handles[i].Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d starts created a run, want 1", created)
	}
	first := handles[0].RunID
	waitUntil(t, 30*time.Second, "the debounced run to be claimed", func() bool {
		r, err := e.cl.Get(ctx, first)
		return err == nil && r.Status == client.StatusRunning
	})
	r, err := e.cl.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if r.DebounceKey != "catalog" || r.DebounceStarts != n {
		t.Fatalf("run's debounce key %q starts %d, want catalog and %d", r.DebounceKey, r.DebounceStarts, n)
	}

	// Claimed: the next start opens a new run.
	next, err := client.StartWorkflow(ctx, e.cl, debouncedFlow, 2000, client.StartOptions{Debounce: d})
	if err != nil {
		t.Fatal(err)
	}
	if !next.Created || next.RunID == first {
		t.Fatalf("start after the claim: run %s created=%v, want a new run", next.RunID, next.Created)
	}
	close(release)
	if out, err := handles[0].Result(ctx); err != nil || out != 1000 {
		t.Fatalf("debounced run's result %d, %v; want the last input 1000", out, err)
	}
	if out, err := next.Result(ctx); err != nil || out != 2000 {
		t.Fatalf("second run's result %d, %v; want 2000", out, err)
	}
	got := ran.snapshot()
	if len(got) != 2 || got[first] != 1 || got[next.RunID] != 1 {
		t.Fatalf("executions %v, want one of each of the two runs", got)
	}
}

// reusable completes with "ok", fails (once, no retry) with "fail", and
// waits for its context's end with "block".
var reusable = workflow.New[string, string]("Reusable")

// Each id reuse policy behaves as documented against real runs that
// completed, failed or are running.
func TestIDReusePolicies(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, concurrency: 4, register: func(w *worker.Worker) error {
		return worker.Implement(w, reusable, func(ctx workflow.Context, in string) (string, error) {
			switch in {
			case "fail":
				return "", errors.New("failed on purpose")
			case "block":
				<-ctx.Done()
				return "", context.Cause(ctx)
			}
			return in, nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	once := &retry.Policy{MaxAttempts: 1}
	run := func(ext, in string, pol client.IDReusePolicy, window time.Duration) (*client.TypedHandle[string], error) {
		return client.StartWorkflow(ctx, e.cl, reusable, in, client.StartOptions{ExternalID: ext, RetryPolicy: once,
			IDReusePolicy: pol, IDReuseWindow: window})
	}
	mustCreate := func(what string, h *client.TypedHandle[string], err error) *client.TypedHandle[string] {
		t.Helper()
		if err != nil || !h.Created {
			t.Fatalf("%s: %v, want a new run", what, err)
		}
		return h
	}
	refused := func(what string, err error, prior uuid.UUID, status client.RunStatus) {
		t.Helper()
		var re *client.IDReuseError
		if !errors.As(err, &re) || !errors.Is(err, client.ErrConflict) || re.ExistingRunID != prior || re.Status != status {
			t.Fatalf("%s: %v, want an *IDReuseError naming %s %s", what, err, prior, status)
		}
	}

	// After a COMPLETED run.
	h, err := run("done", "ok", client.AllowDuplicate, 0)
	done := mustCreate("first run", h, err)
	if _, err := done.Result(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = run("done", "ok", client.AllowDuplicateFailedOnly, 0)
	refused("failed-only after completed", err, done.RunID, client.StatusCompleted)
	_, err = run("done", "ok", client.RejectDuplicate, time.Hour)
	refused("reject after completed", err, done.RunID, client.StatusCompleted)
	h, err = run("done", "again", client.AllowDuplicate, 0)
	if out, err := mustCreate("allow after completed", h, err).Result(ctx); err != nil || out != "again" {
		t.Fatalf("allow after completed: %q %v", out, err)
	}

	// After a FAILED run.
	h, err = run("failed", "fail", client.AllowDuplicate, 0)
	failed := mustCreate("failing run", h, err)
	if _, err := failed.Result(ctx); !errors.Is(err, client.ErrRunFailed) {
		t.Fatalf("failing run: %v", err)
	}
	_, err = run("failed", "ok", client.RejectDuplicate, 0)
	refused("reject after failed", err, failed.RunID, client.StatusFailed)
	h, err = run("failed", "retried", client.AllowDuplicateFailedOnly, 0)
	if out, err := mustCreate("failed-only after failed", h, err).Result(ctx); err != nil || out != "retried" {
		t.Fatalf("failed-only after failed: %q %v", out, err)
	}

	// While a run is RUNNING: the live run is returned, or terminated.
	h, err = run("live", "block", client.AllowDuplicate, 0)
	live := mustCreate("blocking run", h, err)
	waitUntil(t, 30*time.Second, "the blocking run to run", func() bool {
		r, err := e.cl.Get(ctx, live.RunID)
		return err == nil && r.Status == client.StatusRunning
	})
	for _, pol := range []client.IDReusePolicy{client.AllowDuplicate, client.AllowDuplicateFailedOnly, client.RejectDuplicate} {
		h, err := run("live", "ok", pol, 0)
		if err != nil || h.Created || h.RunID != live.RunID {
			t.Fatalf("policy %q with a live run: %v, want the live run %s", pol, err, live.RunID)
		}
	}
	h, err = run("live", "replacement", client.TerminateIfRunning, 0)
	repl := mustCreate("terminate-if-running", h, err)
	if out, err := repl.Result(ctx); err != nil || out != "replacement" {
		t.Fatalf("replacement: %q %v", out, err)
	}
	_, err = live.Result(ctx)
	var re *client.RunError
	if !errors.As(err, &re) || re.Status != client.StatusCancelled ||
		!strings.Contains(re.Message, "id reuse: replaced by run "+repl.RunID.String()) {
		t.Fatalf("terminated run: %v", err)
	}
}
