package natsutil

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
)

// Connect connects to url with opts (credentials, TLS, inbox prefix)
// and keeps reconnecting forever. A server that cannot be reached yet is
// retried in the background, so a service may start before NATS; a server
// that answers and refuses the connection (bad credentials, a TLS
// mismatch) fails the start, since retrying cannot fix it. The URL in the
// error is redacted.
func Connect(url, name string, log *slog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("nats reconnected") }),
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
