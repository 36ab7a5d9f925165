package reaper_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// harness is a database, a NATS server and the reapers under test; st is
// a store of its own for the test's reads and writes, so stmts counts
// only the reapers' statements.
type harness struct {
	t     *testing.T
	url   string
	st    *store.Store
	rst   *store.Store
	stmts *stmtcount.Counter
	ns    *testnats.Server
	pub   *nats.Conn
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	pool, url := testdb.Pool(t)
	stmts := &stmtcount.Counter{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rpool, err := store.ConnectTraced(ctx, url, stmts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpool.Close)
	ns := testnats.Start(t)
	return &harness{t: t, url: url, st: store.New(pool, store.Options{}), rst: store.New(rpool, store.Options{}),
		stmts: stmts, ns: ns, pub: ns.Connect(t)}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("KAGZI_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// config is a reaper's configuration at its defaults on the harness's
// database, with set (if any) applied.
func (h *harness) config(set func(c *reaper.Config)) reaper.Config {
	h.t.Helper()
	cfg, err := config.Defaults[reaper.Config](context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	cfg.DatabaseURL = h.url
	if set != nil {
		set(&cfg)
	}
	return cfg
}

// reaper starts a reaper on its own NATS connection with the knobs k;
// hook, if set, sees every flush.
func (h *harness) reaper(k reaper.Knobs, set func(c *reaper.Config), hook func(workers int)) *reaper.Reaper {
	h.t.Helper()
	r := reaper.NewWith(h.config(set), k, h.rst, h.ns.Connect(h.t), testLogger(h.t))
	if hook != nil {
		reaper.SetFlushHook(r, hook)
	}
	if err := r.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(r.Stop)
	return r
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settled waits until r's counters satisfy want (they are bumped just after
// the statements they count return, so a test that saw the effect in the
// database may read them a moment early) and returns them. It waits as
// long as clocked.settle does for a step: under the full suite, two
// clocked tests once waited together past 5 s for steps that came.
func settled(t *testing.T, r *reaper.Reaper, what string, want func(reaper.Stats) bool) reaper.Stats {
	t.Helper()
	var st reaper.Stats
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = r.Stats()
		if want(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaper stats: %+v; want %s", st, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitLeader(t *testing.T, rs ...*reaper.Reaper) *reaper.Reaper {
	t.Helper()
	var l *reaper.Reaper
	eventually(t, 10*time.Second, "a reaper leads", func() bool {
		for _, r := range rs {
			if r.IsLeader() {
				l = r
				return true
			}
		}
		return false
	})
	return l
}

// fake is a worker made of NATS messages.
type fake struct {
	h         *harness
	id        uuid.UUID
	ns, queue string
}

func (h *harness) fake() *fake {
	return &fake{h: h, id: uuid.New(), ns: "default", queue: "q"}
}

func (f *fake) publish(subject string, m protocol.Message) {
	f.h.t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		f.h.t.Fatal(err)
	}
	if err := f.h.pub.Publish(subject, data); err != nil {
		f.h.t.Fatal(err)
	}
}

func (f *fake) register() {
	f.publish(protocol.SubjectWorkerRegister(f.ns), &protocol.WorkerRegister{WorkerID: f.id, Namespace: f.ns, Queue: f.queue,
		Hostname: "fake", PID: 7, Version: "1.0", Types: []protocol.TypeVersion{{Type: "T", Version: "v1"}}, MaxConcurrency: 4})
}

func (f *fake) beat(draining bool, runs ...uuid.UUID) {
	f.publish(protocol.SubjectWorkerHeartbeat(f.ns), &protocol.Heartbeat{WorkerID: f.id, Namespace: f.ns, Queue: f.queue,
		Runs: runs, Draining: draining, SentAt: time.Now().UTC()})
}

func (f *fake) deregister() {
	f.publish(protocol.SubjectWorkerDeregister(f.ns), &protocol.WorkerDeregister{WorkerID: f.id, Namespace: f.ns})
}

// flush makes sure the server has what was published.
func (h *harness) flush() {
	h.t.Helper()
	if err := h.pub.Flush(); err != nil {
		h.t.Fatal(err)
	}
}

// beatEvery publishes f's heartbeat every d until the returned stop is
// called; stop returns when the last heartbeat was published (and flushed).
func (f *fake) beatEvery(d time.Duration, runs ...uuid.UUID) (stop func() time.Time) {
	quit := make(chan struct{})
	last := make(chan time.Time, 1)
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		var at time.Time
		for {
			f.beatNoFail(runs)
			_ = f.h.pub.Flush()
			at = time.Now()
			select {
			case <-quit:
				last <- at
				return
			case <-t.C:
			}
		}
	}()
	return func() time.Time {
		close(quit)
		return <-last
	}
}

// beatNoFail is beat for goroutines other than the test's.
func (f *fake) beatNoFail(runs []uuid.UUID) {
	data, err := protocol.Encode(&protocol.Heartbeat{WorkerID: f.id, Namespace: f.ns, Queue: f.queue, Runs: runs, SentAt: time.Now().UTC()})
	if err == nil {
		_ = f.h.pub.Publish(protocol.SubjectWorkerHeartbeat(f.ns), data)
	}
}

// claimed creates n runs of type T in queue q and claims each for worker
// (one claim per run), with the given policy and lease.
func (h *harness) claimed(worker uuid.UUID, n int, maxAttempts int, lease time.Duration) []store.ClaimedRun {
	h.t.Helper()
	ctx := context.Background()
	var out []store.ClaimedRun
	for i := 0; i < n; i++ {
		p := store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T"}
		if maxAttempts != 0 {
			p.RetryPolicy = retryPolicy(maxAttempts)
		}
		if _, _, err := h.st.RunsCreate(ctx, p); err != nil {
			h.t.Fatal(err)
		}
		c, err := h.st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "q", WorkerID: worker,
			Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: 1, Lease: lease})
		if err != nil || len(c) != 1 {
			h.t.Fatalf("claim: %v %v", c, err)
		}
		out = append(out, c[0])
	}
	return out
}

func (h *harness) run(id uuid.UUID) store.Run {
	h.t.Helper()
	r, err := h.st.RunsGet(context.Background(), "default", id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) worker(id uuid.UUID) (store.Worker, bool) {
	h.t.Helper()
	w, err := h.st.WorkersGet(context.Background(), "default", id)
	if err != nil {
		return store.Worker{}, false
	}
	return w, true
}

func retryPolicy(maxAttempts int) *retry.Policy {
	return &retry.Policy{MaxAttempts: maxAttempts, InitialInterval: 10 * time.Millisecond}
}
