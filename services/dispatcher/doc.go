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
