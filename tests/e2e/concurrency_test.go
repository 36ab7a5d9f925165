package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
)

// Runs held behind a concurrency limit are claimed as soon as the limit is
// raised, and the rest as soon as it is removed: the change itself wakes
// the queue. Each change is made right after the dispatcher's backoff of
// looks at the runs it left has grown past quiet, and the runs must be
// claimed well before its next look.
func TestRaisingOrRemovingALimitWakesWaitingRuns(t *testing.T) {
	t.Parallel()
	const quiet = 1600 * time.Millisecond
	g := newGated()
	e := start(t, opts{workers: -1})
	e.startWorker(worker.Config{Queue: "gate", MaxConcurrency: 10}, g.register)
	ctx := context.Background()
	if _, err := e.cl.SetConcurrencyLimit(ctx, "gate", "Gated", 1); err != nil {
		t.Fatal(err)
	}
	var hs []*client.Handle
	for i := 0; i < 5; i++ {
		h, err := e.cl.Start(ctx, "Gated", nil, client.StartOptions{Queue: "gate"})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	arrive := func(n int, within time.Duration, what string) time.Duration {
		t.Helper()
		start := time.Now()
		timeout := time.After(within)
		for i := 0; i < n; i++ {
			select {
			case <-g.arrived:
			case <-timeout:
				t.Fatalf("%s: %d of %d runs claimed within %v", what, i, n, within)
			}
		}
		return time.Since(start)
	}
	arrive(1, 10*time.Second, "the first run under the limit")

	waitBackoff(t, e, quiet)
	if _, err := e.cl.SetConcurrencyLimit(ctx, "gate", "Gated", 3); err != nil {
		t.Fatal(err)
	}
	raised := arrive(2, quiet, "limit raised to 3")
	if n := g.inFlight.Load(); n != 3 {
		t.Fatalf("%d runs running under a limit of 3", n)
	}

	waitBackoff(t, e, quiet)
	if err := e.cl.RemoveConcurrencyLimit(ctx, "gate", "Gated"); err != nil {
		t.Fatal(err)
	}
	removed := arrive(2, quiet, "limit removed")
	t.Logf("waiting runs claimed %v after the raise, %v after the removal", raised.Round(time.Millisecond), removed.Round(time.Millisecond))
	close(g.open)
	waitAll(t, hs, 30*time.Second)
	if p := g.peak.Load(); p != 5 {
		t.Fatalf("peak %d runs at once, want all 5 once the limit was removed", p)
	}
}

// waitBackoff returns shortly after a claim that came at least gap after
// the one before it, with no claim in between: the dispatcher's looks at
// runs it left are backing off (doubling), so its next look is at least
// 2×gap after that claim. The counter moves as the claim begins; the short
// wait lets its statement end, so that a change made next is not seen by it.
func waitBackoff(t *testing.T, e *env, gap time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, at := e.claims(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		n := e.claims()
		if n == last {
			continue
		}
		now := time.Now()
		if now.Sub(at) >= gap && n == last+1 {
			time.Sleep(200 * time.Millisecond)
			if e.claims() != n {
				t.Fatal("the dispatcher claimed again within 200 ms of a backed-off look")
			}
			return
		}
		last, at = n, now
	}
	t.Fatalf("the dispatcher's looks at waiting runs did not back off to %v", gap)
}
