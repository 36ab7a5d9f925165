package store

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// RunStatus is the state of a workflow run or schedule template.
type RunStatus string

// Run statuses. SCHEDULED and PAUSED belong to schedule templates only.
const (
	StatusPending   RunStatus = "PENDING"
	StatusRunning   RunStatus = "RUNNING"
	StatusSleeping  RunStatus = "SLEEPING"
	StatusCompleted RunStatus = "COMPLETED"
	StatusFailed    RunStatus = "FAILED"
	StatusCancelled RunStatus = "CANCELLED"
	StatusScheduled RunStatus = "SCHEDULED"
	StatusPaused    RunStatus = "PAUSED"
)

// Terminal reports whether a run in this status will never change again
// (short of an explicit retry of a failed run).
func (s RunStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is a known status.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusSleeping, StatusCompleted, StatusFailed,
		StatusCancelled, StatusScheduled, StatusPaused:
		return true
	}
	return false
}

// TypeVersion names a workflow type at a version, as a worker registers it.
type TypeVersion struct {
	Type    string `json:"type"`
	Version string `json:"version"`
}

// Run is a workflow run or a schedule template (Status SCHEDULED/PAUSED).
// Nullable columns are pointers.
type Run struct {
	ID         uuid.UUID
	Namespace  string
	ExternalID string
	Queue      string
	Type       string
	Version    string
	Status     RunStatus
	// Attempts counts the run's attempts, against its policy's max
	// attempts: the first claim makes it 1, and every retry adds one — of
	// a failed workflow, or of an execution lost with its worker or lease.
	Attempts int
	// Epoch is the run's retry epoch, from 1: it grows only when the
	// workflow's failure is retried. Steps' retry budgets and final
	// failures hold within an epoch, so a crash does not change them.
	Epoch          int
	AvailableAt    *time.Time
	LockedBy       *uuid.UUID
	LeaseToken     int64
	LeaseExpiresAt *time.Time
	Error          string
	CreatedAt      time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	DeadlineAt     *time.Time
	RetryPolicy    *retry.Policy
	ParentRunID    *uuid.UUID
	ParentStepID   string
	CronExpr       string
	Timezone       string
	MaxCatchup     int
	LastFiredAt    *time.Time
	ScheduleID     *uuid.UUID
	ScheduleFireAt *time.Time
	TraceContext   string
	Priority       int
	// CancelRequestedAt is when cancellation was asked for (RunsCancel):
	// the workflow's context is cancelled and it ends CANCELLED if it
	// returns an error.
	CancelRequestedAt *time.Time
	// ParentClosePolicy, for a child run, says what happens to it when its
	// parent ends ("" is TERMINATE).
	ParentClosePolicy ParentClosePolicy
	// ContinuedAs is the run this one continued as (RunsContinueAsNew);
	// filled by RunsGet only.
	ContinuedAs *uuid.UUID
	// DebounceKey is the key of a debounced run and DebounceStarts the
	// number of starts it took in (RunsCreateParams.Debounce); filled by
	// RunsGet only.
	DebounceKey    string
	DebounceStarts int
	// ConcurrencyKey and RateLimitKey are the run's flow control keys
	// (RunsCreateParams), "" for none; filled by RunsGet only.
	ConcurrencyKey string
	RateLimitKey   string

	// Input and Output are filled by the methods that say so (RunsGet,
	// RunsClaim); list methods leave them nil to keep rows narrow.
	Input  []byte
	Output []byte
}

// Policy is the run's retry policy with defaults applied.
func (r *Run) Policy() retry.Policy {
	if r.RetryPolicy == nil {
		return retry.Default()
	}
	return r.RetryPolicy.WithDefaults()
}

// ParentClosePolicy says what happens to a live child run when its parent
// reaches a terminal status.
type ParentClosePolicy string

// Parent-close policies.
const (
	// ParentCloseTerminate ends the child at once (the default).
	ParentCloseTerminate ParentClosePolicy = "TERMINATE"
	// ParentCloseRequestCancel asks the child to cancel (RunsCancel).
	ParentCloseRequestCancel ParentClosePolicy = "REQUEST_CANCEL"
	// ParentCloseAbandon leaves the child running.
	ParentCloseAbandon ParentClosePolicy = "ABANDON"
)

// Valid reports whether p is a known policy ("" is the default).
func (p ParentClosePolicy) Valid() bool {
	switch p {
	case "", ParentCloseTerminate, ParentCloseRequestCancel, ParentCloseAbandon:
		return true
	}
	return false
}

// StepKind is what a step records.
type StepKind string

// Step kinds.
const (
	StepFunction StepKind = "FUNCTION"
	StepSleep    StepKind = "SLEEP"
	StepEvent    StepKind = "EVENT"
	StepChild    StepKind = "CHILD"
)

// Valid reports whether k is a known step kind.
func (k StepKind) Valid() bool {
	switch k {
	case StepFunction, StepSleep, StepEvent, StepChild:
		return true
	}
	return false
}

// StepStatus is the state of one step attempt.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "PENDING"
	StepRunning   StepStatus = "RUNNING"
	StepCompleted StepStatus = "COMPLETED"
	StepFailed    StepStatus = "FAILED"
)

// Step is one attempt of one step of a run.
type Step struct {
	RunID      uuid.UUID
	StepID     string
	Attempt    int
	Namespace  string
	Kind       StepKind
	Status     StepStatus
	IsLatest   bool
	Input      []byte
	Output     []byte
	Error      string
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	RetryAt    *time.Time
	ChildRunID *uuid.UUID
	// RunAttempt is the run attempt that made this step attempt (0 when it
	// belongs to an earlier retry epoch: see RunsRetry).
	RunAttempt int
	// ErrorType names the kind of error of a failed attempt.
	ErrorType string
	// NonRetryable: the failed attempt's error was marked non-retryable.
	NonRetryable bool
}

// StepState is the latest attempt of a step as delivered with a claimed
// run: enough for replay without a round trip per step.
type StepState struct {
	StepID    string
	Status    StepStatus
	Attempt   int
	Output    []byte
	Error     string
	ErrorType string
	// RetryAt is, for a failed attempt, when it is tried again (nil: the
	// failure is final); for a wait in progress (an EVENT step), when the
	// wait times out (nil: never).
	RetryAt *time.Time
	// RunAttempt is the run attempt that made this attempt (0: an earlier
	// retry epoch, see RunsRetry).
	RunAttempt int
	// Tries is, for a failed attempt, how many attempts of the step were
	// made in run attempt RunAttempt: the part of the step's retry budget
	// used so far.
	Tries int
	// OutputSize is set, and Output nil, when the output is larger than
	// the claim returns inline (RunsClaimParams.InlineBytes).
	OutputSize int
	// NonRetryable: the failed attempt's error was marked non-retryable.
	NonRetryable bool
}

// ClaimedRun is a run handed to a worker by RunsClaim.
type ClaimedRun struct {
	Run
	// DueAt is when the run became claimable (its available_at before the
	// claim): dispatch latency is measured from it.
	DueAt time.Time
	// Steps are the latest attempts of the run's steps, by step id.
	Steps []StepState
	// InputSize is set, and Input nil, when the input is larger than the
	// claim returns inline (RunsClaimParams.InlineBytes).
	InputSize int
	// EventSeq is the run's event count as claimed: an event stored while
	// the run is RUNNING is counted and stamped with the new count, so the
	// events stamped after EventSeq arrived during this execution. Its end
	// names it (EventsSeen.Seq).
	EventSeq int64
}
