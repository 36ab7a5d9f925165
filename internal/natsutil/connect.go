package natsutil

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// A process that freezes (SIGSTOP, a paused VM, a host swapping hard)
// keeps its TCP sessions open: its kernel still acknowledges what it is
// sent. Neither NATS nor the process's peers see it go, so the server keeps
// its subscriptions and its place in queue groups (a frozen dispatcher goes
// on taking its share of work requests, which then wait for their
// renewal), and a client of a frozen server keeps talking to it. Only
// PINGs, which a frozen process cannot answer, tell: both ends ping often
// and give up after a few seconds of silence.
const (
	// ServerPingInterval and ServerMaxPingsOut are the ping_interval and
	// ping_max of every NATS server Kagzi runs or ships: the embedded one
	// (cmd/kagzi/internal/natsserver), the tests' (tests/testnats),
	// deploy/nats/nats.conf and its copy in the dev overlay.
	ServerPingInterval = time.Second
	ServerMaxPingsOut  = 2
	// StaleClientBound is how soon after a client froze such a server has
	// closed its connection ("Stale Connection") and with it its
	// subscriptions and queue-group places. The server pings a client
	// that sent nothing for an interval (checked every interval, so up to
	// two after its last message) and closes it at the first check that
	// finds ServerMaxPingsOut pings unanswered: 3 to 4 s after the last
	// message it sent before it froze.
	StaleClientBound = (ServerMaxPingsOut + 2) * ServerPingInterval

	// ClientPingInterval and ClientMaxPingsOut are the pings of Connect's
	// connections: a client gives up on a server that has not answered for
	// ClientMaxPingsOut+1 intervals (2 to 3 s after it froze) and
	// reconnects, to another server of a cluster if it has one. Its pings
	// also count as the client's traffic, so the server pings a live
	// Kagzi process only when the pings cross.
	ClientPingInterval = time.Second
	ClientMaxPingsOut  = 2
)

// ServerConfig is the ping settings above in nats-server's configuration
// syntax, for configuration files written at run time.
func ServerConfig() string {
	return fmt.Sprintf("ping_interval: %q\nping_max: %d\n", ServerPingInterval.String(), ServerMaxPingsOut)
}

// Connect connects to url with opts (credentials, TLS, inbox prefix)
// and keeps reconnecting forever; it pings the server every
// ClientPingInterval (see there). A server that cannot be reached yet is
// retried in the background, so a service may start before NATS; a server
// that answers and refuses the connection (bad credentials, a TLS
// mismatch) fails the start, since retrying cannot fix it. The URL in the
// error is redacted.
func Connect(url, name string, log *slog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(ClientPingInterval),
		nats.MaxPingsOutstanding(ClientMaxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected")
			logOldServer(nc, log)
		}),
		// A connection made in the background (the server was not up
		// at start) is checked when it is made.
		nats.ConnectHandler(func(nc *nats.Conn) { logOldServer(nc, log) }),
		// Components chain their own handling of slow consumers after this
		// one (OnSlowConsumer); it replaces the client's default,
		// which prints to stderr.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats error", "err", err)
		}),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err == nil {
		if err := CheckServer(nc); err != nil {
			nc.Close()
			return nil, fmt.Errorf("connect nats %s: %w", config.RedactURL(url), err)
		}
		return nc, nil
	}
	var ne net.Error
	if !errors.Is(err, nats.ErrNoServers) && !errors.As(err, &ne) {
		return nil, fmt.Errorf("connect nats %s: %w (check KAGZI_NATS_* credentials and TLS settings)", config.RedactURL(url), err)
	}
	nc, err = nats.Connect(url, append(all, nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", config.RedactURL(url), err)
	}
	return nc, nil
}

// CheckServer returns an error wrapping protocol.ErrServerVersion if nc is
// connected to a nats-server older than protocol.MinServerVersion (the
// version its INFO announced); a connection not connected yet passes.
func CheckServer(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	if v == "" {
		return nil
	}
	return protocol.CheckServerVersion(v)
}

// logOldServer logs, as an error, a (re)connection to a server older than
// protocol.MinServerVersion: one node of a cluster upgraded last, say. The
// process goes on; what the old server lacks fails where it is used.
func logOldServer(nc *nats.Conn, log *slog.Logger) {
	if err := CheckServer(nc); err != nil {
		log.Error("nats server not supported", "server", nc.ConnectedUrlRedacted(), "err", err)
	}
}
