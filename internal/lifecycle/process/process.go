// Package process runs a Kagzi service as a process: its logger, its NATS
// connection, its telemetry and health endpoints, and its components
// (package lifecycle) from start until its context ends, then its exit
// code. It is apart from package lifecycle so that the SDK's worker,
// which embeds a lifecycle.Base, does not link the telemetry exporters a
// service process sets up.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/telemetry"
)

// Exit ends a service's process after its run returned err: status 0 when
// err is nil, 2 for invalid configuration (so an orchestrator shows a
// configuration error rather than a crash loop), 1 otherwise.
func Exit(service string, err error) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", service, err)
	if errors.Is(err, config.ErrInvalid) {
		os.Exit(2)
	}
	os.Exit(1)
}

// Logger returns a JSON logger at level (debug, info, warn, error).
func Logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// Telemetry sets up the process's OpenTelemetry providers for service (see
// package telemetry), serves its metrics on h's /metrics, and returns the
// function that flushes and stops them.
func Telemetry(ctx context.Context, service string, h *lifecycle.Health, log *slog.Logger) (shutdown func(), err error) {
	p, err := telemetry.Setup(ctx, telemetry.Options{Service: service, Log: log})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if h.Extra == nil {
		h.Extra = map[string]http.Handler{}
	}
	h.Extra["/metrics"] = p.Metrics
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(sctx)
	}, nil
}

// Parts is what a service builds over its connections.
type Parts struct {
	// Components run in order after the health endpoint.
	Components []lifecycle.Component
	// Checks decide readiness.
	Checks map[string]lifecycle.Check
	// Info adds lines to /readyz that do not decide readiness.
	Info map[string]func() string
}

// Options describe one service process for Serve.
type Options struct {
	// Name is the service's name ("dispatcher", "worker" …): the NATS
	// connection's name and the telemetry's service are "kagzi-" + Name.
	Name string
	// Common is the configuration every service reads.
	Common config.Common
	// NATSOptions are added to the connection's (e.g. its inbox prefix,
	// the one its NATS permissions let it read).
	NATSOptions []nats.Option
	Log         *slog.Logger
}

// Serve runs a service process until ctx ends: it connects to NATS, sets
// up telemetry and the health endpoint, builds the service's parts over
// the connection, and runs them (lifecycle.RunAll). A service that uses Postgres
// opens its pool before and closes it after.
func Serve(ctx context.Context, p Options, build func(nc *nats.Conn) (Parts, error)) error {
	debug.SetGCPercent(p.Common.GCPercent)
	opts, err := p.Common.NATSAuth.Options()
	if err != nil {
		return err
	}
	nc, err := natsutil.Connect(p.Common.NATSURL, "kagzi-"+p.Name, p.Log, append(opts, p.NATSOptions...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Telemetry first, so the components' instruments bind to its providers.
	health := &lifecycle.Health{Addr: p.Common.HTTPAddr, Log: p.Log}
	stop, err := Telemetry(ctx, "kagzi-"+p.Name, health, p.Log)
	if err != nil {
		return err
	}
	defer stop()
	parts, err := build(nc)
	if err != nil {
		return err
	}
	health.Checks, health.Info = parts.Checks, parts.Info
	return lifecycle.RunAll(ctx, p.Log, append([]lifecycle.Component{health}, parts.Components...)...)
}

// LogLargePayload is a store's OnLargePayload hook that logs the payload's
// size as a warning.
func LogLargePayload(log *slog.Logger) func(what string, size int) {
	return func(what string, size int) { log.Warn("large payload", "what", what, "bytes", size) }
}

// B2I is 1 for true, 0 for false (a gauge of a flag).
func B2I(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
