package protocol

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Version is the protocol version every message carries in its "v" field.
// A decoder rejects any other version.
const Version = 1

// Prefix starts every Kagzi subject; the version in it lets two protocol
// versions share one NATS cluster during an upgrade.
const Prefix = "kagzi.v1."

// Subject roots and fixed subjects.
const (
	// SubjectReadyAll matches every Wakeup (dispatchers subscribe to it).
	SubjectReadyAll = Prefix + "ready.>"
	// SubjectDoneAll matches every RunFinished.
	SubjectDoneAll = Prefix + "done.>"
	// SubjectScheduleAll matches every ScheduleChanged (schedulers subscribe).
	SubjectScheduleAll = Prefix + "schedule.>"
	// SubjectWorkAll matches every WorkRequest (dispatchers, queue group).
	SubjectWorkAll = Prefix + "work.>"
	// SubjectReportAll matches every Report (dispatchers, queue group).
	SubjectReportAll = Prefix + "report.>"
	// SubjectPayloadAll matches every PayloadRequest (dispatchers, queue
	// group).
	SubjectPayloadAll = Prefix + "payload.>"
	// SubjectRelayUp announces a relay that (re)started listening: every
	// consumer reads its backlog from Postgres again, since notifications
	// sent while no relay listened are gone.
	SubjectRelayUp = Prefix + "relay.up"
	// SubjectDispatcherBeacon carries every dispatcher's DispatcherBeacon:
	// workers watch it to renew a work request that a dispatcher which
	// went away may have held.
	SubjectDispatcherBeacon = Prefix + "dispatcher.beacon"
	// SubjectDispatcherProbe carries DispatcherProbe: a worker that starts
	// or reconnects asks every dispatcher for its beacon at once.
	SubjectDispatcherProbe = Prefix + "dispatcher.probe"
	// SubjectWorkerRegister, SubjectWorkerHeartbeat and
	// SubjectWorkerDeregister carry worker liveness to the reapers.
	SubjectWorkerRegister   = Prefix + "worker.register"
	SubjectWorkerHeartbeat  = Prefix + "worker.heartbeat"
	SubjectWorkerDeregister = Prefix + "worker.deregister"
)

// Queue groups: replicas in one group share the messages.
const (
	QueueDispatchers = "kagzi-dispatchers"
)

// ValidToken reports an error unless s can stand as one subject token:
// non-empty, at most MaxNameLen bytes, valid UTF-8, printable (unicode.IsPrint),
// without '.', '*', '>', '@' or spaces.
// Namespaces and queues are validated with it at every edge.
func ValidToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is required", what)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s is %d bytes, at most %d", what, len(s), MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if r <= ' ' || !unicode.IsPrint(r) || strings.ContainsRune(".*>@", r) {
			return fmt.Errorf("%s %q must not contain spaces, control characters or any of . * > @", what, s)
		}
	}
	return nil
}

// SubjectReady is where wakeups for one queue are published.
func SubjectReady(namespace, queue string) string {
	return Prefix + "ready." + namespace + "." + queue
}

// SubjectDone is where the end of one run is published.
func SubjectDone(namespace string, runID uuid.UUID) string {
	return Prefix + "done." + namespace + "." + runID.String()
}

// SubjectCancel is where cancellations for one worker's runs go.
func SubjectCancel(workerID uuid.UUID) string {
	return Prefix + "cancel." + workerID.String()
}

// SubjectSchedule is where changes to a namespace's schedules go.
func SubjectSchedule(namespace string) string {
	return Prefix + "schedule." + namespace
}

// SubjectWork is where workers ask for runs of one queue.
func SubjectWork(namespace, queue string) string {
	return Prefix + "work." + namespace + "." + queue
}

// SubjectReport is where workers report outcomes in a namespace.
func SubjectReport(namespace string) string {
	return Prefix + "report." + namespace
}

// SubjectPayload is where workers of a namespace ask for payloads that a
// delivery or a report reply did not carry inline.
func SubjectPayload(namespace string) string {
	return Prefix + "payload." + namespace
}

// ParseReady splits a ready subject into namespace and queue.
func ParseReady(subject string) (namespace, queue string, err error) {
	return parse2(subject, "ready.")
}

// ParseWork splits a work subject into namespace and queue.
func ParseWork(subject string) (namespace, queue string, err error) {
	return parse2(subject, "work.")
}

func parse2(subject, root string) (string, string, error) {
	rest, ok := strings.CutPrefix(subject, Prefix+root)
	if !ok {
		return "", "", fmt.Errorf("%w: subject %q is not under %s", ErrInvalid, subject, Prefix+root)
	}
	a, b, ok := strings.Cut(rest, ".")
	if !ok || a == "" || b == "" || strings.Contains(b, ".") {
		return "", "", fmt.Errorf("%w: subject %q needs <namespace>.<queue>", ErrInvalid, subject)
	}
	if err := ValidToken("namespace", a); err != nil {
		return "", "", fmt.Errorf("%w: subject %q: %v", ErrInvalid, subject, err)
	}
	if err := ValidToken("queue", b); err != nil {
		return "", "", fmt.Errorf("%w: subject %q: %v", ErrInvalid, subject, err)
	}
	return a, b, nil
}

// SubjectModelSignal is where the workflows of one model-test driver
// (internal/modeltest, `kagzi chaos --model`) tell it they reached an
// event's point: driver is the driver's random id. It is not a subject of
// the engine; it lives here with every other subject.
func SubjectModelSignal(driver string) string {
	return Prefix + "modeltest." + driver
}
