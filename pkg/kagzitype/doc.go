// Package kagzitype holds the row types that Kagzi's data layer
// (pkg/store) returns and its client (pkg/client) hands to applications
// unchanged: a run, its status, a schedule and its overlap policy, a fork
// link. It is the one place their shapes are written, so the store and the
// client cannot drift apart and no layer copies a row field by field into
// a look-alike, as River's rivertype does for its jobs.
//
// The package imports nothing of Kagzi's but pkg/retry, so any layer may
// use it. pkg/client re-exports each type under its own name (client.Run
// is kagzitype.Run), and applications normally meet them there.
//
// Some fields are the engine's bookkeeping (a run's lease, a schedule
// template's columns, a trace context): the store fills them and the
// engine's services read them, but they are not part of the run or
// schedule an application sees, so they are left out of the types' JSON
// encoding (`json:"-"`) and documented as the engine's.
package kagzitype
