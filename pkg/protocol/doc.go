// Package protocol owns Kagzi's wire contract on NATS: every subject (as
// documented constants and builder functions), every message type, their
// JSON encoding (and the binary form of the messages on every run's path,
// see EncodeAs), strict validation on decode, and the protocol version.
// No other package names a subject.
//
// Subjects (all under the "kagzi.v1." prefix; namespace and queue names are
// single subject tokens, see ValidToken):
//
//	ready.<ns>.<queue>          relay → dispatchers   runs of a queue became claimable (Wakeup)
//	done.<ns>.<run>             relay, dispatcher → clients   a run reached a terminal status (RunFinished)
//	cancel.<ns>.<worker>        relay, clients → worker   cancel/terminate a run it holds, or drain (Cancel)
//	schedule.<ns>               relay → schedulers    a schedule template changed (ScheduleChanged)
//	batch.<ns>                  relay → reapers, consoles  a batch operation was created, moved or made progress (BatchChanged)
//	event.<ns>                  relay → reapers       an event was published, to fan out to triggers (EventPublished)
//	changed.<ns>                dispatcher → consoles  runs it changed, after commit (RunsChanged)
//	progress.<ns>.<run>         relay → clients, consoles  a run recorded state, a stream entry or an update's answer (RunProgress)
//	relay.up                    relay → everyone      a relay (re)started: read the backlog (RelayUp)
//	work.<ns>.<queue>           worker → dispatchers  credits: N free slots (WorkRequest), queue group
//	report.<ns>                 worker → dispatchers  step/run outcomes (Report → ReportReply), queue group
//	payload.<ns>                worker → dispatchers  payloads not carried inline (PayloadRequest), queue group
//	inbox.<role…>.>             dispatcher → its asker  deliveries (Delivery), replies (see WorkerInbox)
//	worker.register.<ns>        worker → reapers      (WorkerRegister)
//	worker.heartbeat.<ns>       worker → reapers      (Heartbeat)
//	worker.deregister.<ns>      worker → reapers      (WorkerDeregister)
//	dispatcher.beacon           dispatcher → workers  alive, or leaving (DispatcherBeacon)
//	dispatcher.probe            worker → dispatchers  answer with your beacon (DispatcherProbe → DispatcherBeacon)
//	leader.<role>               leader → standbys     the relay's or reaper's leader makes progress (LeaderBeacon)
//
// This package is the contract between Kagzi's processes and any other
// implementation of a worker or client: an incompatible change to a subject
// or a message is a new protocol version. Permissions gives each role's
// NATS permissions from the same builders.
package protocol
