// Package core holds what every part of the store shares: the executor
// handle (DBTX, options, settings), the named-statement machinery that
// loads each package's sql/*.sql and prepares it once, the typed errors
// and their mapping from driver errors, the row types the store returns
// and the checks every edge applies to names, times and payloads.
// Package store re-exports its public names.
package core
