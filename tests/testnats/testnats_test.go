package testnats_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/tests/testnats"
)

// roundTrip sends a request through nc to a responder on nc.
func roundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	m, err := nc.Request("echo", []byte("hi"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "hi" {
		t.Fatalf("reply %q", m.Data)
	}
}

func TestStartConnectStop(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	nc := s.Connect(t)
	roundTrip(t, nc)
	if got := nc.MaxPayload(); got != testnats.MaxPayload {
		t.Errorf("max payload %d, want %d", got, testnats.MaxPayload)
	}
	s.Stop()
	s.Stop()
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a stopped server: %v, want connection refused", err)
	}
}

func TestRestartKeepsPort(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	url := s.URL()
	nc := s.Connect(t)
	back := nc.StatusChanged(nats.RECONNECTING)
	s.Restart(t)
	if s.URL() != url {
		t.Fatalf("restarted at %s, want %s", s.URL(), url)
	}
	select {
	case <-back:
	case <-time.After(10 * time.Second):
		t.Fatal("the client never saw the server go")
	}
	roundTrip(t, nc)
}

func TestStartConfigOverrides(t *testing.T) {
	t.Parallel()
	// The file's port is ignored; its max_payload and users are not.
	s := testnats.StartConfig(t, "port: 1\nmax_payload: 4096\nauthorization { user: u, password: p }\n")
	if _, err := nats.Connect(s.URL()); err == nil {
		t.Fatal("connected without credentials")
	}
	nc := s.Connect(t, nats.UserInfo("u", "p"))
	if got := nc.MaxPayload(); got != 4096 {
		t.Errorf("max payload %d, want 4096", got)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	nodes := testnats.StartCluster(t, 3)
	if nodes[1].Name() != "node-1" {
		t.Errorf("name %q, want node-1", nodes[1].Name())
	}
	a := nodes[0].Connect(t, nats.Name("a"))
	b := nodes[2].Connect(t)
	sub, err := a.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	cz, err := nodes[0].Connz()
	if err != nil {
		t.Fatal(err)
	}
	if len(cz.Conns) != 1 || cz.Conns[0].Name != "a" {
		t.Fatalf("connz of node 0: %+v", cz.Conns)
	}
	// Interest crosses the routes asynchronously: publish until it lands.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := b.Publish("x", []byte("1")); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(50 * time.Millisecond); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no message crossed the cluster")
		}
	}
}

// BenchmarkStartStop: what a test pays for a server of its own.
func BenchmarkStartStop(b *testing.B) {
	for b.Loop() {
		testnats.Start(b).Stop()
	}
}
