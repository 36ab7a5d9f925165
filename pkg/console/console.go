// Package console is Kagzi's web console: an http.Handler an application
// mounts under a prefix (or `kagzi console` serves standalone) that shows
// and steers runs, dead letters, schedules, workers, queues and batches.
// Pages are rendered on the server with html/template and a vendored htmx
// (static/htmx.min.js, refreshed by scripts/vendor-htmx.sh; building needs
// no node); every view has a JSON twin under /api/v1. Every action calls
// pkg/client or the store method the CLI calls, never a second
// implementation. Pages update by push: the console subscribes to the
// engine's NATS subjects and streams Server-Sent Events (see hub.go).
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/httpapi"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
)

//go:embed static templates
var assets embed.FS

// Options configure a Console.
type Options struct {
	// Pool and NATS are the engine's database and message bus (Pool
	// required; NATS nil disables live updates). The console reads and
	// writes through Pool; Stop does not close it.
	Pool *pgxpool.Pool
	NATS *nats.Conn
	// Namespace is the namespace shown first (default "default").
	Namespace string
	// Prefix is the path the handler is mounted under (e.g. "/console"),
	// with http.StripPrefix; links are made with it.
	Prefix string
	// ReadOnly refuses every write with 403.
	ReadOnly bool
	// BasicAuth, "user:password", requires HTTP basic auth.
	BasicAuth string
	// AuthHeader names a header set by a trusted authenticating proxy
	// (e.g. X-Forwarded-User, X-Auth-Request-Email): requests without it,
	// or from outside TrustedProxies when given, are refused.
	AuthHeader     string
	TrustedProxies []netip.Prefix
	// TraceURL links a run to its trace; {trace_id} is replaced (e.g.
	// http://localhost:16686/trace/{trace_id}).
	TraceURL string
	// Coalesce is the least time between two updates of a run sent to
	// browsers (default 100ms).
	Coalesce time.Duration
	Log      *slog.Logger
}

// Console serves the web console.
type Console struct {
	opts  Options
	st    *store.Store
	nc    *nats.Conn
	log   *slog.Logger
	hub   *hub
	tmpl  *template.Template
	mux   *http.ServeMux
	csrfK string
	// hooks counts webhook deliveries (WebhookStats).
	hooks webhook.Counters
	// machine is the HTTP API for machine clients under /v1/ (callbacks.go).
	machine *httpapi.API

	// life owns the hub's background reads (baselines, flushes).
	life    lifecycle.Base
	mu      sync.Mutex
	clients map[string]*client.Client
}

// New returns a console; Start subscribes it to live updates.
func New(opts Options) (*Console, error) {
	if opts.Pool == nil {
		return nil, errors.New("console: a pool is required")
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if err := protocol.ValidToken("namespace", opts.Namespace); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = 100 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	opts.Prefix = strings.TrimSuffix(opts.Prefix, "/")
	if opts.BasicAuth != "" && !strings.Contains(opts.BasicAuth, ":") {
		return nil, errors.New("console: basic auth must be user:password")
	}
	k := make([]byte, 16)
	_, _ = rand.Read(k)
	st := store.New(opts.Pool, store.Options{})
	c := &Console{opts: opts, st: st, nc: opts.NATS, log: opts.Log, csrfK: hex.EncodeToString(k),
		hub: newHub(st, opts.NATS, opts.Coalesce), clients: map[string]*client.Client{}}
	t, err := template.New("").Funcs(c.funcs()).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c.tmpl = t
	c.routes()
	if c.machine, err = httpapi.New(httpapi.Options{Store: st, Client: c.client, ReadOnly: opts.ReadOnly}); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return c, nil
}

// Start subscribes to the engine's subjects for live updates. A console
// starts once; one whose Start failed serves as one never started.
func (c *Console) Start(ctx context.Context) error {
	ctx, err := c.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	if err := c.hub.start(ctx, c.life.Go); err != nil {
		c.life.Stop(nil)
		return err
	}
	return nil
}

// Stop ends the subscriptions, then the event streams and background
// reads, and closes the clients; safe to call twice, and before Start.
func (c *Console) Stop() {
	c.life.Stop(c.hub.stop)
	// Handlers make clients whether or not the console was started.
	c.mu.Lock()
	for _, cl := range c.clients {
		cl.Close()
	}
	c.mu.Unlock()
}

// Handler returns the console's handler (auth, read-only and CSRF checks
// included; POST /callbacks/{token}, whose token is its credential, and
// the HTTP API under /v1/, whose bearer token is, are outside them: see
// callbacks.go).
func (c *Console) Handler() http.Handler { return c.withCallbacks(c.guard(c.mux)) }

// Counts returns the namespace's runs per status, as the runs view shows
// them (kept from events after one first read).
func (c *Console) Counts(ctx context.Context, ns string) (map[string]int64, error) {
	return c.hub.counts(ctx, ns)
}

// Flushes counts the times the live-update hub read Postgres.
func (c *Console) Flushes() int64 {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	return c.hub.flushes
}

// client returns the pkg/client of a namespace: every action goes through
// it, as it does for applications.
func (c *Console) client(ns string) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[ns]; ok {
		return cl, nil
	}
	cl, err := client.NewFromStore(c.st, c.nc, client.Options{Namespace: ns})
	if err != nil {
		return nil, err
	}
	c.clients[ns] = cl
	return cl, nil
}

func (c *Console) staticFS() http.Handler {
	sub, _ := fs.Sub(assets, "static")
	fsrv := http.FileServer(http.FS(sub))
	return http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	}))
}
