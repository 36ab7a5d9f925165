// Package dispatcher owns the lease: it parks workers' requests for work,
// claims due runs for them in one statement when woken (by a NATS wakeup or
// its own timer, never by a periodic scan), delivers them, and applies the
// workers' reports under the fencing token, batching reports that arrive
// together into one transaction. It beacons its liveness, so workers
// renew a request a dispatcher that went away held, and its lease
// (KAGZI_LEASE), which the reaper checks its own against. It also hosts the
// relay that republishes Postgres notifications on NATS under a leader
// lock.
//
// The service is this package whole: Config is its configuration from the
// environment, and the only one: New and NewRelay take it whole (with
// their neighbours in the process and telemetry as Deps and RelayDeps),
// defaulted by its env tags and validated once by config.Load or
// config.Defaults. Assemble builds its components (the Dispatcher and, where
// enabled, the Relay) over a store and a NATS connection, and Run runs it
// as a process until its context ends; cmd/dispatcher only loads the
// configuration and calls Run, and `kagzi dev` composes Assemble with the
// other services.
package dispatcher

// Reading the path of a run
//
// A run's start crosses this package from its wakeup to the worker along
// one path (wakeup.go → claim.go → deliver.go), laid out so that no file
// is entered more than twice on it. An entry is control coming into a
// file from another: a call, a NATS callback, a goroutine's start or a
// channel receive waking a loop; a return is not one. For a run due now,
// woken from NATS, claimed alone for a parked worker with credits to
// spare, with tracing on:
//
//	file           entries  what enters it
//	wakeup.go      1        NATS: onWakeup (handedOver, wake, queueLocked, signal are here)
//	claim.go       2        the queue loop's signal: serve; the delivery's goroutine
//	changed.go     1        serve: publishClaimed
//	telemetry.go   2        serve: claimRound (flow, claim latency and spans, dispatch latency);
//	                        deliver: startDispatch
//	deliver.go     1        the delivery's goroutine: deliver (fit, release, endDispatch are here)
//	delivered.go   1        deliver: deliveredRuns
//	dispatcher.go  0        (start, work requests, Resync)
//
// A claim of several runs enters no file more often: the conversion and
// the telemetry take the claim's runs whole. With the relay in the same
// process the wakeup comes from relay.go, which enters local.go twice
// (expectLocal, wakeLocal); wakeup.go is then entered by wakeLocal and by
// the NATS copy that handedOver drops (2).
//
// Beside the path, and waited for by nothing on it, the read of when the
// queue's next run is due enters nextdue.go twice (readNextDue, its
// goroutine) and arms the timer in one call (wakeup.go, +1). A queue's
// first wakeup also starts its loop (wakeup.go, +1, once per queue). A
// run due later adds the timer's firing (onTimer, wakeup.go): 2 from NATS,
// but 3 with the relay in the same process (hand-over, NATS copy, timer).
//
// Before this layout the same run entered dispatcher.go three times
// (onWakeup, the queue loop, the delivery's goroutine) and telemetry.go
// six (flow, claimed, the dispatch latency's attributes, startDispatch,
// and endDispatch twice, once on an empty slice), and telemetry.go and
// delivered.go again for every further run of the claim.
