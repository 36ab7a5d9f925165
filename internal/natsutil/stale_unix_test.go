//go:build unix

package natsutil_test

import (
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A frozen server (SIGSTOP) keeps its TCP sessions open: a connection of
// Connect's notices it by its unanswered pings, within
// ClientMaxPingsOut+1 ping intervals of the freeze, and reconnects once
// the server answers again.
func TestConnectNoticesAFrozenServer(t *testing.T) {
	t.Parallel()
	s := testnats.StartPinging(t)
	nc, err := natsutil.Connect(s.URL(), "frozen-server", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if nc.Opts.PingInterval != natsutil.ClientPingInterval || nc.Opts.MaxPingsOut != natsutil.ClientMaxPingsOut {
		t.Fatalf("pings every %v, at most %d out: want %v, %d",
			nc.Opts.PingInterval, nc.Opts.MaxPingsOut, natsutil.ClientPingInterval, natsutil.ClientMaxPingsOut)
	}
	lost := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING)
	back := nc.StatusChanged(nats.CONNECTED)
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = s.Signal(syscall.SIGCONT)
		}
	})
	bound := time.Duration(natsutil.ClientMaxPingsOut+1) * natsutil.ClientPingInterval
	select {
	case <-lost:
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("the client still talks to a server frozen %v ago", time.Since(frozen))
	}
	took := time.Since(frozen)
	t.Logf("the client gave up on the frozen server %v after SIGSTOP (bound %v)", took.Round(time.Millisecond), bound)
	// Slack for a loaded machine.
	if took > bound+time.Second {
		t.Errorf("the client gave up on the frozen server %v after its freeze, want at most %v", took, bound)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	select {
	case <-back:
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not reconnect to the resumed server")
	}
}
