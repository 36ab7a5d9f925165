// Package natsserver runs the CLI's embedded NATS server (the nats-server
// module): `kagzi dev` when no server is given, and the stand-in process
// of `kagzi chaos` and `kagzi bench` when nats-server is not installed. It
// lives in the CLI's module so that applications of the public packages
// do not depend on nats-server.
package natsserver

import (
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
}

// Start starts a server on 127.0.0.1:port (0 picks a free port) with
// JetStream off (Kagzi needs core NATS only).
func Start(port int) (*Server, error) {
	return start(&server.Options{Port: port})
}

// StartMonitored is Start with the server's monitoring endpoints (/varz,
// /connz …) on 127.0.0.1:httpPort.
func StartMonitored(port, httpPort int) (*Server, error) {
	return start(&server.Options{Port: port, HTTPHost: "127.0.0.1", HTTPPort: httpPort})
}

// start starts a server with opts on 127.0.0.1, Kagzi's message size limit
// and pings (a frozen client is closed within natsutil.StaleClientBound)
// and no logs or signal handling, and waits until it accepts clients.
func start(opts *server.Options) (*Server, error) {
	opts.Host, opts.NoLog, opts.NoSigs, opts.MaxPayload = "127.0.0.1", true, true, protocol.NATSMaxPayload
	opts.PingInterval, opts.MaxPingsOut = natsutil.ServerPingInterval, natsutil.ServerMaxPingsOut
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
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
