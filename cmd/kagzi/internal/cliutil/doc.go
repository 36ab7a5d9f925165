// Package cliutil is what every command of the kagzi CLI shares: the state
// of one execution (App: the global flags and the connections it opens
// lazily), usage errors and exit codes, the printing of JSON and tables
// and of the engine's records in them, the reading of flags (ids, JSON
// payloads, statuses, durations, times) and the terminal-safe writer all
// output goes through. It holds no command.
package cliutil
