package protocol

import "fmt"

// Roles of the processes that connect to NATS. Each has a fixed set of
// subjects it may publish to and subscribe to (Permissions), so that NATS
// can enforce the boundaries the design draws: a worker holds no database
// credentials, and with these permissions it cannot read or write what
// belongs to another namespace or another worker either.
const (
	// RoleDispatcher: claims and delivers runs, applies reports, relays
	// Postgres notifications.
	RoleDispatcher = "dispatcher"
	// RoleScheduler: fires schedules (reads schedule changes).
	RoleScheduler = "scheduler"
	// RoleReaper: worker liveness and recovery.
	RoleReaper = "reaper"
	// RoleWorker: runs the workflows of one namespace as one identity.
	RoleWorker = "worker"
	// RoleClient: an application (SDK client) or the CLI of one
	// namespace: it starts runs through Postgres, waits for their ends and
	// may ask the namespace's workers to drain.
	RoleClient = "client"
	// RoleConsole: reads the engine's notifications of every namespace to
	// show them; it publishes only a drain request to a worker (as a
	// client does; nothing, in read-only mode).
	RoleConsole = "console"
)

// Permission is what one role may do on NATS: subjects (with wildcards)
// it may publish to and subscribe to. Responses, when set, lets it
// publish one reply to the reply subject of each message it received,
// whatever that subject is (nats-server's allow_responses).
type Permission struct {
	Publish   []string
	Subscribe []string
	Responses bool
}

// Permissions returns the permission set of role. namespace applies to
// RoleWorker and RoleClient, identity to RoleWorker (see WorkerInbox);
// both must be valid tokens there and are ignored elsewhere. It is built
// from the subject builders of this package, so the permissions cannot
// drift from the subjects the engine uses.
func Permissions(role, namespace, identity string) (Permission, error) {
	switch role {
	case RoleDispatcher:
		return Permission{
			Publish: []string{
				SubjectReadyAll, SubjectDoneAll, SubjectCancelAll, SubjectScheduleAll, SubjectProgressAll, SubjectBatchAll, SubjectEventAll, // the relay
				SubjectRelayUp, SubjectDispatcherBeacon,
				SubjectLeaderBeacon(LeaderRelay), // the relay leader's progress
				SubjectChangedAll,                // runs changed, for the console
				SubjectInboxAll,                  // deliveries, report and payload replies, probe answers
			},
			Subscribe: []string{
				SubjectReadyAll, SubjectRelayUp, SubjectWorkAll, SubjectReportAll, SubjectPayloadAll, SubjectDirectAll,
				SubjectDispatcherProbe, SubjectLeaderBeacon(LeaderRelay), ServiceInbox(RoleDispatcher) + ".>",
			},
		}, nil
	case RoleScheduler:
		return Permission{
			Publish:   []string{},
			Subscribe: []string{SubjectScheduleAll, SubjectRelayUp, ServiceInbox(RoleScheduler) + ".>"},
		}, nil
	case RoleReaper:
		return Permission{
			// Registration notices and announcements to workers (see
			// RegistrationNotice).
			Publish: []string{SubjectLeaderBeacon(LeaderReaper), SubjectReaperUp, SubjectRegistrationAll},
			Subscribe: []string{
				SubjectWorkerRegisterAll, SubjectWorkerHeartbeatAll, SubjectWorkerDeregisterAll,
				SubjectReadyAll, SubjectRelayUp, SubjectWorkAll, SubjectDirectWorkAll, SubjectLeaderBeacon(LeaderReaper),
				SubjectBatchAll,         // batches to work on
				SubjectEventAll,         // published events to fan out to triggers
				SubjectDispatcherBeacon, // the dispatchers' leases (HeaderLease)
				ServiceInbox(RoleReaper) + ".>",
			},
		}, nil
	case RoleWorker:
		if err := ValidToken("namespace", namespace); err != nil {
			return Permission{}, err
		}
		if err := ValidToken("worker identity", identity); err != nil {
			return Permission{}, err
		}
		return Permission{
			Publish: []string{
				SubjectWork(namespace, "*"), SubjectReport(namespace), SubjectPayload(namespace),
				SubjectDirectAny(SubjectWork(namespace, "*")), SubjectDirectAny(SubjectReport(namespace)),
				SubjectDirectAny(SubjectPayload(namespace)),
				SubjectWorkerRegister(namespace), SubjectWorkerHeartbeat(namespace), SubjectWorkerDeregister(namespace),
				SubjectDispatcherProbe,
			},
			Subscribe: []string{
				WorkerInbox(namespace, identity) + ".>", SubjectCancelNamespace(namespace),
				SubjectDispatcherBeacon, SubjectRelayUp,
				SubjectRegistrationNamespace(namespace), SubjectReaperUp,
			},
			// Acknowledgements of deliveries go to the delivering
			// dispatcher's inbox.
			Responses: true,
		}, nil
	case RoleClient:
		if err := ValidToken("namespace", namespace); err != nil {
			return Permission{}, err
		}
		return Permission{
			// Cancel: asking a worker of the namespace to drain.
			Publish:   []string{SubjectCancelNamespace(namespace)},
			Subscribe: []string{SubjectDoneNamespace(namespace), SubjectProgressNamespace(namespace), SubjectRelayUp, ClientInbox(namespace) + ".>"},
		}, nil
	case RoleConsole:
		return Permission{
			Publish: []string{SubjectCancelAll},
			Subscribe: []string{
				SubjectReadyAll, SubjectDoneAll, SubjectScheduleAll, SubjectRelayUp, SubjectDispatcherBeacon,
				SubjectChangedAll, SubjectProgressAll, SubjectBatchAll,
				SubjectWorkerRegisterAll, SubjectWorkerHeartbeatAll, SubjectWorkerDeregisterAll,
				ServiceInbox(RoleConsole) + ".>",
			},
		}, nil
	}
	return Permission{}, fmt.Errorf("%w: unknown role %q", ErrInvalid, role)
}
