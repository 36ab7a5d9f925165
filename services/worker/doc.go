// Package worker is the worker service: a process that runs workflows of
// the SDK (pkg/worker) as configured from the environment. Config is its
// configuration, which embeds the SDK's worker.Config (whose env tags are
// the service's variables and defaults) rather than copying it; New builds the SDK's Worker with the workflows a register
// function adds, and Run runs it as a process: NATS only, no database
// connection and no database credentials. cmd/worker runs it with the
// example workflows; a team's own worker binary calls Run with its own.
package worker
