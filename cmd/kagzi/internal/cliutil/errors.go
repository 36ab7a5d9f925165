package cliutil

import "fmt"

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1 // the operation failed: not found, conflict, a failed run, a lost connection
	ExitUsage  = 2 // bad usage: unknown command or flag, bad argument, invalid input
)

// UsageError is a mistake in how the CLI was called; it exits with 2.
type UsageError struct{ Err error }

// Error is the message of the mistake.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the mistake itself.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a usage error; the message should say what to do.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}
