package e2e_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A client waiting for a run's result learns of its end by a notice. A run
// that completes or fails through a report is announced twice, by the
// dispatcher that applied the report and by the relay; any other end (a
// termination, a deadline, a recovery) only by the relay. Each way that
// notice can be lost is answered by a backlog read: here, for the waiter, a
// re-read of its run. The runs below end by a termination.

// proxy is a TCP proxy to a NATS server that can silently swallow what
// goes through it (a connection that died without either end noticing
// yet) and then cut its connections.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	black bool
	conns []net.Conn
	// swallowed counts the bytes from clients dropped while swallowing.
	swallowed int
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	go p.accept()
	return p
}

func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

// pipe copies from src to dst, dropping what it reads while swallowing.
func (p *proxy) pipe(src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			black := p.black
			if black && fromClient {
				p.swallowed += n
			}
			p.mu.Unlock()
			if !black {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// swallow makes the connections through p drop everything from now on.
func (p *proxy) swallow() {
	p.mu.Lock()
	p.black = true
	p.mu.Unlock()
}

// cut closes every connection through p; new ones go through normally.
func (p *proxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.black = nil, false
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// waiting is a run held in its workflow, and a client waiting for its
// result; the relay is the test's to lose.
type waiting struct {
	t       *testing.T
	url     string
	ns      *testnats.Server
	st      *store.Store
	cl      *client.Client
	release chan struct{}
	result  chan error
	h       *client.Handle
}

// startWaiting starts the services but the relay (which startRelay starts)
// and a run, and waits until the client's Wait has read the run as
// running. The client connects with connect, if given.
func startWaiting(t *testing.T, startRelay func(url string, ns *testnats.Server) *dispatcher.Relay,
	connect func(ns *testnats.Server) *nats.Conn) (*waiting, *dispatcher.Relay) {
	t.Helper()
	url := testdb.New(t)
	ns := testnats.Start(t)
	ctx := context.Background()
	st := openStore(t, url, nil)
	obs := observe(t, ns.Connect(t))
	relay := startRelay(url, ns)
	obs.until(t, "the relay is up", func() bool { return obs.relayUps > 0 })
	inProcessDispatcher(t, st, url, ns, false)

	w := &waiting{t: t, url: url, ns: ns, st: st, release: make(chan struct{}), result: make(chan error, 1)}
	started := make(chan struct{}, 1)
	startWorker(t, ns, worker.Config{}, func(wk *worker.Worker) error {
		return worker.Register(wk, "Held", func(ctx workflow.Context, _ int) (int, error) {
			started <- struct{}{}
			<-w.release
			return 7, nil
		})
	})
	t.Cleanup(func() {
		select {
		case <-w.release:
		default:
			close(w.release)
		}
	})

	// The client's statements are counted: its first read tells that its
	// Wait has subscribed and seen the run running.
	stmts := &stmtcount.Counter{}
	cst := openStore(t, url, stmts)
	if connect == nil {
		connect = func(ns *testnats.Server) *nats.Conn { return ns.Connect(t) }
	}
	w.cl = newClient(t, cst, connect(ns))
	var err error
	w.h, err = w.cl.Start(ctx, "Held", 0, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not start")
	}
	before := stmts.Load()
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { w.result <- w.h.Result(wctx, nil) }()
	waitUntil(t, 30*time.Second, "the client's Wait to read the run", func() bool { return stmts.Load() != before })
	return w, relay
}

// cancel terminates the run and waits until it is CANCELLED in Postgres
// and done says its notice has gone wherever it goes.
func (w *waiting) cancel(done func() bool) {
	w.t.Helper()
	if err := w.cl.Terminate(context.Background(), w.h.RunID, ""); err != nil {
		w.t.Fatal(err)
	}
	waitUntil(w.t, 30*time.Second, "the run to be CANCELLED and its notice gone", func() bool {
		r, err := w.st.RunsGet(context.Background(), "default", w.h.RunID)
		if err != nil {
			w.t.Fatal(err)
		}
		return r.Status == store.StatusCancelled && done()
	})
	select {
	case err := <-w.result:
		w.t.Fatalf("the Wait returned (%v) although the notice was lost", err)
	default:
	}
}

// returns fails unless the Wait returns within d, saying the run was
// cancelled.
func (w *waiting) returns(d time.Duration) {
	w.t.Helper()
	select {
	case err := <-w.result:
		var re *client.RunError
		if !errors.As(err, &re) || re.Status != client.StatusCancelled {
			w.t.Fatalf("the Wait returned %v, want the run cancelled", err)
		}
	case <-time.After(d):
		w.t.Fatalf("the Wait did not return within %v of the recovery", d)
	}
}

// via connects to the test server through p.
func (p *proxy) via() *nats.Conn {
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(nc.Close)
	return nc
}

// The relay published the done notice into a connection that had died
// without either end noticing yet: the notice is gone and the client's own
// connection never broke, so no reconnect of its own tells it. The relay
// announces itself again once its connection is back; the waiter re-reads.
func TestDoneNoticeLostOnTheRelaysConnection(t *testing.T) {
	t.Parallel()
	var p *proxy
	w, relay := startWaiting(t, func(url string, ns *testnats.Server) *dispatcher.Relay {
		p = newProxy(t, ns.Addr().String())
		return startRelay(t, url, p.via())
	}, nil)
	p.swallow()
	relayed := relay.Stats().Relayed
	// The termination makes two notifications: the run's end and its
	// holder's cancel notice, over a hundred bytes each. Both went into the dead
	// connection.
	w.cancel(func() bool {
		p.mu.Lock()
		swallowed := p.swallowed
		p.mu.Unlock()
		return relay.Stats().Relayed >= relayed+2 && swallowed >= 200
	})
	p.cut()
	w.returns(10 * time.Second)
}

// No relay listened when the run ended (its process died, or lost its
// Postgres session): the notification went to nobody. The relay that
// takes over announces itself; the waiter re-reads.
func TestDoneNoticeLostWhileNoRelayListens(t *testing.T) {
	t.Parallel()
	w, relay := startWaiting(t, func(url string, ns *testnats.Server) *dispatcher.Relay {
		return startRelay(t, url, ns.Connect(t))
	}, nil)
	relay.Stop()
	w.cancel(func() bool { return true })
	startRelay(t, w.url, w.ns.Connect(t))
	w.returns(10 * time.Second)
}

// The client's own connection had died unnoticed when the notice came: the
// server wrote it into a dead socket. The client reconnects and its
// waiters re-read.
func TestDoneNoticeLostOnTheClientsConnection(t *testing.T) {
	t.Parallel()
	var p *proxy
	var relayNC *nats.Conn
	w, relay := startWaiting(t, func(url string, ns *testnats.Server) *dispatcher.Relay {
		p = newProxy(t, ns.Addr().String())
		relayNC = ns.Connect(t)
		return startRelay(t, url, relayNC)
	}, func(*testnats.Server) *nats.Conn { return p.via() })
	p.swallow()
	relayed := relay.Stats().Relayed
	w.cancel(func() bool { return relay.Stats().Relayed >= relayed+2 })
	// The server has routed the notices (to the dead connection) before
	// the client reconnects.
	if err := relayNC.Flush(); err != nil {
		t.Fatal(err)
	}
	p.cut()
	w.returns(10 * time.Second)
}
