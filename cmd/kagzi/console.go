package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
)

func init() { register(newConsoleCmd) }

func newConsoleCmd(a *cliutil.App) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console (runs, dead letters, schedules, workers, queues, batches)",
		Long: `console serves the web console on --addr (KAGZI_CONSOLE_ADDR): pages and a
JSON API under /api/v1, updated live from NATS. KAGZI_CONSOLE_READ_ONLY,
KAGZI_CONSOLE_BASIC_AUTH, KAGZI_CONSOLE_AUTH_HEADER (with
KAGZI_CONSOLE_TRUSTED_PROXIES), KAGZI_CONSOLE_TRACE_URL and
KAGZI_CONSOLE_PREFIX configure it (see docs/configuration.md).`,
		Example: `  kagzi console
  KAGZI_CONSOLE_READ_ONLY=true kagzi console --addr :8088`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var cfg config.Console
			if err := config.Load(ctx, &cfg); err != nil {
				return err
			}
			if cmd.Flags().Changed("addr") {
				cfg.ConsoleAddr = addr
			}
			st, err := a.Store(ctx)
			if err != nil {
				return err
			}
			// Its own connection, as the console role (KAGZI_NATS_* give
			// that user's credentials when NATS authorization is on).
			var auth config.NATSAuth
			if err := config.Load(ctx, &auth); err != nil {
				return err
			}
			nopts, err := auth.Options()
			if err != nil {
				return err
			}
			nc, err := nats.Connect(a.NATSURL, append([]nats.Option{nats.Name("kagzi-console"),
				nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
				nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleConsole))}, nopts...)...)
			if err != nil {
				return fmt.Errorf("connect to NATS at %s as the console: %w", cliutil.RedactURL(a.NATSURL), err)
			}
			defer nc.Close()
			if err := natsutil.CheckServer(nc); err != nil {
				return fmt.Errorf("connect to NATS at %s as the console: %w", cliutil.RedactURL(a.NATSURL), err)
			}
			log := process.Logger(cfg.LogLevel).With("service", "console")
			srv, url, err := startConsole(ctx, cfg, a.Namespace, a.Pool(), nc, log)
			if err != nil {
				return err
			}
			defer srv.Stop()
			// Health, readiness and metrics on KAGZI_HTTP_ADDR, as every
			// service.
			h := &lifecycle.Health{Addr: cfg.HTTPAddr, Log: log, Checks: map[string]lifecycle.Check{
				"postgres": st.Ping, "nats": lifecycle.NATSCheck(nc)}}
			shutdown, err := process.Telemetry(ctx, "kagzi-console", h, log)
			if err != nil {
				return err
			}
			defer shutdown()
			if err := h.Start(ctx); err != nil {
				return err
			}
			defer h.Stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Kagzi console: %s\n", url)
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (default KAGZI_CONSOLE_ADDR, 127.0.0.1:8088)")
	return cmd
}

// consoleServer is a running console with its HTTP server.
type consoleServer struct {
	con *console.Console
	hs  *http.Server
}

// Stop shuts the server down and ends the console's subscriptions.
func (s *consoleServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.hs.Shutdown(ctx)
	s.con.Stop()
}

// startConsole serves the console (and /healthz, /readyz) on
// cfg.ConsoleAddr and returns its URL.
func startConsole(ctx context.Context, cfg config.Console, ns string, pool *pgxpool.Pool, nc *nats.Conn, log *slog.Logger) (*consoleServer, string, error) {
	var proxies []netip.Prefix
	for _, p := range strings.Split(cfg.ConsoleTrustedProxies, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, "", cliutil.Usagef("KAGZI_CONSOLE_TRUSTED_PROXIES: %q is not a CIDR", p)
		}
		proxies = append(proxies, pfx)
	}
	prefix := strings.TrimSuffix(cfg.ConsolePrefix, "/")
	con, err := console.New(console.Options{Pool: pool, NATS: nc, Namespace: ns, Prefix: prefix,
		ReadOnly: cfg.ConsoleReadOnly, BasicAuth: cfg.ConsoleBasicAuth, AuthHeader: cfg.ConsoleAuthHeader,
		TrustedProxies: proxies, TraceURL: cfg.ConsoleTraceURL, Log: log})
	if err != nil {
		return nil, "", err
	}
	if err := con.Start(ctx); err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil || nc.Status() != nats.CONNECTED {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if prefix == "" {
		mux.Handle("/", con.Handler())
	} else {
		mux.Handle(prefix+"/", http.StripPrefix(prefix, con.Handler()))
	}
	ln, err := net.Listen("tcp", cfg.ConsoleAddr)
	if err != nil {
		con.Stop()
		return nil, "", fmt.Errorf("console: listen on %s: %w", cfg.ConsoleAddr, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console server", "err", err)
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return &consoleServer{con: con, hs: hs}, fmt.Sprintf("http://%s%s/", net.JoinHostPort(host, port), prefix), nil
}
