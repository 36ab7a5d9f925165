package cliutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/telemetry"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// App is the state of one CLI execution: the global flags and the
// connections opened so far. Commands open only what they need, through
// Store, NATS and Client; execute closes them all when the command returns.
type App struct {
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
	// Telemetry is the process's providers (nil under `kagzi serve`).
	Telemetry *telemetry.Providers
	st        *store.Store
	nc        *nats.Conn
	client    *client.Client
}

// Store returns the store over a pool opened on first use.
func (a *App) Store(ctx context.Context) (*store.Store, error) {
	if a.st != nil {
		return a.st, nil
	}
	pool, err := store.Connect(ctx, a.DatabaseURL)
	if err != nil {
		err = fmt.Errorf("connect to Postgres at %s: %w", RedactURL(a.DatabaseURL), err)
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
func (a *App) SessionURL() string {
	if a.DatabaseSessionURL != "" {
		return a.DatabaseSessionURL
	}
	return a.DatabaseURL
}

// NATS returns a NATS connection opened on first use. Unlike a service,
// the CLI fails at once when NATS is unreachable rather than retrying
// forever; once connected it rides out reconnects.
func (a *App) NATS() (*nats.Conn, error) {
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
		return nil, fmt.Errorf("connect to NATS at %s: %w\n%s", RedactURL(a.NATSURL), err, hint)
	}
	if err := natsutil.CheckServer(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", RedactURL(a.NATSURL), err)
	}
	a.nc = nc
	return nc, nil
}

// Client returns a client of the namespace over the store, with a NATS
// connection when withNATS is set (needed only to wait for results).
func (a *App) Client(ctx context.Context, withNATS bool) (*client.Client, error) {
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

// Pool is the pool under Store: nil until Store has been called.
func (a *App) Pool() *pgxpool.Pool { return a.pool }

// Close releases whatever the command opened.
func (a *App) Close() {
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

// RedactURL hides the secrets of a URL for messages.
func RedactURL(s string) string { return config.RedactURL(s) }

// GroupCmd makes c a command that only groups subcommands: alone it prints
// its help; with an unknown subcommand it is a usage error.
func GroupCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return Usagef("%s", msg)
	}
	return c
}
