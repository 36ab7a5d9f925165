package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/kagzi/kagzi/internal/telemetry"
	"github.com/kagzi/kagzi/internal/telemetry/otlptest"
)

// The tests set the otel globals, so none runs in parallel.

func scrape(t *testing.T, p *telemetry.Providers) string {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// With only OTEL_EXPORTER_OTLP_ENDPOINT set (as for Jaeger, which takes no
// metrics), traces are exported there and metrics are not pushed: they
// stay on /metrics.
func TestEndpointAloneExportsTracesNotMetrics(t *testing.T) {
	recv := otlptest.Start(t)
	recv.Env(t)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "10")
	ctx := context.Background()
	p, err := telemetry.Setup(ctx, telemetry.Options{Service: "kagzi-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("t").Start(ctx, "probe")
	span.End()
	c, _ := otel.Meter("t").Int64Counter("kagzi.test.count")
	c.Add(ctx, 1)
	body := scrape(t, p)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.Spans()); n != 1 || recv.Spans()[0].Service != "kagzi-test" {
		t.Fatalf("received %+v, want the one span of service kagzi-test", recv.Spans())
	}
	if n := recv.Requests("/v1/metrics"); n != 0 {
		t.Fatalf("%d metric uploads to the trace endpoint", n)
	}
	for _, want := range []string{"kagzi_test_count_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// Metrics are pushed by OTLP when asked for by name.
func TestMetricsExporterByName(t *testing.T) {
	recv := otlptest.Start(t)
	recv.Env(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	ctx := context.Background()
	p, err := telemetry.Setup(ctx, telemetry.Options{Service: "kagzi-test", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := otel.Meter("t").Int64Counter("kagzi.test.count")
	c.Add(ctx, 1)
	_ = p.Shutdown(ctx) // the receiver refuses metrics: an error is expected
	if recv.Requests("/v1/metrics") == 0 {
		t.Fatal("OTEL_METRICS_EXPORTER=otlp pushed no metrics")
	}
}

// OTEL_SDK_DISABLED=true: no spans, no OTel metrics; the runtime metrics
// are still served.
func TestSDKDisabled(t *testing.T) {
	recv := otlptest.Start(t)
	recv.Env(t)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	ctx := context.Background()
	p, err := telemetry.Setup(ctx, telemetry.Options{Service: "kagzi-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("t").Start(ctx, "probe")
	if span.SpanContext().IsValid() {
		t.Fatal("a span was recorded with the SDK disabled")
	}
	span.End()
	c, _ := otel.Meter("t").Int64Counter("kagzi.test.count")
	c.Add(ctx, 1)
	body := scrape(t, p)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body, "kagzi_test_count") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics with the SDK disabled:\n%s", body)
	}
	if len(recv.Spans()) != 0 {
		t.Fatalf("spans exported with the SDK disabled: %+v", recv.Spans())
	}
}

// The SDK's errors are JSON log lines, the same error once a minute.
func TestErrorsThroughSlog(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	if _, err := telemetry.Setup(context.Background(), telemetry.Options{Service: "kagzi-test", Log: log}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		otel.Handle(errors.New("export failed: connection refused"))
	}
	otel.Handle(errors.New("another failure"))
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 2 distinct errors: %q", len(lines), buf.String())
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] != "telemetry" || rec["err"] == nil {
			t.Fatalf("not a JSON telemetry line: %q (%v)", l, err)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
