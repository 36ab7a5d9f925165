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
// (config.Load); every variable is documented in docs/configuration.md, generated
// from the KAGZI_* paragraphs of the fields' comments. The SDK's
// worker.Config is embedded whole: its env tags are the service's
// variables and defaults (KAGZI_NAMESPACE, KAGZI_QUEUE,
// KAGZI_MAX_CONCURRENCY, KAGZI_HEARTBEAT_INTERVAL, KAGZI_WAIT_TIMEOUT,
// KAGZI_DRAIN_TIMEOUT, KAGZI_MAX_INLINE_RETRY), and New hands it to
// worker.New as it is.
type Config struct {
	config.Common
	worker.Config
	// Identity names the worker's inbox prefix
	// (protocol.WorkerInbox(namespace, identity)): a worker's NATS user
	// may read that inbox only (kagzi nats-config --worker NS/IDENTITY).
	//
	// KAGZI_WORKER_IDENTITY: the worker's identity: its inbox prefix is
	// `kagzi.v1.inbox.worker.<namespace>.<identity>`, the only inbox its NATS
	// user may read (see [security.md](security.md))
	Identity string `env:"KAGZI_WORKER_IDENTITY, default=worker"`
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
