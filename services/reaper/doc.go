// Package reaper owns recovery: worker registration and liveness, marking
// silent workers OFFLINE and taking back the runs they held, expiring leases
// nobody extends, and failing runs past their deadline. It also owns
// retention (deleting finished runs older than their retention period),
// batch operations, and folding the deltas of search attribute counts.
//
// # Liveness in memory, one writer
//
// Every reaper replica subscribes (without a queue group) to the workers'
// register, heartbeat and deregister messages and keeps liveness in memory:
// worker id → when it was last heard, the runs it holds, whether it drains.
// The three subjects share one channel, so they are applied in the order the
// server delivered them (a draining worker's last heartbeat cannot overtake
// its deregistration).
//
// Only the leader acts and writes. Leadership is a Postgres advisory lock
// held on a dedicated connection (pgsession.Leader): if the leader dies, its
// session ends, the lock is released and a standby, whose lock request was
// blocked, takes over at once. Because standbys already know who is alive,
// a new leader needs no warm-up; still, it treats every worker the database
// says is not OFFLINE as alive as of the moment it took over (and so does
// any replica after a NATS reconnect, since heartbeats were missed), giving
// each one timeout to be heard: a failover never recovers runs en masse.
//
// # Registration, whatever the start order
//
// A worker's registration (types, slots, host, pid) is sent when it starts
// and reconnects; its heartbeats do not carry it. The leader acknowledges
// a registration once the worker's row says what it says, asks a worker it
// knows only from heartbeats (or whose row was written from them) to
// register, and announces itself on taking over and after a NATS
// reconnect, so that workers holding no acknowledgement register at once
// (protocol.RegistrationNotice, protocol.ReaperUp; registration.go). A
// standby hears every registration: on taking over it writes those the
// row lacks, and acknowledges them.
//
// # Writes in batches
//
// The leader persists liveness on a flush tick (Config.FlushInterval) with
// at most two statements, whatever the number of workers:
// store.WorkersHeartbeat for every worker heard since the last flush, and
// store.RunsExtendLeases, which extends the leases of the runs those
// workers list to (last heard + Config.Lease), marks them held (received:
// see below), and releases a run locked to
// one of them that it no longer lists (a delivery lost on the way) once the
// run's lease was last set more than Config.LeaseGrace before. A flush is
// only issued when it matters: some worker holds runs, changed its draining
// state, or was last persisted a third of a lease ago (so leases never come
// near expiry and `kagzi worker list` is at most that stale). Idle workers
// therefore cost two statements per Lease/3; no workers cost nothing.
// Registration (an upsert) and deregistration are written when they arrive.
//
// # Dead workers
//
// A worker not heard for Config.WorkerTimeout is dead. The leader's one
// timer is armed at the earliest moment any worker could be dead (its last
// heartbeat plus the timeout), never a periodic scan. When it fires, the
// leader flushes what it has heard (so the database agrees with memory),
// marks the silent workers OFFLINE (store.WorkersMarkStaleOffline) and
// recovers each one's runs at once (store.RunsRecoverWorker: retried with
// backoff while attempts remain, failed when exhausted). Only a run a
// heartbeat of its holder listed since the claim (held) counts the lost
// attempt: one claimed for a worker that never received it (a dispatcher
// dead between claim and delivery, a worker dead with a request it had
// parked) is claimable again at once with its attempts unchanged, whatever
// the recovery (lease expiry too). Workers heartbeat right after accepting
// a delivery, so a run that crashes its worker at once is still counted,
// and fails once its attempts are spent. A worker marked
// OFFLINE that is heard again is registered afresh (from its last
// registration, or from its row, or from what the heartbeat carries); the
// runs it lost are not its own any more, and the fencing token refuses its
// reports for them. A worker that deregisters has drained: nothing of it is
// recovered (a run it still held, which should not happen, falls to the
// lease expiry below).
//
// # Leases and deadlines: timers, re-armed by what is cheapest and correct
//
// Two more timers are armed from one indexed min() each:
// store.RunsNextLeaseExpiry (on expiry: store.RunsExpireLeases, for runs
// whose holder the reaper does not track) and store.RunsNextDeadline (on
// expiry: store.RunsFailPastDeadline). Both are re-read after acting, on
// taking leadership, on NATS reconnect and when a relay announces itself
// (wakeups may have been lost). In between:
//
//   - Deadlines are fixed when a run is created, and every created run
//     produces a wakeup (protocol.SubjectReadyAll), which does not carry
//     the deadline. The next deadline is therefore re-read after a wakeup,
//     at most once a second (the first wakeup after a quiet second is
//     served at once, the others are coalesced).
//   - Leases only move later (extensions) or vanish, except for new claims.
//     A claim follows a run becoming claimable — a wakeup received at t for
//     a run due at a — and its lease expires no earlier than the claim plus
//     the lease. So a wakeup schedules one re-read between max(t, a) +
//     Lease/2 and max(t, a) + Lease (coalesced into Lease/2 buckets), which
//     sees every claim made within Lease/2 of the wakeup before its lease
//     can expire. A claim for a request parked earlier happens at such a
//     wakeup (or at the run's due time, which the wakeup carried); a claim
//     from the backlog happens when the request arrives, so a work request
//     (protocol.SubjectWorkAll, watched without a queue group) from a
//     worker the reaper does not track schedules a re-read the same way.
//     Claims by workers that heartbeat never need this backstop: their
//     leases are extended while they live and recovered when they die. The
//     reaper's Lease must not exceed the dispatchers'.
//
// An idle system costs nothing beyond the flushes of live workers (and
// retention's hourly read, below).
//
// # Retention
//
// A third timer deletes finished runs past their retention period
// (store.RunsDeleteExpired: up to Config.RetentionBatch runs with their
// steps, payloads and events in one statement, in a fenced transaction, so
// a run goes whole or not at all). It is armed at the next expiry, which
// store.RunsNextExpiry reads with one probe of an index over finished runs
// per (namespace, type, status); nothing is read in between, except once an
// hour (and once per shortest period), because nothing announces a changed
// policy or the end of a parent whose finished children were spared. A
// backlog goes one batch per step of the leader's loop, each followed by a
// pause at least as long as the batch took (and Config.RetentionPause), so
// the cleanup holds a connection at most half the time and liveness work
// waits for one batch at most.
//
// # Layout
//
// Each of the leader's duties is a sweep of its own, with its own state,
// configuration where it has any, counters, Start/Stop and test file
// (sweep.go says what a sweep is): liveness.go (following workers,
// flushing, dead workers and their runs; its memory of the workers in
// workers.go), registration.go
// (writing what liveness heard, acknowledging, asking, announcing),
// leases.go (lease expiry), deadlines.go (deadlines), retention.go
// (expired finished runs), batches.go (batch operations), fanout.go
// (published events fanned out to triggers), startbatches.go (start
// batches closed at their deadline), counts.go
// (attribute count deltas, folded a few seconds after news of starts).
// reaper.go composes them into the service:
// every replica starts every sweep, so a standby hears what the leader
// hears; lead.go is leadership, which decides when they act: the leader's
// loop takes over with each, steps each when anything is due, and serves
// them all from one timer. Time comes from a clock tests replace (the
// wall clock otherwise), which also gives the database its "now" for
// leases and deadlines, so a test moves a fake clock instead of waiting.
//
// # The service
//
// The service is this package whole: Config is its configuration from the
// environment, Assemble builds the Reaper and its metrics over a store and
// a NATS connection, and Run runs it as a process (cmd/reaper calls it).
package reaper
