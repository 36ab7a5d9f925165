package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/lifecycle"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	ctx := context.Background()
	ready := errors.New("postgres unreachable")
	h := &lifecycle.Health{Addr: freeAddr(t), Log: slog.New(slog.DiscardHandler), Checks: map[string]lifecycle.Check{
		"postgres": func(context.Context) error { return ready },
	}}
	stop, err := process.Telemetry(ctx, "kagzi-test", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	base := "http://" + h.Addr
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "postgres unreachable") {
		t.Fatalf("/readyz while a check fails: %d %q", code, body)
	}
	ready = nil
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz before every component started: %d %q", code, body)
	}
	h.SetReady(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz when ready: %d", code)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "target_info") ||
		!strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_cpu_seconds_total") {
		t.Fatalf("/metrics: %d %q", code, body[:min(len(body), 200)])
	}
	h.SetReady(false)
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Fatalf("/readyz while draining: %d %q", code, body)
	}
	h.Stop()
	h.Stop() // safe twice
}
