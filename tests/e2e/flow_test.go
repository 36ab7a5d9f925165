package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Flow control through the real processes: dispatcher and reaper
// processes of their own (so one can be frozen or killed), workers on
// connections of their own, runs started by the client.

// keyedIn is the input of the Keyed workflow: its concurrency key and how
// long its one step works.
type keyedIn struct {
	Key  string `json:"key"`
	Work int    `json:"work_ms"`
}

// keyTracker records, from inside the steps, how many runs of each key
// execute at once, the most ever, and when each run's step began.
type keyTracker struct {
	mu     sync.Mutex
	active map[string]int
	peak   map[string]int
	starts []time.Time
	done   map[string]int
}

func newKeyTracker() *keyTracker {
	return &keyTracker{active: map[string]int{}, peak: map[string]int{}, done: map[string]int{}}
}

func (k *keyTracker) register(w *worker.Worker) error {
	return worker.Register(w, "Keyed", func(ctx workflow.Context, in keyedIn) (int, error) {
		return workflow.Step(ctx, "work", func(context.Context) (int, error) {
			k.mu.Lock()
			k.active[in.Key]++
			k.peak[in.Key] = max(k.peak[in.Key], k.active[in.Key])
			k.starts = append(k.starts, time.Now())
			k.mu.Unlock()
			time.Sleep(time.Duration(in.Work) * time.Millisecond) // the step's work
			k.mu.Lock()
			k.active[in.Key]--
			k.done[in.Key]++
			k.mu.Unlock()
			return 1, nil
		})
	})
}

func (k *keyTracker) peaks() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int, len(k.peak))
	for key, n := range k.peak {
		out[key] = n
	}
	return out
}

func (k *keyTracker) doneOf(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done[key]
}

// flowCluster is a database, a NATS server that evicts silent clients, a
// store, dispatcher processes, a reaper process and workers.
type flowCluster struct {
	url   string
	ns    *testnats.Server
	st    *store.Store
	cl    *client.Client
	disps []*proc
}

func startFlowCluster(t *testing.T, dispatchers, workers, concurrency int, register func(*worker.Worker) error) *flowCluster {
	t.Helper()
	url := testdb.New(t)
	ns := testnats.StartPinging(t)
	c := &flowCluster{url: url, ns: ns, st: openStore(t, url, nil)}
	for i := 0; i < dispatchers; i++ {
		c.disps = append(c.disps, spawnDispatcher(t, url, ns.URL(), true))
	}
	spawnReaper(t, url, ns.URL(), "1000", "1s")
	for i := 0; i < workers; i++ {
		startWorker(t, ns, worker.Config{MaxConcurrency: concurrency}, register)
	}
	c.cl = newClient(t, c.st, ns.Connect(t))
	return c
}

// startKeyed starts n runs of Keyed with key (as both the input's key and
// the concurrency key) and rate key rate, in batches.
func (c *flowCluster) startKeyed(t *testing.T, key, rate string, n, workMS int) []*client.Handle {
	t.Helper()
	var hs []*client.Handle
	for n > 0 {
		b := min(n, 1000)
		reqs := make([]client.StartRequest, b)
		for i := range reqs {
			reqs[i] = client.StartRequest{Type: "Keyed", Input: keyedIn{Key: key, Work: workMS},
				Options: client.StartOptions{ConcurrencyKey: key, RateLimitKey: rate}}
		}
		got, err := c.cl.StartMany(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, got...)
		n -= b
	}
	return hs
}

// warm runs one run through the cluster and waits for it: the processes
// are up and the workers' requests parked, so what a test times next is
// flow control, not their start.
func (c *flowCluster) warm(t *testing.T) {
	t.Helper()
	waitHandles(t, c.startKeyed(t, "warm-up", "", 1, 0), 60*time.Second)
}

// watchRunning samples the RUNNING runs per key (as the per-key limit
// counts them) until stop is closed and reports the most seen per key.
func (c *flowCluster) watchRunning(t *testing.T, typ string, stop <-chan struct{}) func() map[string]int {
	peak := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			us, err := c.st.LimitsKeyUsage(context.Background(), "default", "default", typ, 1000)
			if err != nil {
				select {
				case <-stop:
				default:
					t.Errorf("key usage: %v", err)
				}
				return
			}
			for _, u := range us {
				peak[u.Key] = max(peak[u.Key], u.Running)
			}
		}
	}()
	return func() map[string]int {
		<-done
		return peak
	}
}

func waitHandles(t *testing.T, hs []*client.Handle, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, h := range hs {
		if _, err := result[int](t, h, time.Until(deadline)); err != nil {
			t.Fatalf("run %s: %v", h.RunID, err)
		}
	}
}

// (a) 50 keys of 200 runs, a per-key limit of 2, three dispatchers and
// four workers: no key ever has more than 2 runs running, in the database
// or in the steps, and every key reaches 2.
func TestPerKeyLimitAcrossDispatchers(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	keys, perKey := 50, 200
	if testing.Short() {
		perKey = 20
	}
	tr := newKeyTracker()
	c := startFlowCluster(t, 3, 4, 30, tr.register)
	ctx := context.Background()
	if _, err := c.cl.SetKeyConcurrencyLimit(ctx, "", "Keyed", 2); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peaks := c.watchRunning(t, "Keyed", stop)
	began := time.Now()
	var hs []*client.Handle
	for k := 0; k < keys; k++ {
		hs = append(hs, c.startKeyed(t, fmt.Sprintf("customer-%02d", k), "", perKey, 2)...)
	}
	// About 70 s alone with -race on 2 cores; the e2e suite runs other
	// tests beside it.
	waitHandles(t, hs, 180*time.Second)
	close(stop)
	t.Logf("%d runs of %d keys in %v", len(hs), keys, time.Since(began).Round(time.Millisecond))
	db, steps := peaks(), tr.peaks()
	if len(steps) != keys {
		t.Fatalf("%d keys ran, want %d", len(steps), keys)
	}
	reached := 0
	for k, n := range steps {
		if n > 2 || db[k] > 2 {
			t.Fatalf("key %s: %d steps at once, %d running in the database; limit 2", k, n, db[k])
		}
		if n == 2 {
			reached++
		}
	}
	if reached == 0 {
		t.Fatal("no key ever ran 2 at once: the limit was never reached")
	}
	t.Logf("%d of %d keys reached the limit of 2", reached, keys)
}

// (b) Fairness: key B's 10 runs, queued behind 10,000 of key A's, finish
// within 5 rounds (2 at a time) of their run time and a claim, while A is
// far from done.
func TestPerKeyLimitIsFair(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	tr := newKeyTracker()
	c := startFlowCluster(t, 2, 2, 4, tr.register)
	ctx := context.Background()
	if _, err := c.cl.SetKeyConcurrencyLimit(ctx, "", "Keyed", 2); err != nil {
		t.Fatal(err)
	}
	c.warm(t)
	const work = 200 * time.Millisecond
	c.startKeyed(t, "A", "", 10000, int(work/time.Millisecond))
	began := time.Now()
	hs := c.startKeyed(t, "B", "", 10, int(work/time.Millisecond))
	// Five rounds of (run time + delivery and report, 300 ms on a loaded
	// machine), and 3 s for the first claim and the workers' requests.
	bound := 5*(work+300*time.Millisecond) + 3*time.Second
	waitHandles(t, hs, bound+20*time.Second)
	took := time.Since(began)
	a := tr.doneOf("A")
	t.Logf("B's 10 runs done in %v (bound %v); A had finished %d of 10000", took.Round(time.Millisecond), bound, a)
	if took > bound {
		t.Fatalf("B's runs took %v, bound %v", took, bound)
	}
	if a > 1000 {
		t.Fatalf("A finished %d runs: not behind", a)
	}
	if p := tr.peaks(); p["A"] > 2 || p["B"] > 2 {
		t.Fatalf("peaks %v over the limit of 2", p)
	}
}

// (c) A rate limit of 10 per second across three dispatchers: 100 runs
// start at most 10 in each one-second window (by the claim's time, as the
// engine counts them) and all finish about 10 s after the first starts.
func TestRateLimitAcrossDispatchers(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	tr := newKeyTracker()
	c := startFlowCluster(t, 3, 3, 20, tr.register)
	ctx := context.Background()
	if _, err := c.cl.SetRateLimit(ctx, "crm", 10, time.Second); err != nil {
		t.Fatal(err)
	}
	c.warm(t)
	hs := c.startKeyed(t, "", "crm", 100, 1)
	waitHandles(t, hs, 60*time.Second)
	perWindow := map[int64]int{}
	var first, lastStart, last time.Time
	for _, h := range hs {
		r, err := c.st.RunsGet(ctx, "default", h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		perWindow[r.StartedAt.Unix()]++
		if first.IsZero() || r.StartedAt.Before(first) {
			first = *r.StartedAt
		}
		if r.StartedAt.After(lastStart) {
			lastStart = *r.StartedAt
		}
		if r.FinishedAt.After(last) {
			last = *r.FinishedAt
		}
	}
	// Counted from the first claim: the processes' start is not the
	// limit's.
	took, starts := last.Sub(first), lastStart.Sub(first)
	for w, n := range perWindow {
		if n > 10 {
			t.Fatalf("%d runs started in the window of %v; limit 10 (%v)", n, time.Unix(w, 0), perWindow)
		}
	}
	t.Logf("100 runs in %v over %d windows: %v", took.Round(time.Millisecond), len(perWindow), perWindow)
	// 100 at 10 a window: 10 windows, the first one begun when the first
	// run was claimed, so 8 to 10 s from the first claim to the last (the
	// held runs are claimed as their window opens; started_at is a run's
	// first claim). The last run's end follows its claim by a delivery and
	// a report, except for a run whose delivery a loaded worker did not
	// take in time: it is claimed again, and that claim counts too, so it
	// waits for a window with room, behind the runs held before it (up to
	// 10 windows more).
	t.Logf("claims over %v, last end %v after the first claim", starts.Round(time.Millisecond), took.Round(time.Millisecond))
	if len(perWindow) != 10 || starts < 8*time.Second || starts > 10*time.Second || took > starts+15*time.Second {
		t.Fatalf("100 runs at 10/s: claims over %v in %d windows, done %v after the first; want about 10 s", starts, len(perWindow), took)
	}
	rl, err := c.cl.RateLimits(ctx)
	if err != nil || len(rl) != 1 || rl[0].Key != "crm" {
		t.Fatalf("rate limits %+v %v", rl, err)
	}
}

// (d) With runs of limited keys running, one dispatcher is frozen
// (SIGSTOP) and another killed (SIGKILL): no key ever has more than its
// limit running, and every run completes on the dispatcher left.
func TestPerKeyLimitSurvivesFrozenAndKilledDispatchers(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	tr := newKeyTracker()
	c := startFlowCluster(t, 3, 3, 10, tr.register)
	ctx := context.Background()
	if _, err := c.cl.SetKeyConcurrencyLimit(ctx, "", "Keyed", 2); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peaks := c.watchRunning(t, "Keyed", stop)
	var hs []*client.Handle
	for k := 0; k < 4; k++ {
		hs = append(hs, c.startKeyed(t, fmt.Sprintf("k%d", k), "", 15, 150)...)
	}
	waitUntil(t, 20*time.Second, "every key to run 2 at once", func() bool {
		p := tr.peaks()
		return len(p) == 4 && p["k0"] == 2 && p["k1"] == 2 && p["k2"] == 2 && p["k3"] == 2
	})
	c.disps[0].freeze()
	c.disps[1].kill()
	waitHandles(t, hs, 90*time.Second)
	close(stop)
	db, steps := peaks(), tr.peaks()
	for k, n := range steps {
		if n > 2 || db[k] > 2 {
			t.Fatalf("key %s: %d steps at once, %d running in the database; limit 2", k, n, db[k])
		}
	}
	for k := 0; k < 4; k++ {
		if n := tr.doneOf(fmt.Sprintf("k%d", k)); n < 15 {
			t.Fatalf("key k%d: %d of 15 steps done", k, n)
		}
	}
}
