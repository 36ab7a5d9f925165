package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/natsserver"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/examples"
)

func init() { register(newDevCmd) }

// maxDevWorkers bounds `kagzi dev --workers`: every worker runs in this
// one process with its own NATS connection, and more would only compete
// for the same cores.
const maxDevWorkers = 64

func newDevCmd(a *cliutil.App) *cobra.Command {
	var demo, exitAfter bool
	var consoleAddr, logLevel, logFormat string
	var workers int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every Kagzi service in one process (migrates first)",
		Long: `dev migrates the database of --database-url (creating it if needed) and
runs the dispatcher with its relay, the scheduler, the reaper, workers
with the example workflows and the web console, all in this process. Unless --nats-url or KAGZI_NATS_URL is given, it starts
an embedded NATS server (on 127.0.0.1:4222 when that port is free).

With --demo it starts a few ProcessOrder runs and prints their progress and
results, then keeps serving until interrupted (or exits with --exit).

The services' logs go to stderr as text, warnings and errors only unless
--log-level says otherwise; --log-format json logs as the services do
when run on their own.`,
		Example: `  kagzi dev --demo
  kagzi dev --workers 3 --nats-url nats://127.0.0.1:4222
  kagzi dev --log-level info`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 1 || workers > maxDevWorkers {
				return cliutil.Usagef("--workers %d: use 1 to %d", workers, maxDevWorkers)
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			log, err := devLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return cliutil.Usagef("%v", err)
			}
			log = log.With("service", "dev")
			if err := migrateDatabase(cmd, a.SessionURL()); err != nil {
				return err
			}
			var dcfg dispatcher.Config
			if err := config.Load(ctx, &dcfg); err != nil {
				return err
			}
			var wcfg workersvc.Config
			if err := config.Load(ctx, &wcfg); err != nil {
				return err
			}
			var scfg scheduler.Config
			if err := config.Load(ctx, &scfg); err != nil {
				return err
			}
			var rcfg reaper.Config
			if err := config.Load(ctx, &rcfg); err != nil {
				return err
			}
			wcfg.Namespace = a.Namespace
			// A NATS server given, or already answering at the default
			// address, is used; otherwise dev embeds one (on the default
			// port when free), so the CLI's defaults reach it either way.
			natsURL := ""
			if cmd.Flags().Changed("nats-url") || envOr("KAGZI_NATS_URL", "") != "" || natsAnswers(a.NATSURL) {
				natsURL = a.NATSURL
			}
			if natsURL == "" {
				ns, err := startEmbeddedNATS()
				if err != nil {
					return err
				}
				defer ns.Stop()
				natsURL = ns.URL()
			}
			srv, err := devserver.Start(ctx, devserver.Options{
				DatabaseURL: a.DatabaseURL, SessionURL: a.SessionURL(), NATSURL: natsURL, Workers: workers,
				Worker: wcfg, Register: registerAll, Dispatcher: dcfg, Scheduler: scfg, Reaper: rcfg, Log: log,
			})
			if err != nil {
				return err
			}
			defer srv.Stop()
			// /healthz, /readyz and /metrics as each service serves them;
			// ready once everything above started, not while stopping.
			hnc, err := srv.Connect()
			if err != nil {
				return err
			}
			health := &lifecycle.Health{Addr: dcfg.HTTPAddr, Log: log, Checks: map[string]lifecycle.Check{
				"postgres": srv.Store.Ping, "nats": lifecycle.NATSCheck(hnc),
			}}
			if a.Telemetry != nil {
				health.Extra = map[string]http.Handler{"/metrics": a.Telemetry.Metrics}
			}
			// A busy port (another service on :8080) does not stop dev.
			if err := health.Start(ctx); err != nil {
				log.Warn("health and metrics endpoints not served", "err", err)
			}
			defer health.Stop()
			health.SetReady(true)
			defer health.SetReady(false)
			fmt.Fprintf(out, "Kagzi dev is running: Postgres %s, NATS %s, %d worker(s).\n",
				cliutil.RedactURL(a.DatabaseURL), srv.NATSURL, workers)
			if consoleAddr != "" {
				url, stop, err := devConsole(ctx, consoleAddr, a.Namespace, srv, log)
				if err != nil {
					return err
				}
				defer stop()
				fmt.Fprintf(out, "Console: %s\n", url)
			}
			fmt.Fprintf(out, "Try: kagzi run start ProcessOrder --input '{\"id\":\"A-1\",\"customer\":\"ada\",\"amount\":12.5,\"items\":2}' --wait --nats-url %s\n", srv.NATSURL)
			if demo {
				if err := runDemo(ctx, cmd, srv, a.Namespace); err != nil {
					return err
				}
				if exitAfter {
					return nil
				}
			}
			fmt.Fprintln(out, "Press Ctrl-C to stop.")
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().BoolVar(&demo, "demo", false, "start example runs and print their progress and results")
	cmd.Flags().BoolVar(&exitAfter, "exit", false, "with --demo: exit once the demo runs finished")
	cmd.Flags().IntVar(&workers, "workers", 2, fmt.Sprintf("number of workers, 1 to %d", maxDevWorkers))
	cmd.Flags().StringVar(&consoleAddr, "console-addr", envOr("KAGZI_CONSOLE_ADDR", "127.0.0.1:8088"),
		"serve the web console here (a free port if taken; empty: no console)")
	cmd.Flags().StringVar(&logLevel, "log-level", envOr("KAGZI_LOG_LEVEL", "warn"), "the services' log level: debug, info, warn or error (env KAGZI_LOG_LEVEL)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "the services' log format: text, or json as the services log on their own")
	return cmd
}

// devLogger is the services' logger in dev. dev shares its terminal with a
// person reading its own lines, so it logs text and, by default, only
// warnings and errors, where a service on its own logs JSON at info for a
// log collector.
func devLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// startEmbeddedNATS starts dev's embedded NATS server on the default port
// when it is free, else on any free port.
func startEmbeddedNATS() (*natsserver.Server, error) {
	port := 0
	if ln, err := net.Listen("tcp", "127.0.0.1:4222"); err == nil {
		_ = ln.Close()
		port = 4222
	}
	ns, err := natsserver.Start(port)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	return ns, nil
}

// natsAnswers reports whether a NATS server accepts connections at url.
func natsAnswers(url string) bool {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// migrateDatabase creates the database if needed and applies migrations.
func migrateDatabase(cmd *cobra.Command, url string) error {
	_, err := migrate.Up(cmd.Context(), url)
	if err != nil && store.IsDatabaseMissing(err) {
		if _, err = createDatabase(cmd, url); err != nil {
			return sessionHint(err)
		}
		_, err = migrate.Up(cmd.Context(), url)
	}
	if errors.Is(err, store.ErrSessionPooled) {
		return sessionHint(err)
	}
	if err != nil {
		return fmt.Errorf("%w\nCheck that Postgres is reachable at %s (--database-url or KAGZI_DATABASE_URL).", err, cliutil.RedactURL(url))
	}
	return nil
}

// runDemo starts example orders and prints each one's progress and result.
func runDemo(ctx context.Context, cmd *cobra.Command, srv *devserver.Server, ns string) error {
	out := cmd.OutOrStdout()
	nc, err := srv.Connect()
	if err != nil {
		return err
	}
	cl, err := client.NewFromStore(srv.Store, nc, client.Options{Namespace: ns})
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	orders := []examples.Order{
		{ID: "A-100", Customer: "ada", Amount: 42.5, Items: 2},
		{ID: "A-101", Customer: "grace", Amount: 9.99, Items: 1},
		{ID: "A-102", Customer: "linus", Amount: 120, Items: 4},
		{ID: "A-103", Customer: "barbara", Amount: 0, Items: 1}, // invalid: fails without retries
	}
	var wg sync.WaitGroup
	for _, o := range orders {
		h, err := cl.Start(ctx, "ProcessOrder", o, client.StartOptions{ExternalID: "demo-" + o.ID + "-" + time.Now().Format("150405.000")})
		if err != nil {
			return err
		}
		say("started   ProcessOrder %s  run %s", o.ID, h.RunID)
		wg.Add(1)
		go func(o examples.Order, h *client.Handle) {
			defer wg.Done()
			var rc examples.Receipt
			start := time.Now()
			err := h.Result(ctx, &rc)
			took := time.Since(start).Round(time.Millisecond)
			if err != nil {
				say("failed    ProcessOrder %s  after %s: %v", o.ID, cliutil.FmtDuration(took), err)
				return
			}
			b, _ := json.Marshal(rc)
			say("completed ProcessOrder %s  in %s: %s", o.ID, cliutil.FmtDuration(took), b)
		}(o, h)
	}
	wg.Wait()
	say("Inspect them: kagzi run list; kagzi run show <run id>")
	return nil
}

// devConsole serves the web console for dev on addr, or on a free port
// when addr is taken.
func devConsole(ctx context.Context, addr, ns string, srv *devserver.Server, log *slog.Logger) (string, func(), error) {
	var cfg config.Console
	if err := config.Load(ctx, &cfg); err != nil {
		return "", nil, err
	}
	nc, err := nats.Connect(srv.NATSURL, nats.Name("kagzi-console"), nats.MaxReconnects(-1))
	if err != nil {
		return "", nil, err
	}
	cfg.ConsoleAddr = addr
	cs, url, err := startConsole(ctx, cfg, ns, srv.Pool, nc, log.With("service", "console"))
	if err != nil && strings.Contains(err.Error(), "listen on") {
		cfg.ConsoleAddr = "127.0.0.1:0"
		cs, url, err = startConsole(ctx, cfg, ns, srv.Pool, nc, log.With("service", "console"))
	}
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	return url, func() { cs.Stop(); nc.Close() }, nil
}
