package dispatcher

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// MaxDeliveryTimeout bounds KAGZI_DELIVERY_TIMEOUT: runs delivered to a
// worker that does not acknowledge them wait this long to be released.
const MaxDeliveryTimeout = time.Minute

// Config is the dispatcher service's configuration, read from the environment
// (config.Load); every variable is documented in docs/configuration.md, generated
// from the KAGZI_* paragraphs of the fields' comments.
type Config struct {
	config.Common
	config.Database
	config.Lease
	// DeliveryTimeout bounds a worker's ack of a delivery.
	//
	// KAGZI_DELIVERY_TIMEOUT: wait for a worker to acknowledge a delivery before
	// releasing the runs (at most 1m)
	DeliveryTimeout time.Duration `env:"KAGZI_DELIVERY_TIMEOUT, default=5s"`
	// MaxClaim caps the runs one claim statement takes.
	//
	// KAGZI_MAX_CLAIM: most runs one claim statement takes
	MaxClaim int `env:"KAGZI_MAX_CLAIM, default=256"`
	// ReportWriters is the number of report transactions in flight.
	//
	// KAGZI_REPORT_WRITERS: report transactions in flight at once
	ReportWriters int `env:"KAGZI_REPORT_WRITERS, default=4"`
	// Relay enables the NOTIFY relay in this replica (one relays at a time).
	//
	// KAGZI_RELAY: take part in the relay election (one replica relays)
	Relay bool `env:"KAGZI_RELAY, default=true"`
	// BeaconInterval is the time between the dispatcher's liveness
	// beacons; workers renew their request when one misses three of them.
	//
	// KAGZI_BEACON_INTERVAL: time between the dispatcher's liveness beacons and
	// the relay's and reaper's leader beacons; a worker renews its work request
	// when a dispatcher it heard misses three of them, and a standby ends the
	// session of a leader that misses three and takes over (10ms to 1m)
	BeaconInterval time.Duration `env:"KAGZI_BEACON_INTERVAL, default=1s"`
	// HopsDir, if set, is where the relay and the dispatcher append the
	// dispatch hops of every run (a diagnostic; see internal/hops).
	//
	// KAGZI_HOPS_DIR: a diagnostic, off when unset: a directory where the relay,
	// the dispatcher and the worker append, per run, when it passed each hop of
	// its dispatch (NOTIFY received, wakeup published and received, claim sent
	// and returned, delivery published and received, execution begun), one file
	// per process; `kagzi bench --scenario latency --hops` sets it and joins the
	// files. Wakeups then carry the relay's two stamps, fields a dispatcher or
	// reaper of an earlier version refuses: set it only where every process runs
	// this version
	HopsDir string `env:"KAGZI_HOPS_DIR"`

	// hops is the recorder Run opened in HopsDir.
	hops *hops.Recorder
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
	case c.DeliveryTimeout <= 0 || c.DeliveryTimeout > MaxDeliveryTimeout:
		return fmt.Errorf("KAGZI_DELIVERY_TIMEOUT %v: positive, at most %v", c.DeliveryTimeout, MaxDeliveryTimeout)
	case c.MaxClaim < 1 || c.MaxClaim > 10000:
		return fmt.Errorf("KAGZI_MAX_CLAIM %d: 1 to 10000", c.MaxClaim)
	case c.ReportWriters < 1 || c.ReportWriters > 64:
		return fmt.Errorf("KAGZI_REPORT_WRITERS %d: 1 to 64", c.ReportWriters)
	case c.BeaconInterval < 10*time.Millisecond || c.BeaconInterval > protocol.MaxBeaconInterval:
		return fmt.Errorf("KAGZI_BEACON_INTERVAL %v: 10ms to %v", c.BeaconInterval, protocol.MaxBeaconInterval)
	}
	return nil
}
