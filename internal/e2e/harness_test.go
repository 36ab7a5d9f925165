package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/devserver"
	"github.com/kagzi/kagzi/internal/testdb"
	"github.com/kagzi/kagzi/internal/testnats"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
)

// env is one assembled system.
type env struct {
	t   *testing.T
	srv *devserver.Server
	url string
	nc  *nats.Conn
	cl  *client.Client
	ns  *testnats.Server
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
	stmts *store.StatementCounter
	// limits, if set, are the database's payload limits, set before any
	// service starts.
	limits *store.Settings
	// natsMaxPayload, if set, is the NATS server's message size limit.
	natsMaxPayload int32
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
	ns := testnats.StartWithMaxPayload(t, maxPayload)
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
	srv, err := devserver.Start(ctx, devserver.Options{
		DatabaseURL: url, NATSURL: ns.URL(), Dispatchers: o.dispatchers, Workers: o.workers,
		Worker:     config.Worker{MaxConcurrency: o.concurrency, HeartbeatInterval: time.Second, WaitTimeout: o.wait},
		Register:   o.register,
		Statements: o.stmts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cl, err := client.New(srv.Store, nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, srv: srv, url: url, nc: nc, cl: cl, ns: ns, relayUp: relayUp}
	select {
	case <-relayUp:
	case <-time.After(10 * time.Second):
		t.Fatal("no relay came up")
	}
	return e
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
