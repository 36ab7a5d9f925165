// Package arch states the repository's layering, the rules that make
// Kagzi's internals easy to change, and its test keeps them. SQL is
// written only in the data layer (pkg/store), NATS subjects only in the
// wire contract (pkg/protocol); a service's code (services/<name>) never
// imports another service, and only the binaries (cmd/) and the dev
// assembly compose services; each service binary (cmd/<name>) links its
// own service alone, and the worker's no database driver. The rules hold
// in the nested modules (the CLI, the deploy tests, the console's browser
// tests) as in the root module, and the modules only tools and tests need
// (ToolModules) are imported in nested modules alone, so applications of
// the public packages do not depend on them.
package arch
