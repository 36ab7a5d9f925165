// Package testnats runs real NATS servers for tests: an embedded
// nats-server on a loopback TCP port, so every hop in a test is a real NATS
// connection.
package testnats

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

// StartCluster starts n servers on loopback ports joined into one NATS
// cluster by routes (every server names every other), and waits until each
// has a route to every other. Each is shut down when t ends; a test may
// shut one down earlier (Stop) to kill a node.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	out := make([]*Server, n)
	for i := range out {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("node-%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			NoLog:      true,
			NoSigs:     true,
			MaxPayload: MaxPayload,
			Cluster:    server.ClusterOpts{Name: "kagzi-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s, err := natsserver.StartWithOptions(opts)
		if err != nil {
			t.Fatalf("start nats node %d: %v", i, err)
		}
		t.Cleanup(s.Stop)
		out[i] = &Server{Server: s}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range out {
		// Routes are pooled (several connections per peer): count peers.
		for {
			rz, err := s.Routez(nil)
			peers := map[string]bool{}
			if err == nil {
				for _, r := range rz.Routes {
					peers[r.RemoteID] = true
				}
			}
			if len(peers) >= n-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats cluster: %s has %d of %d peers", s.Name(), len(peers), n-1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// ClusterURL lists the client URLs of servers, as a client's server list.
func ClusterURL(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}
