package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// kagzi dev serves /healthz, /readyz and /metrics like each service: ready
// once everything runs, with the engine's metrics and the Go runtime's.
func TestDevServesHealthAndMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	t.Setenv("KAGZI_HTTP_ADDR", addr)
	url := testdb.New(t)
	ns := testnats.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"--database-url", url, "--nats-url", ns.URL(), "dev", "--workers", "1"},
			strings.NewReader(""), &lockedBuilder{b: &out}, &lockedBuilder{b: &errb})
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if code, _ := get("/readyz"); code == http.StatusOK {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("kagzi dev exited %d before it was ready", code)
		case <-ctx.Done():
			t.Fatal("kagzi dev never became ready")
		case <-tick.C:
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	// A queue's depth is reported once its worker's registration has reached
	// the reaper, which may come after readiness (the worker registers over
	// NATS), so the scrape is repeated until every name is there.
	wants := []string{"kagzi_queue_depth{", "kagzi_relay_leader{", "kagzi_workers_online{", "go_goroutines", "process_cpu_seconds_total"}
	for {
		code, body := get("/metrics")
		var missing []string
		for _, want := range wants {
			if code != http.StatusOK || !strings.Contains(body, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/metrics (%d) never had %v", code, missing)
		case <-tick.C:
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("kagzi dev exited %d", code)
	}
}

// lockedBuilder is a strings.Builder safe to write from the command's
// goroutines and read from the test's.
type lockedBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
