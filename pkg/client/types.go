package client

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/kagzitype"
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

// The row types are kagzitype's: the client returns what the store read,
// not a copy, under the client's own names.
type (
	// RunStatus is the status of a run (or of a schedule: StatusScheduled,
	// StatusPaused). The values are the engine's, as the CLI and the
	// console print them.
	RunStatus = kagzitype.RunStatus
	// Run is a workflow run as the client shows it. Its fields after
	// Output are the engine's bookkeeping, left out of its JSON.
	Run = kagzitype.Run
	// ForkRef is one fork of a run, as Run.Forks lists it.
	ForkRef = kagzitype.ForkRef
	// Schedule is a cron schedule: a template that starts a run of its
	// workflow type, with its input, at every time of its cron
	// expression.
	Schedule = kagzitype.Schedule
	// OverlapPolicy says what a schedule does when a fire time comes while
	// a run it started (fired, triggered or backfilled) is still live:
	// pending, running or sleeping. The zero value is OverlapAllowAll.
	OverlapPolicy = kagzitype.OverlapPolicy
)

// Run statuses.
const (
	StatusPending   = kagzitype.StatusPending
	StatusRunning   = kagzitype.StatusRunning
	StatusSleeping  = kagzitype.StatusSleeping
	StatusCompleted = kagzitype.StatusCompleted
	StatusFailed    = kagzitype.StatusFailed
	StatusCancelled = kagzitype.StatusCancelled
)

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

// sentEvent is the client's form of an event the store sent.
func sentEvent(ev store.SentEvent) SentEvent {
	return SentEvent{ID: ev.ID, RunID: ev.RunID, Name: ev.Name, Payload: ev.Payload, CreatedAt: ev.CreatedAt,
		RunStatus: ev.RunStatus, Queue: ev.Queue, Woken: ev.Woken}
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

// nonNil keeps a list the client returns non-nil when empty, as a JSON
// array rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
