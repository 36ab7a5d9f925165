package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/internal/telemetry"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Defaults of the global flags, each overridden by its environment variable
// and then by the flag.
const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/kagzi?sslmode=disable"
	defaultNATSURL     = "nats://127.0.0.1:4222"
	defaultNamespace   = "default"
)

// commands holds the constructors of the top-level commands. Every file of
// this package that adds a top-level command registers it from its init
// (ops.go registers those of package ops):
//
//	func init() { register(newDevCmd) }
//
//	func newDevCmd(a *cliutil.App) *cobra.Command {
//		return &cobra.Command{Use: "dev", Short: "...", Example: "...", RunE: ...}
//	}
//
// The constructor is called once per execution with the shared
// *cliutil.App, which carries the global flags (a.DatabaseURL, a.NATSURL, a.Namespace, a.JSON)
// and opens connections lazily (a.Store, a.NATS, a.Client). Help lists the
// commands sorted by name, so registration order does not matter.
var commands []func(*cliutil.App) *cobra.Command

// register adds a top-level command constructor; call it from init only.
func register(newCmd func(*cliutil.App) *cobra.Command) { commands = append(commands, newCmd) }

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

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
func newRoot(a *cliutil.App) *cobra.Command {
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
	cliutil.GroupCmd(root)
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cliutil.UsageError{Err: err} })
	for _, newCmd := range commands {
		root.AddCommand(newCmd(a))
	}
	guardTree(root, a)
	return root
}

// guardTree makes every usage mistake a *cliutil.UsageError, in one place, for the
// whole tree (registered commands included): argument-count checks, and
// required flags and flag groups (checked before cobra does, so its plain
// errors never surface). It also validates the namespace before any
// command runs.
func guardTree(c *cobra.Command, a *cliutil.App) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, as []string) error {
			if err := args(cmd, as); err != nil {
				return &cliutil.UsageError{Err: err}
			}
			return nil
		}
	}
	if c.Runnable() {
		pre, preE := c.PreRun, c.PreRunE
		c.PreRun = nil
		c.PreRunE = func(cmd *cobra.Command, as []string) error {
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return &cliutil.UsageError{Err: err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return &cliutil.UsageError{Err: err}
			}
			if err := protocol.ValidToken("namespace", a.Namespace); err != nil {
				return cliutil.Usagef("--namespace: %v", err)
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
	// Everything printed goes through cliutil.TermSafe: no field or error can
	// send the operator's terminal a control sequence.
	safeOut, safeErr := cliutil.NewTermSafe(stdout), cliutil.NewTermSafe(stderr)
	defer func() { _, _ = safeOut.Flush(), safeErr.Flush() }()
	stdout, stderr = safeOut, safeErr
	a := &cliutil.App{}
	defer a.Close()
	// Every command but serve (whose service sets up its own) traces what
	// it does with the same setup as the services: a run started here has
	// its kagzi.start span as its trace's root.
	if service := cliService(args); service != "" {
		p, err := telemetry.Setup(ctx, telemetry.Options{Service: service, Log: process.Logger("warn").With("service", service)})
		if err != nil {
			fmt.Fprintf(stderr, "Error: telemetry: %v\n", err)
			return cliutil.ExitFailed
		}
		a.Telemetry = p
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
	if code == cliutil.ExitUsage {
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
