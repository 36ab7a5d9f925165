// Package arch states the repository's layering, the rules that make
// Kagzi's internals easy to change, and its test keeps them. SQL is
// written only in the data layer (pkg/store), NATS subjects only in
// the wire contract (pkg/protocol), and no library or tool (internal/,
// cmd/) depends on a service binary (services/), so a service's code can
// change without breaking another's build. The rules hold in the nested
// modules (the CLI, the deploy tests, the console's browser tests) as in
// the root module, and the modules only tools and tests need (ToolModules)
// are imported in nested modules alone, so applications of the public
// packages do not depend on them.
package arch
