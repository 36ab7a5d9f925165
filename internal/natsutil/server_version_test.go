package natsutil_test

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/testnats"
)

// oldServer speaks just enough of NATS's client protocol to be connected
// to: an INFO announcing version, then PONG to every PING.
func oldServer(t *testing.T, version string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "INFO {\"server_id\":\"old\",\"version\":%q,\"proto\":1,\"headers\":true,\"max_payload\":1048576}\r\n", version)
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "PING") {
						_, _ = c.Write([]byte("PONG\r\n"))
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// A server older than protocol.MinServerVersion is refused at connect,
// with a word that names both versions, by the services' Connect and by
// a worker handed a connection to it.
func TestOldServerRefused(t *testing.T) {
	url := oldServer(t, "2.8.4")
	_, err := natsutil.Connect(url, "test", slog.New(slog.DiscardHandler))
	if !errors.Is(err, protocol.ErrServerVersion) || !strings.Contains(err.Error(), "2.8.4") || !strings.Contains(err.Error(), protocol.MinServerVersion) {
		t.Fatalf("Connect to a 2.8.4 server: %v, want ErrServerVersion naming 2.8.4 and %s", err, protocol.MinServerVersion)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := worker.New(worker.Config{}, nc); !errors.Is(err, protocol.ErrServerVersion) {
		t.Fatalf("worker.New on a 2.8.4 server: %v, want ErrServerVersion", err)
	}
}

// The versions Kagzi is tested on are accepted: the pinned server and
// Debian's 2.9.
func TestSupportedServersAccepted(t *testing.T) {
	for _, b := range testnats.Binaries(t) {
		t.Run(b.Name, func(t *testing.T) {
			ns := testnats.StartBinary(t, b)
			nc, err := natsutil.Connect(ns.URL(), "test", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			t.Logf("nats-server %s", nc.ConnectedServerVersion())
			if _, err := worker.New(worker.Config{}, nc); err != nil {
				t.Fatal(err)
			}
		})
	}
}
