// Package store is Kagzi's data layer: every SQL statement of the engine
// lives here. It exposes noun-first repository methods (RunsClaim,
// StepsRecord, WorkersHeartbeat, SchedulesDue …) over one Store value that
// wraps either a pool or a transaction, returns domain types, and maps
// database failures onto typed errors (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrLeaseLost, ErrPayloadTooLarge). Pools (Connect)
// work through a connection pooler in transaction mode; sessions (a
// leader's, the migrator's) refuse one (ErrSessionPooled): see pooler.go.
// Each statement is written whole, once, in a named block of a package's
// sql/*.sql (see internal/core/sqlfiles.go).
//
// The code is split by concern into internal packages, each with its own
// sql/: internal/core holds what they share (the executor handle, the
// statement loader, the typed errors, the row types and the checks of
// names and payloads), internal/runstore the runs, their steps, leases and
// claims, internal/opsstore the fleet and operators' statements (workers,
// retention, defaults, history, progress, the console's searches, forks),
// internal/schedstore the schedules and their fires. This package keeps
// events, wait tokens, updates, payloads, rate limits, leaders, settings and
// connections; its Store embeds the parts, so their methods are its own,
// and it names their types (aliases) and errors (the same values), so
// callers see one package.
//
// What is not a query lives elsewhere: the migrator in pkg/store/migrate
// and the databases and roles an operator creates in pkg/store/dbadmin;
// the dedicated sessions that hold a leader lock or LISTEN, and their
// socket options, in pkg/store/pgsession (which runs the store's
// statements on them); the minting of a run's trace id in
// internal/tracectx; the statement counters that tests and the bench give
// a pool (ConnectTraced) in internal/stmtcount.
//
// Who it is for: Kagzi's services, its CLI and operators' tools.
// Applications use pkg/client, which is built on it and returns the row
// types the store reads (pkg/kagzitype) as they are. The package is public
// and documented, but it promises no compatibility beyond the schema
// version: a method's signature may change in any release, as River's
// riverdriver does.
//
// The store does not log: it returns errors, and reports large payloads
// through the OnLargePayload hook for the caller to log or count.
package store
