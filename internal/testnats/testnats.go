// Package testnats runs real NATS servers for tests: an embedded
// nats-server on a loopback TCP port, so every hop in a test is a real NATS
// connection.
package testnats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsserver"
)

// MaxPayload is the message size limit of the test servers.
const MaxPayload = natsserver.MaxPayload

// Server is a running NATS server.
type Server struct {
	*natsserver.Server
	// defaults come before the options of every Connect (the Observer's
	// credentials on a server with authorization).
	defaults []nats.Option
}

// Start starts a server on a free loopback port, shut down when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWithMaxPayload(t, MaxPayload)
}

// StartWithMaxPayload is Start with another message size limit.
func StartWithMaxPayload(t testing.TB, maxPayload int32) *Server {
	t.Helper()
	s, err := natsserver.StartWithMaxPayload(0, maxPayload)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(s.Stop)
	return &Server{Server: s}
}

// StartConfig starts a server from the nats-server configuration text
// conf (written to a file of t's), on a free loopback port.
func StartConfig(t testing.TB, conf string) *Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := natsserver.StartConfig(path)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(s.Stop)
	return &Server{Server: s}
}

// Connect opens a client connection to s, closed when t ends. It reconnects
// forever, so tests can restart the server under it.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, s.defaults...), opts...)
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
