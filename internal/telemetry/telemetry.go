// Package telemetry owns Kagzi's OpenTelemetry setup, the one every
// binary uses (services, the CLI, `kagzi dev`): tracer and meter providers
// built from the standard OTEL_* environment, a Prometheus /metrics handler
// with the Go runtime and process metrics, and the SDK's errors logged
// through slog. Trace-context propagation lives in package tracectx, which
// the worker SDK can import without the exporters.
//
// What is exported where:
//   - Traces go out by OTLP (autoexport: OTEL_TRACES_EXPORTER,
//     OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_PROTOCOL, ...) when an exporter or an endpoint is
//     set; nothing set means none are exported.
//   - Metrics are always served on /metrics. They are also pushed by OTLP
//     only when asked for by name, OTEL_METRICS_EXPORTER (e.g. otlp) or
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: the generic
//     OTEL_EXPORTER_OTLP_ENDPOINT alone points at a trace backend often
//     enough (Jaeger accepts no metrics) that pushing metrics there would
//     fail every interval.
//   - OTEL_SDK_DISABLED=true turns the SDK off: no spans, no OTel metrics;
//     /metrics still serves the Go runtime and process metrics.
package telemetry

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kagzi/kagzi/internal/tracectx"
)

// Options configure Setup.
type Options struct {
	// Service is the service.name unless OTEL_SERVICE_NAME sets one.
	Service string
	// Log receives the SDK's errors (export failures and the like), which
	// otherwise go to stderr as plain text; nil discards them.
	Log *slog.Logger
	// SpanProcessors and MetricReaders are added to what the environment
	// configures (tests record spans and metrics with them).
	SpanProcessors []sdktrace.SpanProcessor
	MetricReaders  []sdkmetric.Reader
	// NoGlobals leaves the otel globals alone.
	NoGlobals bool
}

// Providers are one process's telemetry.
type Providers struct {
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
	// Metrics serves the Prometheus exposition of Meter's instruments and
	// of the Go runtime and process metrics.
	Metrics http.Handler

	shutdown []func(context.Context) error
}

// configured reports whether any of the variables is set.
func configured(vars ...string) bool {
	for _, v := range vars {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// Disabled reports whether OTEL_SDK_DISABLED turns the SDK off.
func Disabled() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
}

// Setup builds the providers from the environment (see the package doc)
// and, unless o.NoGlobals, installs them as the otel globals with the W3C
// propagator and an error handler logging through o.Log.
func Setup(ctx context.Context, o Options) (*Providers, error) {
	reg := promclient.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p := &Providers{Tracer: noop.NewTracerProvider(), Meter: metricnoop.NewMeterProvider(),
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	if !o.NoGlobals {
		otel.SetErrorHandler(newErrorHandler(o.Log))
		otel.SetTextMapPropagator(tracectx.Propagator)
	}
	if Disabled() {
		if !o.NoGlobals {
			otel.SetTracerProvider(p.Tracer)
			otel.SetMeterProvider(p.Meter)
		}
		return p, nil
	}
	// The service name, then OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over it.
	ropts := []resource.Option{resource.WithTelemetrySDK(), resource.WithHost()}
	if o.Service != "" {
		ropts = append(ropts, resource.WithAttributes(semconv.ServiceName(o.Service)))
	}
	res, err := resource.New(ctx, append(ropts, resource.WithFromEnv())...)
	if err != nil {
		res = resource.Default()
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{})}
	for _, sp := range o.SpanProcessors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	exporting := len(o.SpanProcessors) > 0
	if configured("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, err
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			topts = append(topts, sdktrace.WithBatcher(exp))
			exporting = true
		}
	}
	if exporting {
		tp := sdktrace.NewTracerProvider(topts...)
		p.Tracer = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
	}
	prom, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(prom), sdkmetric.WithResource(res)}
	for _, r := range o.MetricReaders {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	if configured("OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, err
		}
		if !autoexport.IsNoneMetricReader(r) {
			mopts = append(mopts, sdkmetric.WithReader(r))
		}
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	p.Meter = mp
	p.shutdown = append(p.shutdown, mp.Shutdown)
	if !o.NoGlobals {
		otel.SetTracerProvider(p.Tracer)
		otel.SetMeterProvider(p.Meter)
	}
	return p, nil
}

// Shutdown flushes and stops the providers.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range p.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// errorHandler logs the SDK's errors as JSON through slog, the same error
// at most once a minute: an unreachable collector fails every export, and
// one line a minute says so as well as a line per batch.
type errorHandler struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]time.Time
}

func newErrorHandler(log *slog.Logger) *errorHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &errorHandler{log: log, last: map[string]time.Time{}}
}

// Handle implements otel.ErrorHandler.
func (h *errorHandler) Handle(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	h.mu.Lock()
	now := time.Now()
	if t, ok := h.last[msg]; ok && now.Sub(t) < time.Minute {
		h.mu.Unlock()
		return
	}
	if len(h.last) > 100 {
		clear(h.last)
	}
	h.last[msg] = now
	h.mu.Unlock()
	h.log.Warn("telemetry", "err", msg)
}

// idGenerator makes random trace and span ids, except for a root span
// started with tracectx.WithRootIDs, which takes the ids asked for.
type idGenerator struct{}

// NewIDs implements sdktrace.IDGenerator.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, sid, ok := tracectx.RootIDs(ctx); ok {
		return tid, sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.LittleEndian.PutUint64(tid[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

// NewSpanID implements sdktrace.IDGenerator.
func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.LittleEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
