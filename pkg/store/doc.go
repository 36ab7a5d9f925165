// Package store owns Kagzi's persistence: every SQL statement and every pgx
// import of the project lives here. It exposes noun-first repository methods
// (RunsClaim, StepsRecord, WorkersHeartbeat, SchedulesDue …) over one Store
// value that wraps either a pool or a transaction, returns domain types, and
// maps database failures onto typed errors (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrLeaseLost, ErrPayloadTooLarge).
//
// The store does not log: it returns errors, and reports large payloads
// through the OnLargePayload hook for the caller to log or count.
package store
