package worker

import (
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Defaults of Config.
const (
	DefaultNamespace         = "default"
	DefaultQueue             = "default"
	DefaultMaxConcurrency    = 10
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultWaitTimeout       = 30 * time.Second
	DefaultReportTimeout     = 5 * time.Second
	DefaultDrainTimeout      = 20 * time.Second
)

// DefaultIdentity is the worker identity Inbox uses when given none.
const DefaultIdentity = "worker"

// Inbox is the connection option a worker's NATS connection needs where
// NATS enforces permissions: the inbox prefix of the workers of namespace
// connecting as identity (protocol.WorkerInbox), under which its
// deliveries and replies arrive and which its NATS user alone may read.
// Empty namespace or identity take their defaults. Pass it with the
// credentials and TLS options to nats.Connect:
//
//	nc, err := nats.Connect(url, nats.UserCredentials(creds), worker.Inbox("orders", "billing"))
func Inbox(namespace, identity string) nats.Option {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if identity == "" {
		identity = DefaultIdentity
	}
	return nats.CustomInboxPrefix(protocol.WorkerInbox(namespace, identity))
}

// Maxima of Config's durations; a longer one is refused by New.
const (
	// MaxWaitTimeout bounds WaitTimeout (what a dispatcher accepts).
	MaxWaitTimeout = 10 * time.Minute
	// MaxHeartbeatInterval bounds HeartbeatInterval: the longest worker
	// timeout a reaper takes (KAGZI_WORKER_TIMEOUT); heartbeats rarer
	// than the reaper's timeout make a live worker look dead.
	MaxHeartbeatInterval = time.Hour
	// MaxReportTimeout bounds ReportTimeout: a report that waits longer
	// holds its run's slot for nothing; the report is retried anyway.
	MaxReportTimeout = 10 * time.Minute
	// MaxDrainTimeout bounds DrainTimeout: a stopping worker holds its
	// runs (no other worker may take them) for at most this long.
	MaxDrainTimeout = time.Hour
	// MaxInlineRetryWait bounds MaxInlineRetry: a longer backoff holds a
	// slot idle that a suspended run would free.
	MaxInlineRetryWait = 10 * time.Minute
)

// Config configures a Worker. Zero fields take their defaults (withDefaults,
// the one place they are set).
//
// The env tags are the worker service's (services/worker, whose
// configuration embeds Config and is read from the environment): its
// variables and its defaults, which differ from a zero field's where a
// service process is sized differently from a worker embedded in an
// application (100 runs at once, not 10; a drain of 30 s, not 20 s). A Go
// program that builds a Config ignores them.
type Config struct {
	// Namespace the worker serves (default "default").
	//
	// KAGZI_NAMESPACE: namespace served
	Namespace string `env:"KAGZI_NAMESPACE, default=default"`
	// Queue is the task queue the worker serves (default "default").
	//
	// KAGZI_QUEUE: task queue served
	Queue string `env:"KAGZI_QUEUE, default=default"`
	// MaxConcurrency is how many runs may execute at once (default 10).
	// A run's slot is free once its end report is sent; as many more runs
	// may wait for that report's acknowledgement.
	//
	// KAGZI_MAX_CONCURRENCY: runs executed at once; also the most runs whose end
	// (completion or failure) is sent but not yet acknowledged, which hold no
	// slot
	MaxConcurrency int `env:"KAGZI_MAX_CONCURRENCY, default=100"`
	// HeartbeatInterval is how often liveness and held runs are
	// published (default 2 s); accepted runs are also announced at once.
	//
	// KAGZI_HEARTBEAT_INTERVAL: interval between heartbeats (a worker also sends
	// one as soon as it accepts runs; at most 1h, `worker.MaxHeartbeatInterval`)
	HeartbeatInterval time.Duration `env:"KAGZI_HEARTBEAT_INTERVAL, default=2s"`
	// WaitTimeout is how long a work request may stay parked at a
	// dispatcher before the worker renews it (default 30 s, at most 10 min).
	//
	// KAGZI_WAIT_TIMEOUT: how long a request for work stays parked before it is
	// renewed (100ms to 10m)
	WaitTimeout time.Duration `env:"KAGZI_WAIT_TIMEOUT, default=30s"`
	// ReportTimeout bounds one attempt of a report round trip (default 5 s);
	// a report is retried until acknowledged or its run ends.
	ReportTimeout time.Duration
	// DrainTimeout is how long Stop lets in-flight runs finish, and their
	// end reports be acknowledged, before it cancels and releases them
	// (default 20 s).
	//
	// KAGZI_DRAIN_TIMEOUT: how long a stopping worker lets its runs finish, and
	// their end reports be acknowledged, before releasing them (at most 1h)
	DrainTimeout time.Duration `env:"KAGZI_DRAIN_TIMEOUT, default=30s"`
	// MaxInlineRetry is the longest backoff before a step's next attempt
	// that a run waits for in the worker, keeping its slot (default
	// workflow.DefaultMaxInlineRetry, 2 s; negative: never). A longer
	// backoff suspends the run until the retry time, freeing the slot.
	//
	// KAGZI_MAX_INLINE_RETRY: the longest step retry backoff a worker waits for
	// in place, holding the run's slot; a longer one suspends the run until the
	// retry time (negative: always suspend; at most 10m)
	MaxInlineRetry time.Duration `env:"KAGZI_MAX_INLINE_RETRY, default=2s"`
	// Hostname reported at registration (default os.Hostname()).
	Hostname string
	// Version of the worker binary, reported at registration (optional).
	Version string
	// Labels reported at registration (optional, at most 64).
	Labels map[string]string
	// Logger receives the worker's logs (default: discarded). (noinit:
	// reading the environment leaves it nil.)
	Logger *slog.Logger `env:",noinit"`
	// WorkerID identifies this worker process (default: a new UUID v7).
	WorkerID uuid.UUID
	// TracerProvider and MeterProvider default to the otel globals.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// DispatchHops, if set, is told when each delivered run's delivery
	// arrived ("received") and when its execution began ("executing"), in
	// unix nanoseconds: the worker's part of the dispatch-hop diagnostic
	// (`kagzi bench --scenario latency --hops`; the worker service sets it
	// from KAGZI_HOPS_DIR). Called on the delivery path: keep it cheap.
	DispatchHops func(runID uuid.UUID, hop string, unixNano int64)
}

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.ReportTimeout == 0 {
		c.ReportTimeout = DefaultReportTimeout
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.WorkerID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return c, fmt.Errorf("worker: new worker id: %w", err)
		}
		c.WorkerID = id
	}

	var errs []error
	if err := protocol.ValidToken("namespace", c.Namespace); err != nil {
		errs = append(errs, err)
	}
	if err := protocol.ValidToken("queue", c.Queue); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > protocol.MaxCredits {
		errs = append(errs, fmt.Errorf("max concurrency %d must be 1 to %d", c.MaxConcurrency, protocol.MaxCredits))
	}
	if c.HeartbeatInterval < 0 || c.HeartbeatInterval > MaxHeartbeatInterval {
		errs = append(errs, fmt.Errorf("heartbeat interval %v must be 0 (default) to %v", c.HeartbeatInterval, MaxHeartbeatInterval))
	}
	if c.WaitTimeout < time.Millisecond || c.WaitTimeout > MaxWaitTimeout {
		errs = append(errs, fmt.Errorf("wait timeout %v must be 1ms to %v", c.WaitTimeout, MaxWaitTimeout))
	}
	if c.ReportTimeout < 0 || c.ReportTimeout > MaxReportTimeout {
		errs = append(errs, fmt.Errorf("report timeout %v must be 0 (default) to %v", c.ReportTimeout, MaxReportTimeout))
	}
	if c.DrainTimeout < 0 || c.DrainTimeout > MaxDrainTimeout {
		errs = append(errs, fmt.Errorf("drain timeout %v must be 0 (default) to %v", c.DrainTimeout, MaxDrainTimeout))
	}
	if c.MaxInlineRetry > MaxInlineRetryWait {
		errs = append(errs, fmt.Errorf("max inline retry %v is above the maximum %v", c.MaxInlineRetry, MaxInlineRetryWait))
	}
	if err := protocol.ValidWorkerIdentity(c.Hostname, c.Version, c.Labels); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("worker: invalid config: %w", err)
	}
	return c, nil
}
