package reaper_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
)

// errorLines is a slog handler that hands every error record's message
// and attributes, as one line, to a channel (dropping them when it is
// full), so that a test can wait for the line a service logs.
type errorLines chan string

func (c errorLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (c errorLines) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c errorLines) WithGroup(string) slog.Handler                { return c }
func (c errorLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	select {
	case c <- b.String():
	default:
	}
	return nil
}

// A reaper whose KAGZI_LEASE is longer than a running dispatcher's would
// extend live workers' leases past what that dispatcher lets a worker
// hold: the reaper hears the dispatcher's lease on its beacon and says
// so, naming both values, as soon as the dispatcher beacons.
func TestReaperLeaseLongerThanADispatchers(t *testing.T) {
	t.Parallel()
	lines := make(errorLines, 64)
	s := startSystemLogged(t, func(c *reaper.Config) { c.Lease.Duration = 45 * time.Second },
		func(c *dispatcher.Config) { c.Lease.Duration = 30 * time.Second }, slog.New(lines))
	id := s.srv.Dispatchers[0].ID().String()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l := <-lines:
			if !strings.Contains(l, "KAGZI_LEASE is longer than a dispatcher's") {
				continue
			}
			for _, want := range []string{"45s", "30s", id} {
				if !strings.Contains(l, want) {
					t.Fatalf("the reaper's line %q does not name %q", l, want)
				}
			}
			return
		case <-deadline:
			t.Fatal("no error line from the reaper within 15 s of the dispatcher's start, though its lease is longer")
		}
	}
}
