package protocol

import (
	"time"

	"github.com/google/uuid"
)

// WorkerRegister announces a worker (again, after a restart or after it
// was marked offline).
type WorkerRegister struct {
	Versioned
	WorkerID       uuid.UUID         `json:"worker_id"`
	Namespace      string            `json:"ns"`
	Queue          string            `json:"queue"`
	Hostname       string            `json:"hostname,omitempty"`
	PID            int               `json:"pid,omitempty"`
	Version        string            `json:"version,omitempty"`
	Types          []TypeVersion     `json:"types"`
	MaxConcurrency int               `json:"max_concurrency"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// Validate implements Message.
func (m *WorkerRegister) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkToken(m, "queue", m.Queue); err != nil {
		return err
	}
	if m.MaxConcurrency < 1 || m.MaxConcurrency > MaxCredits {
		return invalid(m, "max concurrency %d must be 1 to %d", m.MaxConcurrency, MaxCredits)
	}
	if err := ValidWorkerIdentity(m.Hostname, m.Version, m.Labels); err != nil {
		return invalid(m, "%v", err)
	}
	return checkTypes(m, m.Types)
}

// Heartbeat says a worker is alive and lists the runs it holds.
type Heartbeat struct {
	Versioned
	WorkerID  uuid.UUID   `json:"worker_id"`
	Namespace string      `json:"ns"`
	Queue     string      `json:"queue"`
	Runs      []uuid.UUID `json:"runs,omitempty"`
	Draining  bool        `json:"draining,omitempty"`
	SentAt    time.Time   `json:"sent_at"`
}

// Validate implements Message.
func (m *Heartbeat) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkToken(m, "queue", m.Queue); err != nil {
		return err
	}
	if len(m.Runs) > MaxCredits {
		return invalid(m, "%d runs, at most %d", len(m.Runs), MaxCredits)
	}
	if m.SentAt.IsZero() {
		return invalid(m, "sent_at is required")
	}
	return nil
}

// WorkerDeregister says a worker stopped cleanly.
type WorkerDeregister struct {
	Versioned
	WorkerID  uuid.UUID `json:"worker_id"`
	Namespace string    `json:"ns"`
}

// Validate implements Message.
func (m *WorkerDeregister) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	return checkToken(m, "namespace", m.Namespace)
}
