package reaper

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Config is the reaper service's configuration, read from the environment
// (config.Load) or taken at its defaults (config.Defaults); every variable
// is documented in docs/configuration.md, generated from the KAGZI_*
// paragraphs of the fields' comments. New takes it as it is: the env tags are its
// only defaults and Validate its only check. A sweep's own variables are in
// the sub-struct it takes (LivenessConfig, RetentionConfig).
type Config struct {
	config.Common
	config.Database
	// Lease (KAGZI_LEASE) is what a live worker's runs' leases are
	// extended to, from its last heartbeat; it must not exceed the
	// dispatchers' lease (they share the variable).
	config.Lease
	LivenessConfig
	RetentionConfig
	// BeaconInterval is the time between the leader's beacons; a standby
	// takes over from a leader silent for three of them (package
	// leadership).
	BeaconInterval time.Duration `env:"KAGZI_BEACON_INTERVAL, default=1s"`
}

// LivenessConfig configures the liveness sweep (liveness.go).
type LivenessConfig struct {
	// WorkerTimeout: a worker not heard for this long is marked OFFLINE
	// and its runs are recovered (the default, three missed heartbeats at
	// the workers' default interval, starts recovery within 6 s of a
	// crash).
	//
	// KAGZI_WORKER_TIMEOUT: a worker not heard for this long is marked `OFFLINE`
	// and its runs are recovered at once (keep it a few heartbeat intervals;
	// 100ms to 1h)
	WorkerTimeout time.Duration `env:"KAGZI_WORKER_TIMEOUT, default=6s"`
	// FlushInterval batches the writes of heartbeats and lease extensions.
	//
	// KAGZI_FLUSH_INTERVAL: how often heartbeats and lease extensions are
	// written, two statements per flush for all workers (at most a third of
	// `KAGZI_LEASE`)
	FlushInterval time.Duration `env:"KAGZI_FLUSH_INTERVAL, default=2s"`
	// LeaseGrace: a run locked to a live worker that does not list it is
	// released once its lease was last set this long before (at least
	// twice FlushInterval, so a run whose completion report is in flight
	// is never released).
	//
	// KAGZI_LEASE_GRACE: a run locked to a live worker that its heartbeats do not
	// list is released once its lease was last set this long ago (at least twice
	// `KAGZI_FLUSH_INTERVAL`, less than `KAGZI_LEASE`)
	LeaseGrace time.Duration `env:"KAGZI_LEASE_GRACE, default=10s"`
	// WorkerRetention: OFFLINE workers are deleted this long after they
	// were last heard (0 keeps them).
	//
	// KAGZI_WORKER_RETENTION: `OFFLINE` workers are deleted this long after they
	// were last heard (`0` keeps them; at most 36500d)
	WorkerRetention time.Duration `env:"KAGZI_WORKER_RETENTION, default=24h"`
}

// RetentionConfig configures the retention sweep (retention.go). How long
// runs are kept is the database's (store.RetentionSet).
type RetentionConfig struct {
	// RetentionBatch is the most expired runs one transaction of the
	// retention cleanup deletes: with their steps, payloads and events
	// some thousands of rows, tens of milliseconds of a transaction that
	// locks nothing the hot path uses (finished runs only).
	//
	// KAGZI_RETENTION_BATCH: most expired runs one transaction of the retention
	// cleanup deletes, each with its steps, payloads and events (1 to 10000); how
	// long runs are kept is the database's (`kagzi retention`)
	RetentionBatch int `env:"KAGZI_RETENTION_BATCH, default=1000"`
	// RetentionPause is the least time between two batches of a backlog
	// of expired runs; a batch that took longer is followed by a pause as
	// long as it took.
	//
	// KAGZI_RETENTION_PAUSE: least time between two batches of a backlog of
	// expired runs; a batch that took longer is followed by a pause as long (1ms
	// to 1m)
	RetentionPause time.Duration `env:"KAGZI_RETENTION_PAUSE, default=100ms"`
	// EventRetention: published events fanned out (or given up) are
	// deleted this long after they were published, with their trigger
	// firings and webhook deliveries; wait tokens this long after they
	// were used or expired. A webhook delivery's row is what refuses its
	// replay, hence the least value above the signatures' tolerance.
	//
	// KAGZI_EVENT_RETENTION: published events (with their trigger firings and
	// webhook deliveries) are deleted this long after they were published, once
	// fanned out, and wait tokens this long after they were used or expired (`0`
	// keeps them; else 2h to 36500d: a GitHub delivery's replay is refused only
	// while its row exists)
	EventRetention time.Duration `env:"KAGZI_EVENT_RETENTION, default=720h"`
}

// Validate checks the values; config.Load and config.Defaults call it.
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
	if err := c.LivenessConfig.validate(c.Lease.Duration); err != nil {
		return err
	}
	if c.BeaconInterval < 10*time.Millisecond || c.BeaconInterval > protocol.MaxBeaconInterval {
		return fmt.Errorf("KAGZI_BEACON_INTERVAL %v: 10ms to %v", c.BeaconInterval, protocol.MaxBeaconInterval)
	}
	return c.RetentionConfig.validate()
}

// validate checks the liveness variables against the lease.
func (c *LivenessConfig) validate(lease time.Duration) error {
	switch {
	case c.WorkerTimeout < 100*time.Millisecond || c.WorkerTimeout > time.Hour:
		return fmt.Errorf("KAGZI_WORKER_TIMEOUT %v: 100ms to 1h", c.WorkerTimeout)
	case c.FlushInterval <= 0 || c.FlushInterval > lease/3:
		return fmt.Errorf("KAGZI_FLUSH_INTERVAL %v: positive, at most a third of KAGZI_LEASE (%v)", c.FlushInterval, lease)
	case c.LeaseGrace < 2*c.FlushInterval || c.LeaseGrace >= lease:
		return fmt.Errorf("KAGZI_LEASE_GRACE %v: at least twice KAGZI_FLUSH_INTERVAL (%v), less than KAGZI_LEASE (%v)",
			c.LeaseGrace, c.FlushInterval, lease)
	case c.WorkerRetention < 0 || c.WorkerRetention > store.MaxKeep:
		return fmt.Errorf("KAGZI_WORKER_RETENTION %v: 0 (keep) to %v", c.WorkerRetention, store.MaxKeep)
	}
	return nil
}

// validate checks the retention variables.
func (c *RetentionConfig) validate() error {
	switch {
	case c.RetentionBatch < 1 || c.RetentionBatch > store.MaxDeleteBatch:
		return fmt.Errorf("KAGZI_RETENTION_BATCH %d: 1 to %d", c.RetentionBatch, store.MaxDeleteBatch)
	case c.RetentionPause < time.Millisecond || c.RetentionPause > time.Minute:
		return fmt.Errorf("KAGZI_RETENTION_PAUSE %v: 1ms to 1m", c.RetentionPause)
	case store.CheckKeepEvents(c.EventRetention) != nil:
		return fmt.Errorf("KAGZI_EVENT_RETENTION %v: 0 (keep) or %v to %v", c.EventRetention, store.MinKeepEvents, store.MaxKeep)
	}
	return nil
}
