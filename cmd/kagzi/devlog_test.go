package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// TestDevLoggerIsReadable: dev's services log text, warnings and errors
// only by default; the level and JSON are there for the asking, and a
// wrong level or format is refused.
func TestDevLoggerIsReadable(t *testing.T) {
	var buf bytes.Buffer
	log, err := devLogger(&buf, "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("claimed", "run", "r1")
	log.Warn("slow", "run", "r2")
	if got := buf.String(); strings.Contains(got, "claimed") || !strings.Contains(got, "level=WARN msg=slow run=r2") {
		t.Fatalf("default logger wrote %q", got)
	}
	buf.Reset()
	log, err = devLogger(&buf, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("claimed")
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Fatalf("--log-format json wrote %q", buf.String())
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := devLogger(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("devLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// TestDevOutputHasNoJSONLogs: `kagzi dev --demo` on a terminal prints its
// own lines and the services' logs as text, never a JSON line, both by
// default (quiet) and with --log-level info (every service's start,
// claims and the like).
func TestDevOutputHasNoJSONLogs(t *testing.T) {
	url := testdb.New(t)
	ns := testnats.Start(t)
	for _, extra := range [][]string{nil, {"--log-level", "info"}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("KAGZI_HTTP_ADDR", ln.Addr().String())
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out, errb strings.Builder
		args := append([]string{"--database-url", url, "--nats-url", ns.URL(), "dev", "--workers", "1", "--console-addr", "", "--demo", "--exit"}, extra...)
		stderr := captureStderr(t)
		code := execute(ctx, args, strings.NewReader(""), &lockedBuilder{b: &out}, &lockedBuilder{b: &errb})
		cancel()
		errb.WriteString(stderr())
		if code != 0 {
			t.Fatalf("kagzi dev %v: exit %d\nstdout:\n%s\nstderr:\n%s", extra, code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "Kagzi dev is running") || !strings.Contains(out.String(), "completed ProcessOrder") {
			t.Fatalf("kagzi dev %v printed:\n%s", extra, out.String())
		}
		var lines int
		for _, line := range strings.Split(out.String()+errb.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "{") {
				t.Errorf("kagzi dev %v printed a JSON line: %s", extra, line)
			}
			if strings.Contains(line, "level=") {
				lines++
			}
		}
		if extra != nil && lines == 0 {
			t.Errorf("kagzi dev %v logged nothing readable:\n%s", extra, errb.String())
		}
		t.Logf("kagzi dev %v: %d log lines", extra, lines)
	}
}

// captureStderr points os.Stderr at a pipe until the returned function,
// which gives back what was written there: a logger that writes to the
// process's stderr rather than the command's reaches the same terminal.
// Only a test that runs alone may use it (none of this package's
// parallel tests runs while a sequential one does).
func captureStderr(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	restored := false
	restore := func() string {
		if restored {
			return ""
		}
		restored = true
		os.Stderr = old
		_ = w.Close()
		s := <-got
		_ = r.Close()
		return s
	}
	t.Cleanup(func() { restore() })
	return restore
}
