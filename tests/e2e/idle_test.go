package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
)

// An idle system costs Postgres close to nothing: the dispatcher remembers
// that the queue is empty and parks renewed requests without a query.
func TestIdleIssuesAlmostNoStatements(t *testing.T) {
	t.Parallel()
	stmts := &stmtcount.Counter{}
	calls := newCounter()
	// Workers renew their requests every 250 ms: 80 renewals in the window.
	e := start(t, opts{dispatchers: 1, workers: 2, register: threeSteps(calls), wait: 250 * time.Millisecond, stmts: stmts})
	ctx := context.Background()
	// One run first, so the queue has been claimed from and found empty.
	h, err := e.cl.Start(ctx, "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Result(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Let the last claim (which finds the queue empty) happen.
	time.Sleep(time.Second)
	skipsBefore := e.srv.Dispatchers[0].Stats().EmptySkips
	// window measures 10 s of idleness. Polling would cost statements in
	// every window; the one run's follow-ups (its attribute counts' fold,
	// the lease re-read a lease after its claim) are one-offs that may land
	// in any window, so a window over the bound is measured again, up to
	// four times, and one of them must hold.
	window := func() (int64, []string) {
		before := stmts.Load()
		time.Sleep(10 * time.Second) // the measured idle window itself
		return stmts.Load() - before, stmts.Since(before)
	}
	n, recent := window()
	for try := 2; n > 5; try++ {
		if try > 4 {
			t.Fatalf("idle for 10 s four times, the services issued %d statements the last time, want at most 5: %q", n, recent)
		}
		t.Logf("idle for 10 s, the services issued %d statements, measured again: %q", n, recent)
		n, recent = window()
	}
	if skips := e.srv.Dispatchers[0].Stats().EmptySkips - skipsBefore; skips < 20 {
		t.Fatalf("only %d renewed requests were parked without a query; the window did not exercise renewals", skips)
	}
	t.Logf("idle 10 s: %d statements (%q), %d renewals parked without a query", n, recent, e.srv.Dispatchers[0].Stats().EmptySkips-skipsBefore)
}
