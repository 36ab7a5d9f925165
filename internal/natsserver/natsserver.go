// Package natsserver runs an embedded NATS server (the nats-server module)
// for tests: a real server on a loopback TCP port, so every hop is a real
// NATS connection. The CLI embeds its own (cmd/kagzi/internal/natsserver).
package natsserver

import (
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// MaxPayload is the message size limit Kagzi runs NATS with.
const MaxPayload = protocol.NATSMaxPayload

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
}

// Start starts a server on 127.0.0.1:port (0 picks a free port) with
// JetStream off (Kagzi needs core NATS only).
func Start(port int) (*Server, error) { return StartWithMaxPayload(port, MaxPayload) }

// StartWithMaxPayload is Start with another message size limit.
func StartWithMaxPayload(port int, maxPayload int32) (*Server, error) {
	return StartOptions(&server.Options{Port: port, MaxPayload: maxPayload})
}

// StartConfig starts a server from a nats-server configuration file (the
// authorization block of `kagzi nats-config`, TLS), listening on a free
// loopback port whatever the file says.
func StartConfig(path string) (*Server, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, err
	}
	opts.Port = 0
	if opts.MaxPayload == 0 {
		opts.MaxPayload = MaxPayload
	}
	return StartOptions(opts)
}

// StartOptions starts a server with opts on 127.0.0.1 (port 0 picks a
// free one), without logs or signal handling.
func StartOptions(opts *server.Options) (*Server, error) {
	opts.Host, opts.NoLog, opts.NoSigs = "127.0.0.1", true, true
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	return StartWithOptions(opts)
}

// StartMonitored is Start with the server's monitoring endpoints (/varz,
// /connz …) on 127.0.0.1:httpPort.
func StartMonitored(port, httpPort int) (*Server, error) {
	return StartWithOptions(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		MaxPayload: MaxPayload, HTTPHost: "127.0.0.1", HTTPPort: httpPort})
}

// StartWithOptions starts a server with opts as given (a cluster node's
// routes, say) and waits until it accepts clients.
func StartWithOptions(opts *server.Options) (*Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats server not ready for connections")
	}
	return &Server{Server: ns}, nil
}

// URL is the server's client URL.
func (s *Server) URL() string { return s.ClientURL() }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}
