// Package svc owns what every Kagzi process does the same way: JSON logs,
// the NATS connection, the health endpoints, and starting components in
// order and stopping them in reverse.
package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
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

// Component is a long-running part of a process.
type Component interface {
	// Start begins the component's work and returns once it is running.
	Start(ctx context.Context) error
	// Stop drains, then stops; safe to call twice.
	Stop()
}

// Logger returns a JSON logger at level (debug, info, warn, error).
func Logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// ConnectNATS connects to url with opts (credentials, TLS, inbox prefix)
// and keeps reconnecting forever. A server that cannot be reached yet is
// retried in the background, so a service may start before NATS; a server
// that answers and refuses the connection (bad credentials, a TLS
// mismatch) fails the start, since retrying cannot fix it. The URL in the
// error is redacted.
func ConnectNATS(url, name string, log *slog.Logger, opts ...nats.Option) (*nats.Conn, error) {
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
		// one (natsutil.OnSlowConsumer); it replaces the client's default,
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

// RunAll starts the components in order, waits for ctx to end, then stops
// them in reverse order. If a start fails, the started ones are stopped.
func RunAll(ctx context.Context, log *slog.Logger, comps ...Component) error {
	started := make([]Component, 0, len(comps))
	stopAll := func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
	setReady := func(ready bool) {
		for _, c := range comps {
			if h, ok := c.(*Health); ok {
				h.SetReady(ready)
			}
		}
	}
	for _, c := range comps {
		if err := c.Start(ctx); err != nil {
			stopAll()
			return err
		}
		started = append(started, c)
	}
	// Ready only once every component runs, and no longer once draining
	// begins, so an orchestrator routes nothing to a process that is
	// starting or stopping.
	setReady(true)
	log.Info("running")
	<-ctx.Done()
	setReady(false)
	log.Info("shutting down")
	stopAll()
	return nil
}

// Check is a readiness probe: nil means ready.
type Check func(ctx context.Context) error

// Health serves /healthz (the process is alive) and /readyz (the process's
// components have all started, it is not draining, and every check passes)
// on Addr, plus any extra handlers (e.g. /metrics). RunAll calls SetReady
// when every component has started and when draining begins; a process
// that starts its components otherwise calls it itself.
type Health struct {
	Addr   string
	Checks map[string]Check
	// Info adds lines to /readyz that do not decide readiness (e.g.
	// whether this dispatcher holds the relay lock).
	Info     map[string]func() string
	Extra    map[string]http.Handler
	Log      *slog.Logger
	ready    atomic.Bool
	draining atomic.Bool

	life lifecycle.Base
	mu   sync.Mutex
	srv  *http.Server
	ctx  context.Context
}

// SetReady marks the process's components as all started (true) or as
// draining (false, after having been ready).
func (h *Health) SetReady(ready bool) {
	if !ready && h.ready.Load() {
		h.draining.Store(true)
	}
	h.ready.Store(ready)
}

// Start listens on Addr ("" disables the endpoints).
func (h *Health) Start(ctx context.Context) error {
	if h.Addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var failed []string
		switch {
		case h.ready.Load():
		case h.draining.Load():
			failed = append(failed, "process: draining")
		default:
			failed = append(failed, "process: starting")
		}
		for name, c := range h.Checks {
			if err := c(ctx); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			}
		}
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, f := range failed {
				_, _ = fmt.Fprintln(w, f)
			}
			return
		}
		_, _ = w.Write([]byte("ready\n"))
		for name, f := range h.Info {
			_, _ = fmt.Fprintf(w, "%s: %s\n", name, f())
		}
	})
	for p, hd := range h.Extra {
		mux.Handle(p, hd)
	}
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return fmt.Errorf("health endpoint %s: %w", h.Addr, err)
	}
	ctx, err = h.life.Begin(ctx)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("health endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	h.mu.Lock()
	h.srv, h.ctx = srv, ctx
	h.mu.Unlock()
	h.life.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && h.Log != nil {
			h.Log.Error("health endpoint", "err", err)
		}
	})
	return nil
}

// Stop closes the endpoint, letting requests in flight finish for up to
// two seconds; safe to call twice.
func (h *Health) Stop() {
	h.life.Stop(func() {
		h.mu.Lock()
		srv, base := h.srv, h.ctx
		h.mu.Unlock()
		if srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(base), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// NATSCheck is ready while nc is connected.
func NATSCheck(nc *nats.Conn) Check {
	return func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return nil
	}
}

// Func adapts start/stop functions to a Component.
type Func struct {
	StartFn func(ctx context.Context) error
	StopFn  func()
	once    sync.Once
}

// Start implements Component.
func (f *Func) Start(ctx context.Context) error {
	if f.StartFn == nil {
		return nil
	}
	return f.StartFn(ctx)
}

// Stop implements Component.
func (f *Func) Stop() {
	f.once.Do(func() {
		if f.StopFn != nil {
			f.StopFn()
		}
	})
}

// Telemetry sets up the process's OpenTelemetry providers for service (see
// package telemetry), serves its metrics on h's /metrics, and returns the
// function that flushes and stops them.
func Telemetry(ctx context.Context, service string, h *Health, log *slog.Logger) (shutdown func(), err error) {
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
