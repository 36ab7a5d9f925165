// Package dispatcher owns the lease: it parks workers' requests for work,
// claims due runs for them in one statement when woken (by a NATS wakeup or
// its own timer, never by a periodic scan), delivers them, and applies the
// workers' reports under the fencing token, batching reports that arrive
// together into one transaction. It beacons its liveness, so workers
// renew a request a dispatcher that went away held. It also hosts the
// relay that republishes Postgres notifications on NATS under a leader
// lock.
package dispatcher
