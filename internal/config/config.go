// Package config owns what the environment configuration of every Kagzi
// process shares: the variables all services read (Common, NATSAuth), the
// database URL (Database), the console's (Console), and loading and
// validating a configuration struct with go-envconfig (Load). Each
// service's own struct is in its package (services/<name>/config.go) and
// embeds these. Every variable is documented by a paragraph of its field's
// comment that begins with its name ("KAGZI_LEASE: ..."), from which
// docs/configuration.md is generated (reference_test.go; a test fails when
// the page differs).
package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"
)

// ErrInvalid is wrapped by every configuration error; mains exit with
// code 2 on it.
var ErrInvalid = errors.New("invalid configuration")

// MaxLease bounds KAGZI_LEASE of the dispatcher and the reaper: a run
// whose worker lost it (a delivery or report lost on the way) runs again
// once its lease expires, so a longer lease would strand it.
const MaxLease = time.Hour

// Lease is KAGZI_LEASE, declared once for the two services that read it:
// the dispatchers lease each claim for it, and the reaper extends a live
// worker's leases to it, so the two must agree (the reaper's must not
// outlast the dispatchers').
type Lease struct {
	// Duration is how long a claim holds without heartbeats.
	//
	// KAGZI_LEASE: how long a claim holds without heartbeats; the reaper extends
	// a live worker's leases to this past its last heartbeat (keep the reaper's
	// at most the dispatchers': dispatchers announce theirs on their beacons, and
	// a reaper whose lease is longer than a dispatcher's logs an error naming
	// that dispatcher and both leases; 1s to 1h)
	Duration time.Duration `env:"KAGZI_LEASE, default=30s"`
}

// Validate checks the lease is within 1s and MaxLease.
func (l Lease) Validate() error {
	if l.Duration < time.Second || l.Duration > MaxLease {
		return fmt.Errorf("KAGZI_LEASE %v: 1s to %v", l.Duration, MaxLease)
	}
	return nil
}

// Check is the rule between the reaper's lease (l) and a dispatcher's
// (dispatcher, which its beacons announce: protocol.HeaderLease): the
// reaper extends a live worker's leases to l from its last heartbeat, so
// with a longer l than the dispatcher's a run would stay leased past what
// its dispatcher promised. The error names both and what to set.
func (l Lease) Check(dispatcher time.Duration, dispatcherID string) error {
	if l.Duration <= dispatcher {
		return nil
	}
	return fmt.Errorf("%w: the reaper's KAGZI_LEASE %v exceeds dispatcher %s's %v: "+
		"set KAGZI_LEASE the same for the dispatchers and the reaper", ErrInvalid, l.Duration, dispatcherID, dispatcher)
}

// MinGCPercent and MaxGCPercent bound KAGZI_GC_PERCENT: below, a
// service collects so often it is mostly collecting; above, a burst's
// garbage is kept at many times the live heap.
const (
	MinGCPercent = 50
	MaxGCPercent = 1000
)

// Common are the variables every service reads.
type Common struct {
	// NATSURL is the NATS server to connect to.
	//
	// KAGZI_NATS_URL: NATS server(s), comma-separated; credentials in it are
	// accepted but the variables below keep them out of process listings (logs
	// and errors show it redacted)
	NATSURL string `env:"KAGZI_NATS_URL, default=nats://127.0.0.1:4222"`
	// LogLevel: debug, info, warn or error.
	//
	// KAGZI_LOG_LEVEL: `debug`, `info`, `warn` or `error` (JSON logs on stderr;
	// `kagzi dev` logs text and defaults to `warn`, see `--log-level`,
	// `--log-format`)
	LogLevel string `env:"KAGZI_LOG_LEVEL, default=info"`
	// HTTPAddr serves /healthz, /readyz and /metrics ("" disables it).
	//
	// KAGZI_HTTP_ADDR: address of `/healthz`, `/readyz` (200 once every component
	// has started, 503 again while draining) and `/metrics` (empty disables)
	HTTPAddr string `env:"KAGZI_HTTP_ADDR, default=:8080"`
	// GCPercent is the Go garbage collector's target for the process
	// (runtime/debug.SetGCPercent, Go's GOGC): the services allocate per
	// run, and at Go's 100 the collector took about a quarter of the
	// dispatcher's CPU under load (its profile in `kagzi bench --profile`).
	//
	// KAGZI_GC_PERCENT: the garbage collector's target (Go's `GOGC`, which it
	// overrides): the heap grows by this percentage of what is live before a
	// collection; higher saves CPU and costs memory (400 against Go's 100: a
	// fifth less services CPU per run and a third more resident memory in
	// `kagzi bench`, see docs/BENCHMARKS.md); 50 to 1000
	GCPercent int `env:"KAGZI_GC_PERCENT, default=400"`
	NATSAuth
}

// NATSAuth are the NATS credentials and TLS settings of every process
// that connects to NATS (services and the CLI). At most one of user and
// password, token, nkey seed and credentials file is given; files are
// named by path so that secrets can be mounted rather than put in the
// environment. See Options.
type NATSAuth struct {
	// NATSUser and NATSPassword authenticate with a user and password.
	//
	// KAGZI_NATS_USER: NATS user (with `KAGZI_NATS_PASSWORD`); at most one of
	// user, token, nkey seed and credentials file
	NATSUser string `env:"KAGZI_NATS_USER"`
	// KAGZI_NATS_PASSWORD: password of `KAGZI_NATS_USER`
	NATSPassword string `env:"KAGZI_NATS_PASSWORD"`
	// NATSToken authenticates with a token.
	//
	// KAGZI_NATS_TOKEN: NATS token
	NATSToken string `env:"KAGZI_NATS_TOKEN"`
	// NATSNKeySeed is the path of a file holding a user nkey seed.
	//
	// KAGZI_NATS_NKEY_SEED: path of a file holding a user nkey seed
	NATSNKeySeed string `env:"KAGZI_NATS_NKEY_SEED"`
	// NATSCreds is the path of a credentials file (user JWT and seed).
	//
	// KAGZI_NATS_CREDS: path of a NATS credentials file (user JWT and seed,
	// decentralised auth)
	NATSCreds string `env:"KAGZI_NATS_CREDS"`
	// NATSTLSCA is the path of the CA bundle that verifies the server;
	// setting it (or a client certificate) requires TLS.
	//
	// KAGZI_NATS_TLS_CA: path of the CA bundle that verifies the server; any
	// `KAGZI_NATS_TLS_*` turns TLS on
	NATSTLSCA string `env:"KAGZI_NATS_TLS_CA"`
	// NATSTLSCert and NATSTLSKey are the paths of a client certificate
	// and its key (mutual TLS).
	//
	// KAGZI_NATS_TLS_CERT: path of a client certificate (mutual TLS; with
	// `KAGZI_NATS_TLS_KEY`)
	NATSTLSCert string `env:"KAGZI_NATS_TLS_CERT"`
	// KAGZI_NATS_TLS_KEY: path of the client certificate's key
	NATSTLSKey string `env:"KAGZI_NATS_TLS_KEY"`
	// NATSTLSServerName overrides the name the server's certificate is
	// verified against (default: the URL's host).
	//
	// KAGZI_NATS_TLS_SERVER_NAME: name the server certificate is checked against
	// (default: the URL's host)
	NATSTLSServerName string `env:"KAGZI_NATS_TLS_SERVER_NAME"`
}

// Database is read by the services that use Postgres.
type Database struct {
	// DatabaseURL is the Postgres connection string of the pooled work:
	// Postgres itself or a connection pooler in transaction mode in front
	// of it.
	//
	// KAGZI_DATABASE_URL: Postgres connection string of the pooled work: Postgres
	// itself, or a connection pooler in transaction mode (PgBouncer) in front of
	// it (see [deployment.md](deployment.md#postgres-behind-a-connection-pooler-pgbouncer))
	DatabaseURL string `env:"KAGZI_DATABASE_URL, default=postgres://postgres@127.0.0.1:5432/kagzi?sslmode=disable"`
	// DatabaseSessionURL is the connection string of the sessions (the
	// relay's LISTEN, the leaders' advisory locks), which must reach
	// Postgres directly; empty means DatabaseURL.
	//
	// KAGZI_DATABASE_SESSION_URL: the same database reached directly, never
	// through a pooler, for what holds a session of its own: the relay's
	// `LISTEN`, the leaders' advisory locks, migrating; unset,
	// `KAGZI_DATABASE_URL` is used. Set it when `KAGZI_DATABASE_URL` is a pooler:
	// a service whose session URL reaches a pooler exits at start with code 2
	// naming this variable (`kagzi migrate`: flag `--database-session-url`)
	DatabaseSessionURL string `env:"KAGZI_DATABASE_SESSION_URL"`
}

// SessionURL is the URL of the sessions: DatabaseSessionURL, else
// DatabaseURL.
func (d *Database) SessionURL() string {
	if d.DatabaseSessionURL != "" {
		return d.DatabaseSessionURL
	}
	return d.DatabaseURL
}

// SessionPooled is the configuration error of a session URL found to
// reach a connection pooler (err says how it was seen): it names the
// variable to set.
func (d *Database) SessionPooled(err error) error {
	v := "KAGZI_DATABASE_SESSION_URL"
	if d.DatabaseSessionURL == "" {
		v = "KAGZI_DATABASE_URL (KAGZI_DATABASE_SESSION_URL is not set, so sessions use it)"
	}
	return fmt.Errorf("%w: %s reaches a connection pooler, not Postgres itself; "+
		"the relay's LISTEN and the leaders' advisory locks need sessions of their own: "+
		"set KAGZI_DATABASE_SESSION_URL to a URL that reaches Postgres directly (KAGZI_DATABASE_URL may stay on the pooler) [%v]",
		ErrInvalid, v, err)
}

// Console configures `kagzi console`, the web console.
type Console struct {
	Common
	Database
	// ConsoleAddr is where the console listens.
	//
	// KAGZI_CONSOLE_ADDR: where `kagzi console` listens (`kagzi dev` takes
	// `--console-addr`, a free port if taken)
	ConsoleAddr string `env:"KAGZI_CONSOLE_ADDR, default=127.0.0.1:8088"`
	// ConsolePrefix is the path the console is served under.
	//
	// KAGZI_CONSOLE_PREFIX: path the console is served under, e.g. `/kagzi`
	// behind a proxy
	ConsolePrefix string `env:"KAGZI_CONSOLE_PREFIX"`
	// ConsoleReadOnly refuses every write (403).
	//
	// KAGZI_CONSOLE_READ_ONLY: refuse every write (403): no cancel, retry, start,
	// schedule or limit changes
	ConsoleReadOnly bool `env:"KAGZI_CONSOLE_READ_ONLY, default=false"`
	// ConsoleBasicAuth, user:password, requires HTTP basic auth.
	//
	// KAGZI_CONSOLE_BASIC_AUTH: `user:password`: require HTTP basic auth
	ConsoleBasicAuth string `env:"KAGZI_CONSOLE_BASIC_AUTH"`
	// ConsoleAuthHeader names the user header of a trusted authenticating
	// proxy; requests without it are refused.
	//
	// KAGZI_CONSOLE_AUTH_HEADER: header carrying the user from a trusted
	// authenticating proxy (e.g. `X-Forwarded-User` from oauth2-proxy); requests
	// without it get 401
	ConsoleAuthHeader string `env:"KAGZI_CONSOLE_AUTH_HEADER"`
	// ConsoleTrustedProxies, comma-separated CIDRs, limits the header mode
	// to requests from these addresses.
	//
	// KAGZI_CONSOLE_TRUSTED_PROXIES: comma-separated CIDRs the header mode
	// accepts requests from (unset: any)
	ConsoleTrustedProxies string `env:"KAGZI_CONSOLE_TRUSTED_PROXIES"`
	// ConsoleTraceURL links runs to their traces; {trace_id} is replaced.
	//
	// KAGZI_CONSOLE_TRACE_URL: trace UI link for a run, `{trace_id}` replaced,
	// e.g. `http://localhost:16686/trace/{trace_id}`
	ConsoleTraceURL string `env:"KAGZI_CONSOLE_TRACE_URL"`
}

// Load fills cfg (a pointer to one of the structs above) from the
// environment and validates it.
func Load(ctx context.Context, cfg any) error {
	return LoadFrom(ctx, cfg, envconfig.OsLookuper())
}

// Defaults returns a T with every variable at its env tag's default, as
// if the environment set none, validated: how the dev assembly and tests
// build a configuration, so that the env tags stay the only defaults.
// They set the fields they mean to change on what it returns.
func Defaults[T any](ctx context.Context) (T, error) {
	var cfg T
	err := LoadFrom(ctx, &cfg, envconfig.MapLookuper(nil))
	return cfg, err
}

// LoadFrom is Load with another source of variables (tests).
func LoadFrom(ctx context.Context, cfg any, l envconfig.Lookuper) error {
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: cfg, Lookuper: l}); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, nameVariable(cfg, err.Error()))
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// Shared returns c: every service's configuration embeds Common, so its
// pointer has this method, which lets code common to all services reach
// these variables.
func (c *Common) Shared() *Common { return c }

// Validate checks the variables every service reads.
func (c *Common) Validate() error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("KAGZI_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.NATSURL == "" {
		return errors.New("KAGZI_NATS_URL is empty")
	}
	if c.GCPercent < MinGCPercent || c.GCPercent > MaxGCPercent {
		return fmt.Errorf("KAGZI_GC_PERCENT %d: %d to %d", c.GCPercent, MinGCPercent, MaxGCPercent)
	}
	return c.NATSAuth.validate()
}

// Validate checks the database variables.
func (d *Database) Validate() error {
	if d.DatabaseURL == "" {
		return errors.New("KAGZI_DATABASE_URL is empty")
	}
	return nil
}

// nameVariable rewrites go-envconfig's "Field: problem" into
// "KAGZI_VARIABLE: problem", so the message names what the user sets.
func nameVariable(cfg any, msg string) string {
	var find func(t reflect.Type, msg string) string
	find = func(t reflect.Type, msg string) string {
		field, rest, ok := strings.Cut(msg, ": ")
		if !ok {
			return ""
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				// go-envconfig names an embedded struct's field after
				// the struct's ("Lease: Duration: ...") or not at all.
				if f.Name == field {
					if v := find(f.Type, rest); v != "" {
						return v
					}
				}
				if v := find(f.Type, msg); v != "" {
					return v
				}
				continue
			}
			if f.Name == field {
				name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
				return strings.TrimSpace(name) + ": " + rest
			}
		}
		return ""
	}
	if v := find(reflect.TypeOf(cfg), msg); v != "" {
		return v
	}
	return msg
}
