package kagzitype

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// Schedule is a cron schedule: a template row that starts a run of its
// workflow type, with its input, at every time of its cron expression.
type Schedule struct {
	ID        uuid.UUID
	Namespace string
	Queue     string
	Type      string
	Version   string
	Cron      string
	// Timezone is the IANA zone the cron expression is read in.
	Timezone string
	// Input is filled when a single schedule is read or created.
	Input      []byte
	MaxCatchup int
	// Status is StatusScheduled or StatusPaused.
	Status RunStatus
	// NextFireAt is the next fire time; nil while paused.
	NextFireAt  *time.Time
	LastFiredAt *time.Time
	CreatedAt   time.Time
	RetryPolicy *retry.Policy
	// Overlap is what a fire does while a run of the schedule is live.
	Overlap OverlapPolicy
	// Jitter delays each fire's run by up to this.
	Jitter time.Duration
	// BufferedFireAt is the fire time a buffer-one schedule holds until
	// its live run ends; nil when none.
	BufferedFireAt *time.Time
	// ConcurrencyKey and RateLimitKey are given to every run the schedule
	// starts; "" none.
	ConcurrencyKey, RateLimitKey string

	// HeldNextAt is the next fire time while the end of a live run made
	// the schedule due early to start a held fire: the scheduler's
	// catch-up goes on from it. The engine's.
	HeldNextAt *time.Time `json:"-"`
}

// OverlapPolicy says what a schedule does when a fire time comes while a
// run it started (fired, triggered or backfilled) is still live: pending,
// running or sleeping. The zero value is OverlapAllowAll.
type OverlapPolicy string

// The overlap policies.
const (
	// OverlapAllowAll starts every fire, however many runs are live: what
	// every schedule did before policies existed, and the default.
	OverlapAllowAll OverlapPolicy = "allow-all"
	// OverlapSkip starts nothing while a run is live.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapBufferOne holds one fire while a run is live and starts it
	// as soon as the last live run ends (the scheduler is told by the
	// run's end, not by polling); further fires while one is held are
	// dropped.
	OverlapBufferOne OverlapPolicy = "buffer-one"
	// OverlapCancelOther asks the live runs to cancel and starts the new
	// run at once.
	OverlapCancelOther OverlapPolicy = "cancel-other"
	// OverlapTerminateOther terminates the live runs and starts the new
	// run.
	OverlapTerminateOther OverlapPolicy = "terminate-other"
)
