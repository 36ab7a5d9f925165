package worker_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testnats"
)

// gatedDialer lets the first connection through and holds every later
// one (the reconnects) until open is called.
type gatedDialer struct {
	dials    atomic.Int32
	gate     chan struct{}
	openOnce sync.Once
}

func (g *gatedDialer) Dial(network, address string) (net.Conn, error) {
	if g.dials.Add(1) > 1 {
		<-g.gate
	}
	return net.Dial(network, address)
}

func (g *gatedDialer) open() { g.openOnce.Do(func() { close(g.gate) }) }

func TestReconnectRegistersAgainAndRenewsRequest(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	d := newFakeDispatcher(t, s)
	dialer := &gatedDialer{gate: make(chan struct{})}
	t.Cleanup(dialer.open)
	w, err := worker.New(worker.Config{}, s.Connect(t, nats.SetCustomDialer(dialer)))
	must(t, err)
	must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() {
		cancel()
		w.Stop()
	})
	must(t, w.Start(ctx))
	recv(t, d.registers, "first register")
	req1 := d.nextRequest(t)

	// Restart the server; let the dispatcher's connection back first so
	// it is subscribed again before the worker reconnects.
	back := d.nc.StatusChanged(nats.CONNECTED)
	s.Restart(t)
	recv(t, back, "dispatcher reconnect")
	must(t, d.nc.Flush())
	dialer.open()

	if reg := recv(t, d.registers, "register after reconnect"); reg.WorkerID != w.ID() {
		t.Fatalf("register %+v", reg)
	}
	req2 := d.nextRequest(t)
	if req2.Seq <= req1.Seq {
		t.Fatalf("request after reconnect has seq %d, want > %d", req2.Seq, req1.Seq)
	}
	if d.deliver(t, req2, req1.Seq, newRun(t, "X", nil)) {
		t.Fatal("accepted a delivery for the request made before the reconnect")
	}
	if !d.deliver(t, req2, req2.Seq, newRun(t, "X", nil)) {
		t.Fatal("refused a delivery for the renewed request")
	}
	if it := d.nextItem(t); it.Kind != "run_completed" {
		t.Fatalf("report %+v", it)
	}
	// Drain while the server is up (cleanups would stop it first).
	w.Stop()
	recv(t, d.deregs, "deregister")
}
