package reaper

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Config is the reaper service's configuration, read from the environment
// (config.Load); every variable is documented in the README.
type Config struct {
	config.Common
	config.Database
	// WorkerTimeout: a worker not heard for this long is marked OFFLINE
	// and its runs are recovered.
	WorkerTimeout time.Duration `env:"KAGZI_WORKER_TIMEOUT, default=6s"`
	// FlushInterval batches the writes of heartbeats and lease extensions.
	FlushInterval time.Duration `env:"KAGZI_FLUSH_INTERVAL, default=2s"`
	config.Lease
	// LeaseGrace: a run locked to a live worker that does not list it is
	// released once its lease was last set this long before.
	LeaseGrace time.Duration `env:"KAGZI_LEASE_GRACE, default=10s"`
	// BeaconInterval is the time between the leader's beacons; a standby
	// takes over from a leader silent for three of them.
	BeaconInterval time.Duration `env:"KAGZI_BEACON_INTERVAL, default=1s"`
	// WorkerRetention: OFFLINE workers are deleted this long after they
	// were last heard (0 keeps them).
	WorkerRetention time.Duration `env:"KAGZI_WORKER_RETENTION, default=24h"`
	// RetentionBatch is the most expired runs one transaction of the
	// retention cleanup deletes.
	RetentionBatch int `env:"KAGZI_RETENTION_BATCH, default=1000"`
	// RetentionPause is the least time between two batches of a backlog
	// of expired runs.
	RetentionPause time.Duration `env:"KAGZI_RETENTION_PAUSE, default=100ms"`
}

// Validate checks the values; config.Load calls it.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := c.Database.Validate(); err != nil {
		return err
	}
	if err := c.Lease.Validate(); err != nil {
		return err
	}
	switch {
	case c.WorkerTimeout < 100*time.Millisecond || c.WorkerTimeout > time.Hour:
		return fmt.Errorf("KAGZI_WORKER_TIMEOUT %v: 100ms to 1h", c.WorkerTimeout)
	case c.FlushInterval <= 0 || c.FlushInterval > c.Lease.Duration/3:
		return fmt.Errorf("KAGZI_FLUSH_INTERVAL %v: positive, at most a third of KAGZI_LEASE (%v)", c.FlushInterval, c.Lease.Duration)
	case c.LeaseGrace < 2*c.FlushInterval || c.LeaseGrace >= c.Lease.Duration:
		return fmt.Errorf("KAGZI_LEASE_GRACE %v: at least twice KAGZI_FLUSH_INTERVAL (%v), less than KAGZI_LEASE (%v)",
			c.LeaseGrace, c.FlushInterval, c.Lease.Duration)
	case c.BeaconInterval < 10*time.Millisecond || c.BeaconInterval > protocol.MaxBeaconInterval:
		return fmt.Errorf("KAGZI_BEACON_INTERVAL %v: 10ms to %v", c.BeaconInterval, protocol.MaxBeaconInterval)
	case c.WorkerRetention < 0 || c.WorkerRetention > store.MaxKeep:
		return fmt.Errorf("KAGZI_WORKER_RETENTION %v: 0 (keep) to %v", c.WorkerRetention, store.MaxKeep)
	case c.RetentionBatch < 1 || c.RetentionBatch > store.MaxDeleteBatch:
		return fmt.Errorf("KAGZI_RETENTION_BATCH %d: 1 to %d", c.RetentionBatch, store.MaxDeleteBatch)
	case c.RetentionPause < time.Millisecond || c.RetentionPause > time.Minute:
		return fmt.Errorf("KAGZI_RETENTION_PAUSE %v: 1ms to 1m", c.RetentionPause)
	}
	return nil
}
