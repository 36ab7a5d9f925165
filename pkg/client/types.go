package client

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// The errors the client returns wrap one of these (test with errors.Is);
// they are the engine's own, so an application never imports its data
// layer to test for them.
var (
	// ErrNotFound: the run, schedule, limit or worker does not exist in
	// the client's namespace.
	ErrNotFound = store.ErrNotFound
	// ErrConflict: the request conflicts with the current state (e.g.
	// cancelling a finished run, sending an event to a finished run).
	ErrConflict = store.ErrConflict
	// ErrInvalidArgument: the request is malformed; the message names the
	// field.
	ErrInvalidArgument = store.ErrInvalidArgument
	// ErrPayloadTooLarge: an input or event payload exceeds the
	// namespace's payload limit.
	ErrPayloadTooLarge = store.ErrPayloadTooLarge
)

// RunStatus is the status of a run (or of a schedule: StatusScheduled,
// StatusPaused). The values are the engine's, as the CLI and the console
// print them.
type RunStatus string

// Run statuses.
const (
	StatusPending   RunStatus = "PENDING"
	StatusRunning   RunStatus = "RUNNING"
	StatusSleeping  RunStatus = "SLEEPING"
	StatusCompleted RunStatus = "COMPLETED"
	StatusFailed    RunStatus = "FAILED"
	StatusCancelled RunStatus = "CANCELLED"
)

// Terminal reports whether a run in this status will never change again
// (short of an explicit retry of a failed run).
func (s RunStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is a known run or schedule status.
func (s RunStatus) Valid() bool { return store.RunStatus(s).Valid() }

func runStatusesTo(ss []RunStatus) []store.RunStatus {
	if ss == nil {
		return nil
	}
	out := make([]store.RunStatus, len(ss))
	for i, s := range ss {
		out[i] = store.RunStatus(s)
	}
	return out
}

// Run is a workflow run as the client shows it.
type Run struct {
	ID         uuid.UUID
	Namespace  string
	ExternalID string
	Queue      string
	Type       string
	Version    string
	Status     RunStatus
	// Attempts counts the run's attempts against its retry policy.
	Attempts int
	// AvailableAt is when a PENDING or SLEEPING run is next due (nil while
	// it waits for an event or children only, or is finished).
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
	// CancelRequestedAt is when cancellation was asked for.
	CancelRequestedAt *time.Time
	// ContinuedAs is the run this one continued as (workflow.ContinueAsNew):
	// it ended COMPLETED without output and its work goes on there.
	ContinuedAs *uuid.UUID
	// ForkedFrom is the run this one was forked from (Client.Fork), at
	// step ForkedAtStep ("" from the start); Forks are the forks made
	// from this run, oldest first. Filled by Get only.
	ForkedFrom   *uuid.UUID
	ForkedAtStep string
	Forks        []ForkRef
	// DebounceKey is a debounced run's key (StartOptions.Debounce) and
	// DebounceStarts the number of starts it took in, its first included.
	// Filled by Get only.
	DebounceKey    string
	DebounceStarts int
	// ConcurrencyKey and RateLimitKey are the keys the run was started
	// with (StartOptions), "" for none. Filled by Get only.
	ConcurrencyKey string
	RateLimitKey   string
	// Input and Output (JSON) are filled by Get and Wait; List leaves them
	// nil.
	Input  []byte
	Output []byte
}

func runFrom(r store.Run) Run {
	return Run{ID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: RunStatus(r.Status), Attempts: r.Attempts, AvailableAt: r.AvailableAt, Error: r.Error, CreatedAt: r.CreatedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, DeadlineAt: r.DeadlineAt, RetryPolicy: r.RetryPolicy,
		Priority: r.Priority, ParentRunID: r.ParentRunID, ParentStepID: r.ParentStepID, ScheduleID: r.ScheduleID, ScheduleFireAt: r.ScheduleFireAt,
		CancelRequestedAt: r.CancelRequestedAt, ContinuedAs: r.ContinuedAs, Input: r.Input, Output: r.Output,
		DebounceKey: r.DebounceKey, DebounceStarts: r.DebounceStarts, ConcurrencyKey: r.ConcurrencyKey, RateLimitKey: r.RateLimitKey}
}

// SentEvent is an event stored for a run, and what it did to the run.
type SentEvent struct {
	ID        uuid.UUID
	RunID     uuid.UUID
	Name      string
	Payload   []byte
	CreatedAt time.Time
	// RunStatus and Queue are the run's, as the event found it.
	RunStatus RunStatus
	Queue     string
	// Woken reports that the run was waiting for this event and is now
	// claimable at once.
	Woken bool
}

// ConcurrencyLimit caps the RUNNING runs of a workflow type in a queue.
type ConcurrencyLimit struct {
	Queue string
	Type  string
	// MaxRunning caps the type's RUNNING runs; NoLimit when the type has
	// only a per-key limit.
	MaxRunning int
	// MaxPerKey caps the RUNNING runs per concurrency key
	// (SetKeyConcurrencyLimit); 0 when there is none.
	MaxPerKey int
	UpdatedAt time.Time
}

func limitFrom(l store.ConcurrencyLimit) ConcurrencyLimit {
	return ConcurrencyLimit{Queue: l.Queue, Type: l.Type, MaxRunning: l.MaxRunning, MaxPerKey: l.MaxPerKey, UpdatedAt: l.UpdatedAt}
}

// WorkerStatus is a worker's liveness status.
type WorkerStatus string

// Worker statuses.
const (
	WorkerOnline   WorkerStatus = "ONLINE"
	WorkerDraining WorkerStatus = "DRAINING"
	WorkerOffline  WorkerStatus = "OFFLINE"
)

// Worker is a worker process as the engine knows it.
type Worker struct {
	ID       uuid.UUID
	Queue    string
	Hostname string
	PID      int
	Status   WorkerStatus
	// Types are the workflow types it serves, as "type" or "type@version".
	Types           []string
	MaxConcurrency  int
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
}

func workerFrom(w store.Worker) Worker {
	out := Worker{ID: w.ID, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID, Status: WorkerStatus(w.Status),
		MaxConcurrency: w.MaxConcurrency, RegisteredAt: w.RegisteredAt, LastHeartbeatAt: w.LastHeartbeatAt}
	for _, tv := range w.Types {
		s := tv.Type
		if tv.Version != "" {
			s += "@" + tv.Version
		}
		out.Types = append(out.Types, s)
	}
	return out
}
