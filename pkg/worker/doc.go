// Package worker is the Kagzi worker runtime: it registers workflow
// functions, asks dispatchers for work over NATS, executes the runs it is
// delivered (package workflow), reports their outcomes, keeps its liveness
// with heartbeats, obeys cancellations and drains on shutdown.
//
// A worker needs a NATS connection only: no database.
//
//	w, err := worker.New(worker.Config{Queue: "orders"}, nc)
//	if err != nil { ... }
//	err = worker.Implement(w, ProcessOrder, processOrder, worker.WithVersion("v1"))
//	if err != nil { ... }
//	err = w.Run(ctx) // until ctx is cancelled, then drains
//
// ProcessOrder is a workflow.New declaration; Register takes a type name
// string instead. One type may be implemented at several versions. An
// operator may drain a worker remotely (client.DrainWorker, `kagzi worker
// drain`): it drains as on Stop.
//
// # Protocol
//
// The worker registers (protocol.WorkerRegister: its types, slots, host
// and pid) when it starts and after a NATS reconnect, and repeats its
// registration with a backoff until the acting reaper acknowledges it, at
// once when a reaper takes over or asks for it (protocol.RegistrationNotice,
// protocol.ReaperUp), so that its row is complete whatever started first.
//
// The worker keeps at most one work request (protocol.WorkRequest)
// outstanding, offering its free slots as credits, and renews it when it
// was not answered within its wait. It addresses its work requests,
// reports and payload reads to a dispatcher whose beacons it hears
// (protocol.SubjectDirect), not to whichever member of the dispatchers'
// queue group NATS picks, and sends a round trip again to another when
// that dispatcher falls silent: a frozen dispatcher costs its runs a few
// seconds whatever the NATS server's ping settings (route.go). It accepts a delivery only for that
// request and within its credits, so it never runs more than
// Config.MaxConcurrency runs. Each run executes in its own goroutine;
// reports are NATS requests retried until acknowledged. A run's end report
// is acknowledged in the background: its slot is free once the report is
// handed over, while the run stays held (heartbeats, drain) until the
// reply; at most Config.MaxConcurrency ends wait so. A lease lost or a
// cancellation abandons the run (its context is cancelled, nothing more is
// reported). Malformed messages are counted (Stats), logged and dropped.
//
// A worker that was frozen (SIGSTOP, a paused VM) for longer than a second
// since it sent its request refuses the delivery for it, which its
// dispatcher may have released and given to another worker meanwhile, and
// renews the request.
//
// # Ownership
//
// Every goroutine the worker starts belongs to the Worker and ends by
// Stop (the sender of a run's end report when the report is acknowledged,
// or when the drain timeout cancels it), except a workflow function that ignores its cancelled context:
// Go cannot stop it, so Stop releases its run and returns after the drain
// timeout, and the goroutine ends whenever the function returns (its
// reports are suppressed).
package worker
