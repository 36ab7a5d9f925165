package worker

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
)

// Config is the worker service's configuration, read from the environment
// (config.Load); every variable is documented in the README.
type Config struct {
	config.Common
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
	// HopsDir, if set, is where the worker appends when each delivered run
	// arrived and began (a diagnostic; see internal/hops).
	HopsDir string `env:"KAGZI_HOPS_DIR"`

	// hops is the recorder Run opened in HopsDir.
	hops *hops.Recorder
}

// Validate checks the values; config.Load calls it.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
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
	case c.WaitTimeout < 100*time.Millisecond || c.WaitTimeout > worker.MaxWaitTimeout:
		return fmt.Errorf("KAGZI_WAIT_TIMEOUT %v: 100ms to %v", c.WaitTimeout, worker.MaxWaitTimeout)
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval > worker.MaxHeartbeatInterval:
		return fmt.Errorf("KAGZI_HEARTBEAT_INTERVAL %v: positive, at most %v", c.HeartbeatInterval, worker.MaxHeartbeatInterval)
	case c.DrainTimeout < 0 || c.DrainTimeout > worker.MaxDrainTimeout:
		return fmt.Errorf("KAGZI_DRAIN_TIMEOUT %v: 0 to %v", c.DrainTimeout, worker.MaxDrainTimeout)
	case c.MaxInlineRetry > worker.MaxInlineRetryWait:
		return fmt.Errorf("KAGZI_MAX_INLINE_RETRY %v: at most %v (negative: always suspend)", c.MaxInlineRetry, worker.MaxInlineRetryWait)
	}
	return nil
}
