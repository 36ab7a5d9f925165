// Package testlog holds slog handlers for tests: a component's logging
// calls are points a test can observe and hold it at.
package testlog

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// Stall is a slog handler that blocks the first goroutine logging a given
// message until released, and discards every record. A component that logs
// from a subscription handler (a malformed message, say) is thereby held
// in that handler while messages pile up behind it.
type Stall struct {
	msg      string
	entered  chan struct{}
	released chan struct{}
	hold     sync.Once
	release  sync.Once
}

// NewStall returns a Stall that holds the first call logging msg. It is
// released when t ends at the latest; a test whose component waits for
// its handlers when stopped releases it before that stop (a cleanup
// registered after the component's).
func NewStall(t testing.TB, msg string) *Stall {
	s := &Stall{msg: msg, entered: make(chan struct{}), released: make(chan struct{})}
	t.Cleanup(s.Release)
	return s
}

// Entered is closed once a goroutine is held.
func (s *Stall) Entered() <-chan struct{} { return s.entered }

// Release lets the held goroutine, and any later one, go on. It may be
// called more than once.
func (s *Stall) Release() { s.release.Do(func() { close(s.released) }) }

// Enabled reports true: every record reaches Handle.
func (s *Stall) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns s: attributes do not matter to it.
func (s *Stall) WithAttrs([]slog.Attr) slog.Handler { return s }

// WithGroup returns s: groups do not matter to it.
func (s *Stall) WithGroup(string) slog.Handler { return s }

// Handle holds the first call whose record's message is the one s waits
// for until Release.
func (s *Stall) Handle(_ context.Context, r slog.Record) error {
	if r.Message == s.msg {
		s.hold.Do(func() {
			close(s.entered)
			<-s.released
		})
	}
	return nil
}
