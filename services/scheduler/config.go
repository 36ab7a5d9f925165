package scheduler

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/internal/config"
)

// Config is the scheduler service's configuration, read from the environment
// (config.Load); every variable is documented in docs/configuration.md, generated
// from the KAGZI_* paragraphs of the fields' comments.
type Config struct {
	config.Common
	config.Database
	// SchedulerBatch is how many due schedules one statement reads.
	//
	// KAGZI_SCHEDULER_BATCH: most due schedules one statement reads (1 to 10000)
	SchedulerBatch int `env:"KAGZI_SCHEDULER_BATCH, default=100"`
	// SchedulerCatchUpWindow is how late a fire time may be fired and
	// still count as due; older due times are missed (see max_catchup).
	//
	// KAGZI_SCHEDULER_CATCHUP_WINDOW: how late a fire time may be fired and still
	// count as due, so an outage shorter than this loses no fire (at most 100 per
	// schedule at once, the most recent); older ones were missed and only
	// `max_catchup` of them fire (1s to 24h)
	SchedulerCatchUpWindow time.Duration `env:"KAGZI_SCHEDULER_CATCHUP_WINDOW, default=5m"`
}

// Validate checks the values; config.Load calls it.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := c.Database.Validate(); err != nil {
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
