package protocol

import (
	"time"

	"github.com/google/uuid"
)

// Wakeup says runs of a queue are claimable at AvailableAt (now or later).
type Wakeup struct {
	Versioned
	Namespace   string    `json:"ns"`
	Queue       string    `json:"queue"`
	AvailableAt time.Time `json:"at"`
	// NotifiedNS and RelayedNS are when the relay received the NOTIFY and
	// published this wakeup, in unix nanoseconds; set only while the
	// dispatch-hop diagnostic is on (KAGZI_HOPS_DIR), absent otherwise.
	NotifiedNS int64 `json:"notified_ns,omitempty"`
	RelayedNS  int64 `json:"relayed_ns,omitempty"`
}

// Validate implements Message.
func (m *Wakeup) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkToken(m, "queue", m.Queue)
}

// RunFinished says a run reached a terminal status.
type RunFinished struct {
	Versioned
	Namespace string    `json:"ns"`
	RunID     uuid.UUID `json:"run_id"`
	Status    string    `json:"status"`
}

// Validate implements Message.
func (m *RunFinished) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	switch m.Status {
	case "COMPLETED", "FAILED", "CANCELLED":
		return nil
	}
	return invalid(m, "status %q is not terminal", m.Status)
}

// Cancel tells a worker that a run it holds was asked to cancel (its
// workflow context is cancelled; the lease holds, so the workflow may clean
// up and report), or, with Terminate, that it was terminated (the lease is
// void: abandon the run).
type Cancel struct {
	Versioned
	Namespace string    `json:"ns"`
	RunID     uuid.UUID `json:"run_id"`
	WorkerID  uuid.UUID `json:"worker_id"`
	Terminate bool      `json:"terminate,omitempty"`
	// Drain asks the worker itself to drain (as on its Stop: finish or
	// release its runs and deregister); RunID is then empty.
	Drain bool `json:"drain,omitempty"`
}

// Validate implements Message.
func (m *Cancel) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if m.Drain {
		if m.RunID != uuid.Nil || m.Terminate {
			return invalid(m, "a drain names no run")
		}
		return checkID(m, "worker id", m.WorkerID)
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	return checkID(m, "worker id", m.WorkerID)
}

// ScheduleChanged says a schedule template was created, changed or deleted.
type ScheduleChanged struct {
	Versioned
	Namespace  string     `json:"ns"`
	ScheduleID uuid.UUID  `json:"schedule_id"`
	NextAt     *time.Time `json:"next_at,omitempty"`
}

// Validate implements Message.
func (m *ScheduleChanged) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkID(m, "schedule id", m.ScheduleID)
}

// BatchChanged says a batch operation was created, changed state, or
// moved on by a percent of its runs.
type BatchChanged struct {
	Versioned
	Namespace string    `json:"ns"`
	BatchID   uuid.UUID `json:"batch_id"`
	// State is the batch's state: running, paused, cancelled, completed.
	State string `json:"state"`
	// Moved says the batch was created or changed state (reapers then
	// read the running batches again); else it made progress.
	Moved bool `json:"moved,omitempty"`
}

// Validate implements Message.
func (m *BatchChanged) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if m.State == "" || len(m.State) > MaxNameLen {
		return invalid(m, "state must be 1 to %d bytes", MaxNameLen)
	}
	return checkID(m, "batch id", m.BatchID)
}

// EventPublished says an event was published (docs/triggers.md): the
// reaper's leader fans it out to the triggers whose patterns match it.
type EventPublished struct {
	Versioned
	Namespace string    `json:"ns"`
	EventID   uuid.UUID `json:"event_id"`
}

// Validate implements Message.
func (m *EventPublished) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkID(m, "event id", m.EventID)
}

// RelayUp announces that a relay started listening.
type RelayUp struct {
	Versioned
	RelayID string    `json:"relay_id"`
	At      time.Time `json:"at"`
}

// Validate implements Message.
func (m *RelayUp) Validate() error {
	if m.RelayID == "" || len(m.RelayID) > MaxNameLen {
		return invalid(m, "relay id must be 1 to %d bytes", MaxNameLen)
	}
	return nil
}
