// Package consoletest assembles what the console's tests run against: the
// engine (dispatcher with relay, scheduler, reaper, one worker) on a
// database and NATS server of the test's own, a console in front of it on
// an httptest server, and a client. The console's API tests and its
// browser tests (a module of their own) share it.
package consoletest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/stmtcount"
	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Env is one assembled engine and console.
type Env struct {
	Srv *devserver.Server
	// Cl is a client of namespace "default".
	Cl  *client.Client
	Con *console.Console
	// HTTP serves Con's handler.
	HTTP *httptest.Server
	// Stmts counts the console's statements (not the services').
	Stmts *stmtcount.Counter
	// NC is the console's NATS connection.
	NC *nats.Conn
}

// Start assembles an Env whose worker registers with register; opts
// configure the console (Pool and NATS are set here). Everything stops
// when t ends. With natsErrs set, NATS authorization is on (the users and
// permissions of `kagzi nats-config`), every process connects as its role,
// and the console's NATS errors (permission violations) go to natsErrs.
func Start(t testing.TB, opts console.Options, register func(*worker.Worker) error, natsErrs chan error) *Env {
	t.Helper()
	url := testdb.New(t)
	var ns *testnats.Server
	var auth *testnats.AuthServer
	if natsErrs != nil {
		auth = testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"default"}})
		ns = auth.Server
	} else {
		ns = testnats.Start(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wcfg, err := config.Defaults[workersvc.Config](ctx)
	if err != nil {
		t.Fatal(err)
	}
	wcfg.MaxConcurrency, wcfg.HeartbeatInterval = 8, time.Second
	dopts := devserver.Options{DatabaseURL: url, NATSURL: ns.URL(), Workers: 1, Worker: wcfg, Register: register}
	if auth != nil {
		dopts.NATSOptions = func(role string) []nats.Option { return auth.Options(t, role, "default", "worker") }
	}
	srv, err := devserver.Start(ctx, dopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	e := &Env{Srv: srv, Stmts: &stmtcount.Counter{}}
	pool, err := store.ConnectTraced(ctx, url, e.Stmts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	nc, clientNC := ns.Connect(t), ns.Connect(t)
	if auth != nil {
		nc = auth.ConnectAs(t, natsErrs, protocol.RoleConsole, "", "")
		clientNC = auth.ConnectAs(t, nil, protocol.RoleClient, "default", "")
	}
	opts.Pool, opts.NATS = pool, nc
	e.NC = nc
	e.Con, err = console.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.HTTP = httptest.NewServer(e.Con.Handler())
	t.Cleanup(e.HTTP.Close)
	// Stopped before the server closes: open event streams end with it.
	if err := e.Con.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Con.Stop)
	e.Cl, err = client.NewFromStore(srv.Store, clientNC, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Cl.Close)
	return e
}
