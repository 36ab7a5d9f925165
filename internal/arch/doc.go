// Package arch holds no code: its test keeps the module's layering, the
// rules that make Kagzi's internals easy to change. SQL is written only in
// the data layer (internal/store), NATS subjects only in the wire contract
// (pkg/protocol), and no library or tool (internal/, cmd/) depends on a
// service binary (services/), so a service's code can change without
// breaking another's build.
package arch
