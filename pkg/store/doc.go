// Package store is Kagzi's data layer: every SQL statement of the engine
// lives here. It exposes noun-first repository methods (RunsClaim,
// StepsRecord, WorkersHeartbeat, SchedulesDue …) over one Store value that
// wraps either a pool or a transaction, returns domain types, and maps
// database failures onto typed errors (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrLeaseLost, ErrPayloadTooLarge). Its subpackages
// migrate (the migrator) and dbadmin (the databases and roles an operator
// creates) hold administration; it owns the dedicated sessions that
// hold a leader lock (Leader, LockedConnect). Pools (Connect) work through
// a connection pooler in transaction mode; sessions (a leader's, the
// migrator's) refuse one (ErrSessionPooled, SessionCheck): see pooler.go.
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
