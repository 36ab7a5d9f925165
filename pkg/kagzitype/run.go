package kagzitype

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// RunStatus is the status of a run, or of a schedule (StatusScheduled,
// StatusPaused, held by its template row). The values are the engine's,
// as the database stores them and the CLI and the console print them.
type RunStatus string

// Run statuses. SCHEDULED and PAUSED belong to schedules only.
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

// Valid reports whether s is a known run or schedule status.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusSleeping, StatusCompleted, StatusFailed,
		StatusCancelled, StatusScheduled, StatusPaused:
		return true
	}
	return false
}

// Run is a workflow run, or a schedule's template row (Status SCHEDULED or
// PAUSED) as the store reads it. Nullable columns are pointers.
//
// The fields an application sees come first, in the order of their JSON
// encoding; the engine's own follow and are not encoded.
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
	// AvailableAt is when a PENDING or SLEEPING run is next due (nil while
	// it waits for an event or children only, or is finished); for a
	// schedule's template, its next fire time.
	AvailableAt *time.Time
	// Error is the last failure's message.
	Error       string
	CreatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	DeadlineAt  *time.Time
	RetryPolicy *retry.Policy
	Priority    int
	// ParentRunID and ParentStepID are set on a child run.
	ParentRunID  *uuid.UUID
	ParentStepID string
	// ScheduleID and ScheduleFireAt are set on a run fired by a schedule.
	ScheduleID     *uuid.UUID
	ScheduleFireAt *time.Time
	// CancelRequestedAt is when cancellation was asked for: the workflow's
	// context is cancelled and it ends CANCELLED if it returns an error.
	CancelRequestedAt *time.Time
	// ContinuedAs is the run this one continued as (continue-as-new): it
	// ended COMPLETED without output and its work goes on there. Filled
	// when a single run is read (the store's RunsGet, the client's Get).
	ContinuedAs *uuid.UUID
	// ForkedFrom is the run this one was forked from, at step
	// ForkedAtStep ("" from the start); Forks are the forks made from this
	// run, oldest first. Filled by the client's Get only: the store keeps
	// fork links apart (RunsForkLinks).
	ForkedFrom   *uuid.UUID
	ForkedAtStep string
	Forks        []ForkRef
	// DebounceKey is a debounced run's key and DebounceStarts the number
	// of starts it took in, its first included. Filled when a single run
	// is read.
	DebounceKey    string
	DebounceStarts int
	// ConcurrencyKey and RateLimitKey are the flow control keys the run
	// was started with, "" for none. Filled when a single run is read.
	ConcurrencyKey string
	RateLimitKey   string
	// Paused says who paused the run, why and when; nil for a run that is
	// not paused (a run that ends is no longer paused). Filled when a
	// single run is read.
	Paused *Pause
	// Input and Output (JSON) are filled when a single run is read, and
	// Input by a claim; lists leave them nil to keep rows narrow.
	Input  []byte
	Output []byte

	// Epoch is the run's retry epoch, from 1: it grows only when the
	// workflow's failure is retried. Steps' retry budgets and final
	// failures hold within an epoch, so a crash does not change them.
	// The engine's.
	Epoch int `json:"-"`
	// LockedBy, LeaseToken and LeaseExpiresAt are the lease of the worker
	// executing the run. The engine's.
	LockedBy       *uuid.UUID `json:"-"`
	LeaseToken     int64      `json:"-"`
	LeaseExpiresAt *time.Time `json:"-"`
	// CronExpr, Timezone, MaxCatchup and LastFiredAt are a schedule
	// template's columns (Schedule shows them). The engine's.
	CronExpr    string     `json:"-"`
	Timezone    string     `json:"-"`
	MaxCatchup  int        `json:"-"`
	LastFiredAt *time.Time `json:"-"`
	// TraceContext is the W3C traceparent of the run's trace. The
	// engine's.
	TraceContext string `json:"-"`
	// ParentClosePolicy, for a child run, says what happens to it when its
	// parent ends ("" is TERMINATE). The engine's.
	ParentClosePolicy ParentClosePolicy `json:"-"`
}

// Pause is who paused a run, a queue or a workflow type, why and when.
type Pause struct {
	By     string
	Reason string
	At     time.Time
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
	// ParentCloseRequestCancel asks the child to cancel.
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

// ForkRef is one fork of a run, as Run.Forks lists it.
type ForkRef struct {
	RunID uuid.UUID
	// Step is the step the fork executes again from ("" from the start).
	Step      string
	Status    RunStatus
	CreatedAt time.Time
}
