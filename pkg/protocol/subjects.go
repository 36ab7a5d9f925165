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
	// SubjectBatchAll matches every BatchChanged (reapers subscribe).
	SubjectBatchAll = Prefix + "batch.>"
	// SubjectEventAll matches every EventPublished (reapers subscribe).
	SubjectEventAll = Prefix + "event.>"
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
	// SubjectWorkerRegisterAll, SubjectWorkerHeartbeatAll and
	// SubjectWorkerDeregisterAll match worker liveness of every namespace
	// (reapers subscribe to them); see SubjectWorkerRegister.
	SubjectWorkerRegisterAll   = Prefix + "worker.register.*"
	SubjectWorkerHeartbeatAll  = Prefix + "worker.heartbeat.*"
	SubjectWorkerDeregisterAll = Prefix + "worker.deregister.*"
	// SubjectCancelAll matches every Cancel.
	SubjectCancelAll = Prefix + "cancel.>"
	// SubjectInboxAll matches every inbox of Kagzi's processes (see
	// WorkerInbox): dispatchers publish deliveries and replies there.
	SubjectInboxAll = Prefix + "inbox.>"
	// SubjectDirectAll matches every message addressed to one dispatcher
	// (SubjectDirect).
	SubjectDirectAll = Prefix + "direct.>"
	// SubjectDirectWorkAll matches every WorkRequest addressed to one
	// dispatcher: the reaper watches them as it watches SubjectWorkAll.
	SubjectDirectWorkAll = Prefix + "direct.*.work.>"
)

// Addressing one dispatcher. A worker's work requests, reports and payload
// requests go to the dispatchers' queue group (SubjectWork, SubjectReport,
// SubjectPayload), where NATS picks the member. NATS keeps a frozen
// member (SIGSTOP, a paused VM) in the group until the server's pings
// evict it, minutes with nats-server's defaults, so it would go on picking
// a dispatcher that answers nothing. A worker therefore addresses a
// dispatcher it hears beacons from, by its id (DispatcherBeacon.Direct),
// and when that one falls silent or does not answer in time, sends again
// to another: the same message on the same subject with
// "direct.<dispatcher id>." after the prefix. The fenced lease keeps this
// safe: what a frozen dispatcher did before its freeze is refused after it.

// SubjectDirect is group, a subject of the dispatchers' queue group
// (SubjectWork, SubjectReport, SubjectPayload), addressed to the one
// dispatcher with id dispatcher.
func SubjectDirect(dispatcher uuid.UUID, group string) string {
	return subjectDirect(dispatcher.String(), group)
}

// SubjectDirectAny matches group (a subject of the dispatchers' queue
// group) addressed to any dispatcher, for permissions and observers.
func SubjectDirectAny(group string) string {
	return subjectDirect("*", group)
}

func subjectDirect(dispatcher, group string) string {
	return Prefix + "direct." + dispatcher + "." + strings.TrimPrefix(group, Prefix)
}

// SubjectDirectTo matches every message addressed to dispatcher: it
// subscribes to it besides its queue group.
func SubjectDirectTo(dispatcher uuid.UUID) string {
	return Prefix + "direct." + dispatcher.String() + ".>"
}

// Undirect returns the queue-group subject a direct subject (SubjectDirect)
// was made from, with the dispatcher it was addressed to; ok is false for
// a subject that is not direct, returned as it is.
func Undirect(subject string) (group string, dispatcher uuid.UUID, ok bool) {
	rest, found := strings.CutPrefix(subject, Prefix+"direct.")
	if !found {
		return subject, uuid.Nil, false
	}
	id, tail, found := strings.Cut(rest, ".")
	if !found {
		return subject, uuid.Nil, false
	}
	d, err := uuid.Parse(id)
	if err != nil || tail == "" {
		return subject, uuid.Nil, false
	}
	return Prefix + tail, d, true
}

// Kinds of worker liveness messages, the token after "worker." in their
// subjects.
const (
	WorkerRegisterKind   = "register"
	WorkerHeartbeatKind  = "heartbeat"
	WorkerDeregisterKind = "deregister"
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
		return fmt.Errorf("%s %q is not valid UTF-8", what, Echo(s))
	}
	for _, r := range s {
		if r <= ' ' || !unicode.IsPrint(r) || strings.ContainsRune(".*>@", r) {
			return fmt.Errorf("%s %q must not contain spaces, control characters or any of . * > @", what, Echo(s))
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

// SubjectCancel is where cancellations for the runs of one worker of a
// namespace go.
func SubjectCancel(namespace string, workerID uuid.UUID) string {
	return Prefix + "cancel." + namespace + "." + workerID.String()
}

// SubjectDoneNamespace matches the ends of every run of a namespace.
func SubjectDoneNamespace(namespace string) string {
	return Prefix + "done." + namespace + ".*"
}

// SubjectCancelNamespace matches the cancellations (and drain requests)
// of every worker of a namespace.
func SubjectCancelNamespace(namespace string) string {
	return Prefix + "cancel." + namespace + ".*"
}

// SubjectWorkerRegister, SubjectWorkerHeartbeat and SubjectWorkerDeregister
// carry the liveness of a namespace's workers to the reapers. The
// namespace is in the subject so that NATS permissions can keep one
// namespace's workers from speaking for another's.
func SubjectWorkerRegister(namespace string) string {
	return Prefix + "worker." + WorkerRegisterKind + "." + namespace
}

// SubjectWorkerHeartbeat: see SubjectWorkerRegister.
func SubjectWorkerHeartbeat(namespace string) string {
	return Prefix + "worker." + WorkerHeartbeatKind + "." + namespace
}

// SubjectWorkerDeregister: see SubjectWorkerRegister.
func SubjectWorkerDeregister(namespace string) string {
	return Prefix + "worker." + WorkerDeregisterKind + "." + namespace
}

// ParseWorker splits a worker liveness subject into its kind
// (WorkerRegisterKind, ...) and namespace.
func ParseWorker(subject string) (kind, namespace string, err error) {
	rest, ok := strings.CutPrefix(subject, Prefix+"worker.")
	if !ok {
		return "", "", fmt.Errorf("%w: subject %q is not under %sworker.", ErrInvalid, subject, Prefix)
	}
	kind, namespace, _ = strings.Cut(rest, ".")
	switch kind {
	case WorkerRegisterKind, WorkerHeartbeatKind, WorkerDeregisterKind:
	default:
		return "", "", fmt.Errorf("%w: subject %q: unknown worker message kind %q", ErrInvalid, subject, kind)
	}
	if err := ValidToken("namespace", namespace); err != nil {
		return "", "", fmt.Errorf("%w: subject %q: %v", ErrInvalid, subject, err)
	}
	return kind, namespace, nil
}

// Inboxes. Every process connects with an inbox prefix of its own
// (nats.CustomInboxPrefix): replies to it, and for a worker the
// deliveries of its runs, go to subjects under the prefix, so that NATS
// permissions can let only that process read them (the default "_INBOX."
// prefix is one any client allowed to subscribe there could read). The
// prefixes are under Prefix, so they carry the protocol version too.

// WorkerInbox is the inbox prefix of the workers of namespace that
// connect as identity: a NATS user of that worker identity may subscribe
// to it and to no other worker's (see Permissions). Replicas sharing one
// NATS user share one identity.
func WorkerInbox(namespace, identity string) string {
	return Prefix + "inbox.worker." + namespace + "." + identity
}

// ClientInbox is the inbox prefix of the clients of namespace (the SDK
// client and the CLI).
func ClientInbox(namespace string) string {
	return Prefix + "inbox.client." + namespace
}

// ServiceInbox is the inbox prefix of a service (RoleDispatcher,
// RoleScheduler, RoleReaper, RoleConsole).
func ServiceInbox(role string) string {
	return Prefix + "inbox." + role
}

// SubjectSchedule is where changes to a namespace's schedules go.
func SubjectSchedule(namespace string) string {
	return Prefix + "schedule." + namespace
}

// SubjectBatch is where a namespace's batches that start or resume
// running are announced.
func SubjectBatch(namespace string) string {
	return Prefix + "batch." + namespace
}

// SubjectEvent is where a namespace's published events are announced,
// for the reaper's leader to fan out to triggers.
func SubjectEvent(namespace string) string {
	return Prefix + "event." + namespace
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
// (tests/modeltest, `kagzi chaos --model`) tell it they reached an
// event's point: driver is the driver's random id. It is not a subject of
// the engine; it lives here with every other subject.
func SubjectModelSignal(driver string) string {
	return Prefix + "modeltest." + driver
}
