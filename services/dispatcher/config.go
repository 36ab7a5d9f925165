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
// (config.Load); every variable is documented in the README.
type Config struct {
	config.Common
	config.Database
	config.Lease
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
	// HopsDir, if set, is where the relay and the dispatcher append the
	// dispatch hops of every run (a diagnostic; see internal/hops).
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
