package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/telemetry"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Defaults of the global flags, each overridden by its environment variable
// and then by the flag.
const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/kagzi?sslmode=disable"
	defaultNATSURL     = "nats://127.0.0.1:4222"
	defaultNamespace   = "default"
)

// commands holds the constructors of the top-level commands. Every file of
// this package that adds a top-level command registers it from its init:
//
//	func init() { register(newDevCmd) }
//
//	func newDevCmd(a *app) *cobra.Command {
//		return &cobra.Command{Use: "dev", Short: "...", Example: "...", RunE: ...}
//	}
//
// The constructor is called once per execution with the shared *app, which
// carries the global flags (a.DatabaseURL, a.NATSURL, a.Namespace, a.JSON)
// and opens connections lazily (a.Store, a.NATS, a.Client). Help lists the
// commands sorted by name, so registration order does not matter.
var commands []func(*app) *cobra.Command

// register adds a top-level command constructor; call it from init only.
func register(newCmd func(*app) *cobra.Command) { commands = append(commands, newCmd) }

// app is the state of one CLI execution: the global flags and the
// connections opened so far. Commands open only what they need, through
// Store, NATS and Client; execute closes them all when the command returns.
type app struct {
	// DatabaseURL is --database-url (env KAGZI_DATABASE_URL): Postgres,
	// or a connection pooler in transaction mode in front of it.
	DatabaseURL string
	// DatabaseSessionURL is --database-session-url (env
	// KAGZI_DATABASE_SESSION_URL): the same database reached directly,
	// for what needs a session of its own (see SessionURL).
	DatabaseSessionURL string
	// NATSURL is --nats-url (env KAGZI_NATS_URL).
	NATSURL string
	// Namespace is --namespace (env KAGZI_NAMESPACE), validated before any
	// command runs.
	Namespace string
	// JSON is --json: print machine-readable JSON instead of tables.
	JSON bool

	pool *pgxpool.Pool
	// telemetry is the process's providers (nil under `kagzi serve`).
	telemetry *telemetry.Providers
	st        *store.Store
	nc        *nats.Conn
	client    *client.Client
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Store returns the store over a pool opened on first use.
func (a *app) Store(ctx context.Context) (*store.Store, error) {
	if a.st != nil {
		return a.st, nil
	}
	pool, err := store.Connect(ctx, a.DatabaseURL)
	if err != nil {
		err = fmt.Errorf("connect to Postgres at %s: %w", redactURL(a.DatabaseURL), err)
		if !strings.Contains(err.Error(), "SQLSTATE") { // the server did not answer
			err = fmt.Errorf("%w\nIs Postgres running there? Point --database-url (or KAGZI_DATABASE_URL) at it.", err)
		}
		return nil, err
	}
	a.pool = pool
	a.st = store.New(pool, store.Options{})
	return a.st, nil
}

// SessionURL is the URL of what needs a session of its own (migrating,
// the relay and the leaders under dev): --database-session-url, else
// --database-url.
func (a *app) SessionURL() string {
	if a.DatabaseSessionURL != "" {
		return a.DatabaseSessionURL
	}
	return a.DatabaseURL
}

// NATS returns a NATS connection opened on first use. Unlike a service,
// the CLI fails at once when NATS is unreachable rather than retrying
// forever; once connected it rides out reconnects.
func (a *app) NATS() (*nats.Conn, error) {
	if a.nc != nil {
		return a.nc, nil
	}
	// Credentials and TLS come from the same variables as the services'.
	var auth config.NATSAuth
	if err := config.Load(context.Background(), &auth); err != nil {
		return nil, err
	}
	opts, err := auth.Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(a.NATSURL, append([]nats.Option{
		nats.Name("kagzi-cli"),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.CustomInboxPrefix(protocol.ClientInbox(a.Namespace)),
	}, opts...)...)
	if err != nil {
		hint := "Is NATS running there? Point --nats-url (or KAGZI_NATS_URL) at it."
		var ne net.Error
		if !errors.Is(err, nats.ErrNoServers) && !errors.As(err, &ne) {
			// It answered and refused: credentials or TLS.
			hint = "Check the credentials (KAGZI_NATS_USER and KAGZI_NATS_PASSWORD, KAGZI_NATS_TOKEN, " +
				"KAGZI_NATS_NKEY_SEED or KAGZI_NATS_CREDS) and KAGZI_NATS_TLS_*: the CLI connects as a client of its namespace."
		}
		return nil, fmt.Errorf("connect to NATS at %s: %w\n%s", redactURL(a.NATSURL), err, hint)
	}
	if err := natsutil.CheckServer(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactURL(a.NATSURL), err)
	}
	a.nc = nc
	return nc, nil
}

// Client returns a client of the namespace over the store, with a NATS
// connection when withNATS is set (needed only to wait for results).
func (a *app) Client(ctx context.Context, withNATS bool) (*client.Client, error) {
	if a.client != nil && (!withNATS || a.nc != nil) {
		return a.client, nil
	}
	st, err := a.Store(ctx)
	if err != nil {
		return nil, err
	}
	var nc *nats.Conn
	if withNATS {
		if nc, err = a.NATS(); err != nil {
			return nil, err
		}
	}
	if a.client != nil {
		a.client.Close()
	}
	c, err := client.NewFromStore(st, nc, client.Options{Namespace: a.Namespace})
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// Close releases whatever the command opened.
func (a *app) Close() {
	if a.client != nil {
		a.client.Close()
	}
	if a.nc != nil {
		a.nc.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
}

// redactURL hides the secrets of a URL for messages.
func redactURL(s string) string { return config.RedactURL(s) }

const rootLong = `kagzi is the operator CLI of Kagzi, the durable workflow engine on
PostgreSQL and NATS: migrate the database, start, inspect, cancel and retry
runs, send events, manage cron schedules and list workers.

Global flags read their defaults from the environment (KAGZI_DATABASE_URL,
KAGZI_DATABASE_SESSION_URL, KAGZI_NATS_URL, KAGZI_NAMESPACE). Every command prints a table by default and
JSON with --json.

Exit codes: 0 success, 1 the operation failed (not found, conflict, a run
that failed while waiting), 2 bad usage (unknown command or flag, bad
argument, invalid JSON or id).`

// newRoot builds the command tree for one execution.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "kagzi",
		Short: "Operate Kagzi: migrations, runs, events, schedules, workers",
		Long:  rootLong,
		Example: `  kagzi migrate
  kagzi run start ProcessOrder --input '{"order_id": 42}' --wait
  kagzi run list --status RUNNING,PENDING
  kagzi --json run show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	groupCmd(root)
	pf := root.PersistentFlags()
	pf.StringVar(&a.DatabaseURL, "database-url", envOr("KAGZI_DATABASE_URL", defaultDatabaseURL),
		"Postgres connection string (env KAGZI_DATABASE_URL)")
	pf.StringVar(&a.DatabaseSessionURL, "database-session-url", envOr("KAGZI_DATABASE_SESSION_URL", ""),
		"Postgres connection string that reaches the database directly, for migrate and dev's sessions when --database-url is a connection pooler (env KAGZI_DATABASE_SESSION_URL; default --database-url)")
	pf.StringVar(&a.NATSURL, "nats-url", envOr("KAGZI_NATS_URL", defaultNATSURL),
		"NATS server URL (env KAGZI_NATS_URL)")
	pf.StringVar(&a.Namespace, "namespace", envOr("KAGZI_NAMESPACE", defaultNamespace),
		"namespace to work in (env KAGZI_NAMESPACE)")
	pf.BoolVar(&a.JSON, "json", false, "print JSON instead of tables")
	// Help shows the built-in defaults, never a value from the environment
	// (a database URL may carry a password).
	pf.Lookup("database-url").DefValue = defaultDatabaseURL
	pf.Lookup("database-session-url").DefValue = ""
	pf.Lookup("nats-url").DefValue = defaultNATSURL
	pf.Lookup("namespace").DefValue = defaultNamespace

	// Groups run (to reject unknown subcommands), but their usage shows only
	// "kagzi run [command]", not a bare use line.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"Usage:{{if .Runnable}}", "Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	for _, newCmd := range commands {
		root.AddCommand(newCmd(a))
	}
	guardTree(root, a)
	return root
}

// groupCmd makes c a command that only groups subcommands: alone it prints
// its help; with an unknown subcommand it is a usage error.
func groupCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return usagef("%s", msg)
	}
	return c
}

// guardTree makes every usage mistake a *usageError, in one place, for the
// whole tree (registered commands included): argument-count checks, and
// required flags and flag groups (checked before cobra does, so its plain
// errors never surface). It also validates the namespace before any
// command runs.
func guardTree(c *cobra.Command, a *app) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, as []string) error {
			if err := args(cmd, as); err != nil {
				return &usageError{err: err}
			}
			return nil
		}
	}
	if c.Runnable() {
		pre, preE := c.PreRun, c.PreRunE
		c.PreRun = nil
		c.PreRunE = func(cmd *cobra.Command, as []string) error {
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return &usageError{err: err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return &usageError{err: err}
			}
			if err := protocol.ValidToken("namespace", a.Namespace); err != nil {
				return usagef("--namespace: %v", err)
			}
			if preE != nil {
				return preE(cmd, as)
			}
			if pre != nil {
				pre(cmd, as)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		guardTree(sub, a)
	}
}

// execute runs the CLI with args and returns the process exit code. It is
// main without the process: tests call it directly.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Everything printed goes through termSafe: no field or error can
	// send the operator's terminal a control sequence.
	safeOut, safeErr := newTermSafe(stdout), newTermSafe(stderr)
	defer func() { _, _ = safeOut.Flush(), safeErr.Flush() }()
	stdout, stderr = safeOut, safeErr
	a := &app{}
	defer a.Close()
	// Every command but serve (whose service sets up its own) traces what
	// it does with the same setup as the services: a run started here has
	// its kagzi.start span as its trace's root.
	if service := cliService(args); service != "" {
		p, err := telemetry.Setup(ctx, telemetry.Options{Service: service, Log: process.Logger("warn").With("service", service)})
		if err != nil {
			fmt.Fprintf(stderr, "Error: telemetry: %v\n", err)
			return exitFailed
		}
		a.telemetry = p
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = p.Shutdown(sctx)
		}()
	}
	root := newRoot(a)
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	code := exitCode(err)
	msg := strings.TrimRight(err.Error(), "\n")
	fmt.Fprintf(stderr, "Error: %s\n", msg)
	if h := hint(cmd, a, err); h != "" {
		fmt.Fprintln(stderr, h)
	}
	if code == exitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// cliService is the service name the CLI reports its telemetry under for
// args: kagzi-dev for `kagzi dev`, kagzi-cli otherwise, and "" for `kagzi
// serve`, which runs a service that sets up telemetry itself. The command
// is the first argument that is not a flag or a global flag's value.
func cliService(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "kagzi-cli"
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && slices.Contains([]string{"--database-url", "--nats-url", "--namespace"}, a) {
				i++
			}
			continue
		case a == "serve":
			return ""
		case a == "dev":
			return "kagzi-dev"
		}
		return "kagzi-cli"
	}
	return "kagzi-cli"
}
