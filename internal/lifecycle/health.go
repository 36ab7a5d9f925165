package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/nats-io/nats.go"
)

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

	life Base
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

// LeaderInfo is a /readyz line saying whether this replica holds a lock.
func LeaderInfo(isLeader func() bool) func() string {
	return func() string {
		if isLeader() {
			return "leader"
		}
		return "standby"
	}
}
