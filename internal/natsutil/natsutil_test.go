package natsutil_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Every listener runs after a reconnect, and the reconnect handler the
// application set is neither replaced nor skipped.
func TestOnReconnectKeepsTheApplicationsHandler(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	app := make(chan struct{}, 4)
	nc := s.Connect(t, nats.ReconnectHandler(func(*nats.Conn) { app <- struct{}{} }))
	a, b := make(chan struct{}, 4), make(chan struct{}, 4)
	natsutil.OnReconnect(nc, func() { a <- struct{}{} })
	stopB := natsutil.OnReconnect(nc, func() { b <- struct{}{} })
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan struct{}{"application's handler": app, "first listener": a, "second listener": b} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not run after a reconnect", name)
		}
	}
	// A stopped listener no longer runs; the others do.
	stopB()
	stopB()
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener left did not run after the second reconnect")
	}
	select {
	case <-b:
		t.Fatal("a stopped listener ran")
	default:
	}
	// Once the connection is closed, no listener runs again.
	nc.Close()
	if err := nc.ForceReconnect(); err == nil {
		t.Fatal("a closed connection reconnected")
	}
	select {
	case <-a:
		t.Fatal("a listener ran after close")
	default:
	}
}

// A malformed message is counted, logged with its component and subject,
// and added to kagzi.messages.malformed by component.
func TestMalformedCountsLogsAndMeasures(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m := natsutil.NewMalformed("scheduler", log, slog.LevelWarn, mp)
	ctx := context.Background()
	m.Drop(ctx, "kagzi-test.subject", errors.New("bad json"))
	m.Drop(ctx, "", errors.New("bad notification"))
	if m.Count() != 2 {
		t.Fatalf("count %d, want 2", m.Count())
	}
	out := buf.String()
	for _, want := range []string{`"level":"WARN"`, `"msg":"dropping malformed message"`, `"component":"scheduler"`, `"subject":"kagzi-test.subject"`, `"err":"bad json"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var got int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "kagzi.messages.malformed" {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := dp.Attributes.Value("component"); ok && v.AsString() == "scheduler" {
					got += dp.Value
				}
			}
		}
	}
	if got != 2 {
		t.Fatalf("kagzi.messages.malformed{component=scheduler} = %d, want 2", got)
	}
}

// The NATS configuration Kagzi ships (compose; the dev overlay's copy is
// kept identical by the deploy tests, which load it with nats-server's own
// parser) pings as ServerConfig says: workers time their second renewal
// after a dispatcher's silence by StaleClientBound.
func TestShippedServerConfigPings(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "ping_") {
			got = append(got, line)
		}
	}
	want := strings.Split(strings.TrimSpace(natsutil.ServerConfig()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("deploy/nats/nats.conf pings with %q, want %q", got, want)
	}
}
