// Package config owns the environment configuration of Kagzi's services:
// one struct per service, loaded with go-envconfig and validated once in
// main. Every variable is documented in the README (a test enforces it).
package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrInvalid is wrapped by every configuration error; mains exit with
// code 2 on it.
var ErrInvalid = errors.New("invalid configuration")

// Common are the variables every service reads.
type Common struct {
	// NATSURL is the NATS server to connect to.
	NATSURL string `env:"KAGZI_NATS_URL, default=nats://127.0.0.1:4222"`
	// LogLevel: debug, info, warn or error.
	LogLevel string `env:"KAGZI_LOG_LEVEL, default=info"`
	// HTTPAddr serves /healthz, /readyz and /metrics ("" disables it).
	HTTPAddr string `env:"KAGZI_HTTP_ADDR, default=:8080"`
	NATSAuth
}

// NATSAuth are the NATS credentials and TLS settings of every process
// that connects to NATS (services and the CLI). At most one of user and
// password, token, nkey seed and credentials file is given; files are
// named by path so that secrets can be mounted rather than put in the
// environment. See Options.
type NATSAuth struct {
	// NATSUser and NATSPassword authenticate with a user and password.
	NATSUser     string `env:"KAGZI_NATS_USER"`
	NATSPassword string `env:"KAGZI_NATS_PASSWORD"`
	// NATSToken authenticates with a token.
	NATSToken string `env:"KAGZI_NATS_TOKEN"`
	// NATSNKeySeed is the path of a file holding a user nkey seed.
	NATSNKeySeed string `env:"KAGZI_NATS_NKEY_SEED"`
	// NATSCreds is the path of a credentials file (user JWT and seed).
	NATSCreds string `env:"KAGZI_NATS_CREDS"`
	// NATSTLSCA is the path of the CA bundle that verifies the server;
	// setting it (or a client certificate) requires TLS.
	NATSTLSCA string `env:"KAGZI_NATS_TLS_CA"`
	// NATSTLSCert and NATSTLSKey are the paths of a client certificate
	// and its key (mutual TLS).
	NATSTLSCert string `env:"KAGZI_NATS_TLS_CERT"`
	NATSTLSKey  string `env:"KAGZI_NATS_TLS_KEY"`
	// NATSTLSServerName overrides the name the server's certificate is
	// verified against (default: the URL's host).
	NATSTLSServerName string `env:"KAGZI_NATS_TLS_SERVER_NAME"`
}

// Database is read by the services that use Postgres.
type Database struct {
	// DatabaseURL is the Postgres connection string.
	DatabaseURL string `env:"KAGZI_DATABASE_URL, default=postgres://postgres@127.0.0.1:5432/kagzi?sslmode=disable"`
}

// Dispatcher configures services/dispatcher.
type Dispatcher struct {
	Common
	Database
	// Lease is how long a claim holds without heartbeats.
	Lease time.Duration `env:"KAGZI_LEASE, default=30s"`
	// DeliveryTimeout bounds a worker's ack of a delivery.
	DeliveryTimeout time.Duration `env:"KAGZI_DELIVERY_TIMEOUT, default=5s"`
	// MaxClaim caps the runs one claim statement takes.
	MaxClaim int `env:"KAGZI_MAX_CLAIM, default=256"`
	// ReportWriters is the number of report transactions in flight.
	ReportWriters int `env:"KAGZI_REPORT_WRITERS, default=4"`
	// Relay enables the NOTIFY relay in this replica (one relays at a time).
	Relay bool `env:"KAGZI_RELAY, default=true"`
	// BeaconInterval is the time between the dispatcher's liveness
	// beacons; workers renew their request when one misses three of them.
	BeaconInterval time.Duration `env:"KAGZI_BEACON_INTERVAL, default=1s"`
}

// Scheduler configures services/scheduler.
type Scheduler struct {
	Common
	Database
	// SchedulerBatch is how many due schedules one statement reads.
	SchedulerBatch int `env:"KAGZI_SCHEDULER_BATCH, default=100"`
	// SchedulerCatchUpWindow is how late a fire time may be fired and
	// still count as due; older due times are missed (see max_catchup).
	SchedulerCatchUpWindow time.Duration `env:"KAGZI_SCHEDULER_CATCHUP_WINDOW, default=5m"`
}

// Reaper configures services/reaper.
type Reaper struct {
	Common
	Database
	// WorkerTimeout: a worker not heard for this long is marked OFFLINE
	// and its runs are recovered.
	WorkerTimeout time.Duration `env:"KAGZI_WORKER_TIMEOUT, default=6s"`
	// FlushInterval batches the writes of heartbeats and lease extensions.
	FlushInterval time.Duration `env:"KAGZI_FLUSH_INTERVAL, default=2s"`
	// Lease is what a live worker's runs' leases are extended to; it must
	// not exceed the dispatchers' (same variable).
	Lease time.Duration `env:"KAGZI_LEASE, default=30s"`
	// LeaseGrace: a run locked to a live worker that does not list it is
	// released once its lease was last set this long before.
	LeaseGrace time.Duration `env:"KAGZI_LEASE_GRACE, default=10s"`
	// WorkerRetention: OFFLINE workers are deleted this long after they
	// were last heard (0 keeps them).
	WorkerRetention time.Duration `env:"KAGZI_WORKER_RETENTION, default=24h"`
}

// Worker configures services/worker (NATS only, no database).
type Worker struct {
	Common
	// Namespace and Queue the worker serves.
	Namespace string `env:"KAGZI_NAMESPACE, default=default"`
	Queue     string `env:"KAGZI_QUEUE, default=default"`
	// Identity names the worker's inbox prefix
	// (protocol.WorkerInbox(namespace, identity)): a worker's NATS user
	// may read that inbox only (kagzi nats-config --worker NS/IDENTITY).
	Identity string `env:"KAGZI_WORKER_IDENTITY, default=worker"`
	// MaxConcurrency is the number of runs executed at once.
	MaxConcurrency int `env:"KAGZI_MAX_CONCURRENCY, default=100"`
	// HeartbeatInterval between heartbeats to the reaper.
	HeartbeatInterval time.Duration `env:"KAGZI_HEARTBEAT_INTERVAL, default=2s"`
	// WaitTimeout is how long a work request stays parked before renewal.
	WaitTimeout time.Duration `env:"KAGZI_WAIT_TIMEOUT, default=30s"`
	// DrainTimeout bounds the graceful drain on shutdown.
	DrainTimeout time.Duration `env:"KAGZI_DRAIN_TIMEOUT, default=30s"`
	// MaxInlineRetry is the longest step retry backoff waited for in the
	// worker; a longer one suspends the run (negative: always suspend).
	MaxInlineRetry time.Duration `env:"KAGZI_MAX_INLINE_RETRY, default=2s"`
}

// Console configures `kagzi console`, the web console.
type Console struct {
	Common
	Database
	// ConsoleAddr is where the console listens.
	ConsoleAddr string `env:"KAGZI_CONSOLE_ADDR, default=127.0.0.1:8088"`
	// ConsolePrefix is the path the console is served under.
	ConsolePrefix string `env:"KAGZI_CONSOLE_PREFIX"`
	// ConsoleReadOnly refuses every write (403).
	ConsoleReadOnly bool `env:"KAGZI_CONSOLE_READ_ONLY, default=false"`
	// ConsoleBasicAuth, user:password, requires HTTP basic auth.
	ConsoleBasicAuth string `env:"KAGZI_CONSOLE_BASIC_AUTH"`
	// ConsoleAuthHeader names the user header of a trusted authenticating
	// proxy; requests without it are refused.
	ConsoleAuthHeader string `env:"KAGZI_CONSOLE_AUTH_HEADER"`
	// ConsoleTrustedProxies, comma-separated CIDRs, limits the header mode
	// to requests from these addresses.
	ConsoleTrustedProxies string `env:"KAGZI_CONSOLE_TRUSTED_PROXIES"`
	// ConsoleTraceURL links runs to their traces; {trace_id} is replaced.
	ConsoleTraceURL string `env:"KAGZI_CONSOLE_TRACE_URL"`
}

// Load fills cfg (a pointer to one of the structs above) from the
// environment and validates it.
func Load(ctx context.Context, cfg any) error {
	return LoadFrom(ctx, cfg, envconfig.OsLookuper())
}

// LoadFrom is Load with another source of variables (tests).
func LoadFrom(ctx context.Context, cfg any, l envconfig.Lookuper) error {
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: cfg, Lookuper: l}); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, nameVariable(cfg, err.Error()))
	}
	if v, ok := cfg.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

func (c *Common) validate() error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("KAGZI_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.NATSURL == "" {
		return errors.New("KAGZI_NATS_URL is empty")
	}
	return c.NATSAuth.validate()
}

func (d *Database) validate() error {
	if d.DatabaseURL == "" {
		return errors.New("KAGZI_DATABASE_URL is empty")
	}
	return nil
}

func (c *Dispatcher) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.Database.validate(); err != nil {
		return err
	}
	switch {
	case c.Lease < time.Second:
		return fmt.Errorf("KAGZI_LEASE %v: at least 1s", c.Lease)
	case c.DeliveryTimeout <= 0:
		return fmt.Errorf("KAGZI_DELIVERY_TIMEOUT %v: must be positive", c.DeliveryTimeout)
	case c.MaxClaim < 1 || c.MaxClaim > 10000:
		return fmt.Errorf("KAGZI_MAX_CLAIM %d: 1 to 10000", c.MaxClaim)
	case c.ReportWriters < 1 || c.ReportWriters > 64:
		return fmt.Errorf("KAGZI_REPORT_WRITERS %d: 1 to 64", c.ReportWriters)
	case c.BeaconInterval < 10*time.Millisecond || c.BeaconInterval > protocol.MaxBeaconInterval:
		return fmt.Errorf("KAGZI_BEACON_INTERVAL %v: 10ms to %v", c.BeaconInterval, protocol.MaxBeaconInterval)
	}
	return nil
}

func (c *Scheduler) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.Database.validate(); err != nil {
		return err
	}
	switch {
	case c.SchedulerBatch < 1 || c.SchedulerBatch > 10000:
		return fmt.Errorf("KAGZI_SCHEDULER_BATCH %d: 1 to 10000", c.SchedulerBatch)
	case c.SchedulerCatchUpWindow < time.Second || c.SchedulerCatchUpWindow > 24*time.Hour:
		return fmt.Errorf("KAGZI_SCHEDULER_CATCHUP_WINDOW %v: 1s to 24h", c.SchedulerCatchUpWindow)
	}
	return nil
}

func (c *Reaper) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.Database.validate(); err != nil {
		return err
	}
	switch {
	case c.WorkerTimeout < 100*time.Millisecond || c.WorkerTimeout > time.Hour:
		return fmt.Errorf("KAGZI_WORKER_TIMEOUT %v: 100ms to 1h", c.WorkerTimeout)
	case c.Lease < time.Second:
		return fmt.Errorf("KAGZI_LEASE %v: at least 1s", c.Lease)
	case c.FlushInterval <= 0 || c.FlushInterval > c.Lease/3:
		return fmt.Errorf("KAGZI_FLUSH_INTERVAL %v: positive, at most a third of KAGZI_LEASE (%v)", c.FlushInterval, c.Lease)
	case c.LeaseGrace < 2*c.FlushInterval || c.LeaseGrace >= c.Lease:
		return fmt.Errorf("KAGZI_LEASE_GRACE %v: at least twice KAGZI_FLUSH_INTERVAL (%v), less than KAGZI_LEASE (%v)",
			c.LeaseGrace, c.FlushInterval, c.Lease)
	case c.WorkerRetention < 0:
		return fmt.Errorf("KAGZI_WORKER_RETENTION %v: must not be negative", c.WorkerRetention)
	}
	return nil
}

func (c *Worker) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := protocol.ValidToken("KAGZI_NAMESPACE", c.Namespace); err != nil {
		return err
	}
	if err := protocol.ValidToken("KAGZI_QUEUE", c.Queue); err != nil {
		return err
	}
	if err := protocol.ValidToken("KAGZI_WORKER_IDENTITY", c.Identity); err != nil {
		return err
	}
	switch {
	case c.MaxConcurrency < 1 || c.MaxConcurrency > protocol.MaxCredits:
		return fmt.Errorf("KAGZI_MAX_CONCURRENCY %d: 1 to %d", c.MaxConcurrency, protocol.MaxCredits)
	case c.WaitTimeout < 100*time.Millisecond || c.WaitTimeout > 10*time.Minute:
		return fmt.Errorf("KAGZI_WAIT_TIMEOUT %v: 100ms to 10m", c.WaitTimeout)
	case c.HeartbeatInterval <= 0:
		return fmt.Errorf("KAGZI_HEARTBEAT_INTERVAL %v: must be positive", c.HeartbeatInterval)
	case c.DrainTimeout < 0:
		return fmt.Errorf("KAGZI_DRAIN_TIMEOUT %v: must not be negative", c.DrainTimeout)
	}
	return nil
}

// nameVariable rewrites go-envconfig's "Field: problem" into
// "KAGZI_VARIABLE: problem", so the message names what the user sets.
func nameVariable(cfg any, msg string) string {
	field, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return msg
	}
	var find func(t reflect.Type) string
	find = func(t reflect.Type) string {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				if v := find(f.Type); v != "" {
					return v
				}
				continue
			}
			if f.Name == field {
				name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
				return strings.TrimSpace(name)
			}
		}
		return ""
	}
	if v := find(reflect.TypeOf(cfg)); v != "" {
		return v + ": " + rest
	}
	return msg
}
