package e2e_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/stmtcount"
	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
	"github.com/kagzi/kagzi/tests/testpgbouncer"
)

// env is one assembled system.
type env struct {
	t   *testing.T
	srv *devserver.Server
	url string
	nc  *nats.Conn
	cl  *client.Client
	ns  *testnats.Server
	// auth is the server with the generated users, under
	// KAGZI_E2E_NATS_AUTH (then ns is its Server); nil otherwise.
	auth *testnats.AuthServer
	// relayUp receives every relay announcement.
	relayUp chan *nats.Msg
}

type opts struct {
	dispatchers, workers int
	concurrency          int
	register             func(*worker.Worker) error
	// wait is the workers' request renewal interval.
	wait time.Duration
	// stmts counts the services' statements.
	stmts *stmtcount.Counter
	// limits, if set, are the database's payload limits, set before any
	// service starts.
	limits *store.Settings
	// natsMaxPayload, if set, is the NATS server's message size limit.
	natsMaxPayload int32
	// pooler runs the services' pooled work (and the client's) through a
	// PgBouncer in transaction mode, their sessions (the relay's, the
	// reaper's) directly; KAGZI_E2E_PGBOUNCER sets it for every test.
	pooler bool
}

func start(t *testing.T, o opts) *env {
	t.Helper()
	url := testdb.New(t)
	if o.limits != nil {
		pool, err := store.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.New(pool, store.Options{}).SettingsSet(context.Background(), *o.limits)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	maxPayload := int32(testnats.MaxPayload)
	if o.natsMaxPayload > 0 {
		maxPayload = o.natsMaxPayload
	}
	var ns *testnats.Server
	var auth *testnats.AuthServer
	if natsAuth() {
		auth = testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"default"}, MaxPayload: maxPayload})
		ns = auth.Server
	} else {
		ns = testnats.StartWithMaxPayload(t, maxPayload)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nc := ns.Connect(t)
	// Subscribe before anything starts, so the relay's announcement is seen.
	relayUp := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe(protocol.SubjectRelayUp, relayUp); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pooled := url
	if o.pooler || pooler() {
		pooled = testpgbouncer.URL(t, testpgbouncer.Start(t, url), url)
	}
	wcfg := defaults[workersvc.Config](t)
	// No concurrency given: the SDK's default, as a worker embedded in a
	// test program has.
	wcfg.MaxConcurrency, wcfg.HeartbeatInterval = cmp.Or(o.concurrency, worker.DefaultMaxConcurrency), time.Second
	if o.wait > 0 {
		wcfg.WaitTimeout = o.wait
	}
	dopts := devserver.Options{
		DatabaseURL: pooled, SessionURL: url, NATSURL: ns.URL(), Dispatchers: o.dispatchers, Workers: o.workers,
		Worker:     wcfg,
		Register:   o.register,
		Statements: o.stmts,
	}
	clientNC := nc
	if auth != nil {
		// Every service, worker and the client connect as their role; the
		// test's own connection (nc) is the Observer's.
		dopts.NATSOptions = func(role string) []nats.Option {
			return auth.Options(t, role, "default", "worker")
		}
		clientNC = auth.ConnectAs(t, nil, protocol.RoleClient, "default", "")
	}
	srv, err := devserver.Start(ctx, dopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cl := newClient(t, srv.Store, clientNC)
	e := &env{t: t, srv: srv, url: url, nc: nc, cl: cl, ns: ns, auth: auth, relayUp: relayUp}
	select {
	case <-relayUp:
	case <-time.After(10 * time.Second):
		t.Fatal("no relay came up")
	}
	return e
}

// full reports whether KAGZI_E2E_FULL asks for the whole matrix of the
// long fault cases (`make test-faults`): each on every NATS server
// version and ping setting, frozen for as long as the case was first seen
// with. `make test` runs a quick case of each kind, on the server that
// showed the defect, so that it stays within its time.
func full() bool { return os.Getenv("KAGZI_E2E_FULL") != "" }

// skipUnderAuth skips a test that assembles its own NATS server, without
// authorization, under KAGZI_E2E_NATS_AUTH (`make test-auth`): it would
// run exactly as it did in the run without, which covers it.
func skipUnderAuth(t *testing.T) {
	t.Helper()
	if natsAuth() {
		t.Skip("assembles its own NATS server without authorization: the run without KAGZI_E2E_NATS_AUTH covers it")
	}
}

// pooler reports whether KAGZI_E2E_PGBOUNCER asks for the systems of
// start to do their pooled work through a PgBouncer in transaction mode
// (`make test-pooler`).
func pooler() bool { return os.Getenv("KAGZI_E2E_PGBOUNCER") != "" }

// natsAuth reports whether KAGZI_E2E_NATS_AUTH asks for the systems of
// start to run on a NATS server with the users and permissions of `kagzi
// nats-config`, each component connecting as its role.
func natsAuth() bool { return os.Getenv("KAGZI_E2E_NATS_AUTH") != "" }

// Tests that kill, hold or cut off a component assemble their own, on a
// database (testdb.New) and a NATS server (testnats.Start) of their own,
// with the helpers below.

// openStore opens a store on the database at url, closed when t ends; its
// statements are counted in stmts, if given.
func openStore(t *testing.T, url string, stmts *stmtcount.Counter) *store.Store {
	t.Helper()
	connect := store.Connect
	if stmts != nil {
		connect = func(ctx context.Context, url string) (*pgxpool.Pool, error) {
			return store.ConnectTraced(ctx, url, stmts)
		}
	}
	pool, err := connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool, store.Options{})
}

// defaults is a configuration at its defaults (config.Defaults): tests
// change what they mean to on it.
func defaults[C any](t testing.TB) C {
	t.Helper()
	cfg, err := config.Defaults[C](context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// dispatcherConfig is the dispatcher's configuration at its defaults on
// the database at url, with what set (if not nil) changes.
func dispatcherConfig(t testing.TB, url string, set func(*dispatcher.Config)) dispatcher.Config {
	t.Helper()
	cfg := defaults[dispatcher.Config](t)
	cfg.DatabaseURL = url
	if set != nil {
		set(&cfg)
	}
	return cfg
}

// startRelay starts a relay on nc, stopped when t ends.
func startRelay(t *testing.T, url string, nc *nats.Conn) *dispatcher.Relay {
	t.Helper()
	r := dispatcher.NewRelay(dispatcherConfig(t, url, nil), dispatcher.RelayDeps{}, nc, nil)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// startWorker starts a worker on a NATS connection of its own to ns, with
// the workflows register adds; it is stopped when t ends.
func startWorker(t *testing.T, ns *testnats.Server, cfg worker.Config, register func(*worker.Worker) error) *worker.Worker {
	t.Helper()
	w, err := worker.New(cfg, ns.Connect(t, worker.Inbox(cfg.Namespace, "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := register(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// newClient returns a client on st and nc, closed when t ends.
func newClient(t *testing.T, st *store.Store, nc *nats.Conn) *client.Client {
	t.Helper()
	cl, err := client.NewFromStore(st, nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// counter counts invocations per key.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) inc(format string, args ...any) {
	c.mu.Lock()
	c.n[fmt.Sprintf(format, args...)]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// waitAll waits for every handle's result within d.
func waitAll(t *testing.T, hs []*client.Handle, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := make(chan error, len(hs))
	sem := make(chan struct{}, 64)
	for _, h := range hs {
		sem <- struct{}{}
		go func(h *client.Handle) {
			defer func() { <-sem }()
			errs <- h.Result(ctx, nil)
		}(h)
	}
	for range hs {
		if err := <-errs; err != nil {
			t.Fatalf("run did not complete: %v", err)
		}
	}
}

// waitUntil polls cond until it holds (the condition, not the poll
// interval, is the synchronisation) and returns when it did.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}
