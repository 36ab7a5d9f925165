// Package protocol owns Kagzi's wire contract on NATS: every subject (as
// documented constants and builder functions), every message type, their
// JSON encoding, strict validation on decode, and the protocol version.
// No other package names a subject.
//
// Subjects (all under the "kagzi.v1." prefix; namespace and queue names are
// single subject tokens, see ValidToken):
//
//	ready.<ns>.<queue>        relay → dispatchers   runs of a queue became claimable (Wakeup)
//	done.<ns>.<run>           relay → clients       a run reached a terminal status (RunFinished)
//	cancel.<worker>           relay → worker        a run the worker holds was cancelled (Cancel)
//	schedule.<ns>             relay → schedulers    a schedule template changed (ScheduleChanged)
//	relay.up                  relay → everyone      a relay (re)started: read the backlog (RelayUp)
//	work.<ns>.<queue>         worker → dispatchers  credits: N free slots (WorkRequest), queue group
//	<reply inbox>             dispatcher → worker   runs for a request (Delivery), acked (DeliveryAck)
//	report.<ns>               worker → dispatchers  step/run outcomes (Report → ReportReply), queue group
//	worker.register           worker → reapers      (WorkerRegister)
//	worker.heartbeat          worker → reapers      (Heartbeat)
//	worker.deregister         worker → reapers      (WorkerDeregister)
//	dispatcher.beacon         dispatcher → workers  alive, or leaving (DispatcherBeacon)
//	dispatcher.probe          worker → dispatchers  answer with your beacon (DispatcherProbe → DispatcherBeacon)
package protocol
