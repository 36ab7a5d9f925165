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
	before := stmts.Load()
	time.Sleep(10 * time.Second) // the measured idle window itself
	n := stmts.Load() - before
	if n > 5 {
		t.Fatalf("idle for 10 s, the services issued %d statements, want at most 5", n)
	}
	if skips := e.srv.Dispatchers[0].Stats().EmptySkips - skipsBefore; skips < 20 {
		t.Fatalf("only %d renewed requests were parked without a query; the window did not exercise renewals", skips)
	}
	t.Logf("idle 10 s: %d statements, %d renewals parked without a query", n, e.srv.Dispatchers[0].Stats().EmptySkips-skipsBefore)
}
