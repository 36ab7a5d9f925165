package natsserver_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/natsserver"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// The embedded server answers on loopback with Kagzi's message size limit,
// and Stop ends it.
func TestStart(t *testing.T) {
	s, err := natsserver.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	nc, err := nats.Connect(s.URL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != protocol.NATSMaxPayload {
		t.Errorf("max payload %d, want %d", got, protocol.NATSMaxPayload)
	}
	// Pings as every server Kagzi runs: a frozen client is dropped within
	// seconds (tests/testnats's TestFrozenClientIsEvicted shows it).
	if v, err := s.Varz(nil); err != nil {
		t.Error(err)
	} else if v.PingInterval != natsutil.ServerPingInterval || v.MaxPingsOut != natsutil.ServerMaxPingsOut {
		t.Errorf("ping interval %v, max %d: want %v, %d", v.PingInterval, v.MaxPingsOut, natsutil.ServerPingInterval, natsutil.ServerMaxPingsOut)
	}
	sub, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if m, err := nc.Request("echo", []byte("ping"), 5*time.Second); err != nil || string(m.Data) != "ping" {
		t.Fatalf("request through the embedded server: %v, %v", m, err)
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	s.Stop()
	stopped = true
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection outlived the stopped server")
	}
}
