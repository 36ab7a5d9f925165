package protocol

import "github.com/google/uuid"

// A worker's registration (WorkerRegister) is what its row in the
// database says: its types, slots, host and pid. Heartbeats carry none of
// it, so that they stay small; a reaper that hears a worker's heartbeats
// but not its registration (it started after the worker, or the
// registration was lost) knows the worker without its types, and a start
// that requires a worker of a type would be refused while that worker
// serves it. Two messages close the gap, both from the acting reaper:
//
//   - RegistrationNotice on SubjectRegistration, to one worker: it
//     acknowledges a registration once it is written, or asks the worker
//     to register when the reaper knows it only from its heartbeats (or
//     its row from them). A worker repeats its registration, with a
//     bounded backoff, until one is acknowledged.
//   - ReaperUp on SubjectReaperUp, to every worker: a reaper became the
//     acting one (or its NATS connection came back): a worker whose
//     registration is not acknowledged registers at once.
//
// Both are new subjects, not new fields of the liveness messages, which
// are decoded strictly: a reaper of an earlier version would drop a
// registration carrying a field it does not know. A worker of an earlier
// version never hears them and repeats its registration as it did; one
// of this version beside an earlier reaper is never acknowledged and
// repeats its registration at the backoff's bound.

// Subjects of registration.
const (
	// SubjectReaperUp carries ReaperUp to every worker.
	SubjectReaperUp = Prefix + "reaper.up"
	// SubjectRegistrationAll matches every RegistrationNotice (the reaper
	// publishes them).
	SubjectRegistrationAll = Prefix + "registration.>"
)

// SubjectRegistration is where the acting reaper tells one worker of a
// namespace about its registration (RegistrationNotice).
func SubjectRegistration(namespace string, workerID uuid.UUID) string {
	return Prefix + "registration." + namespace + "." + workerID.String()
}

// SubjectRegistrationNamespace matches the registration notices of every
// worker of a namespace.
func SubjectRegistrationNamespace(namespace string) string {
	return Prefix + "registration." + namespace + ".*"
}

// RegistrationNotice is the acting reaper's word to one worker about its
// registration. Without Ask it acknowledges that the worker's
// registration is written: the worker stops repeating it. With Ask, the
// reaper asks the worker to register: it knows the worker only from its
// heartbeats, or the worker's row says no more than they do.
type RegistrationNotice struct {
	Versioned
	Namespace string    `json:"ns"`
	WorkerID  uuid.UUID `json:"worker_id"`
	Ask       bool      `json:"ask,omitempty"`
}

// Validate implements Message.
func (m *RegistrationNotice) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkID(m, "worker id", m.WorkerID)
}

// ReaperUp announces a reaper that became the acting one, or whose NATS
// connection came back while it acts: registrations sent before may have
// reached no reaper that writes them. A worker whose registration is not
// acknowledged registers again at once.
type ReaperUp struct {
	Versioned
	// ReaperID is the announcing replica's id, fresh for each process.
	ReaperID uuid.UUID `json:"reaper_id"`
}

// Validate implements Message.
func (m *ReaperUp) Validate() error {
	return checkID(m, "reaper id", m.ReaperID)
}
