// Package telemetry owns Kagzi's OpenTelemetry setup: tracer and meter
// providers built from the standard OTEL_* environment (OTLP over gRPC or
// HTTP; nothing configured means no traces are exported), a Prometheus
// /metrics handler per process. Trace-context propagation lives in package
// tracectx, which the worker SDK can import without the exporters.
package telemetry

import (
	"context"
	"errors"
	"net/http"
	"os"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kagzi/kagzi/internal/tracectx"
)

// Providers are one process's telemetry.
type Providers struct {
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
	// Metrics serves the Prometheus exposition of Meter's instruments.
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

// Setup builds the providers for service from the environment and installs
// them as the globals. Traces are exported only when OTEL_TRACES_EXPORTER
// or an OTLP endpoint is set; metrics are always served on Metrics and also
// exported by OTLP when configured.
func Setup(ctx context.Context, service string) (*Providers, error) {
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		_ = os.Setenv("OTEL_SERVICE_NAME", service)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service)))
	if err != nil {
		res = resource.Default()
	}
	if envRes, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, envRes); err == nil {
			res = merged
		}
	}
	p := &Providers{Tracer: noop.NewTracerProvider()}
	if configured("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, err
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
			p.Tracer = tp
			p.shutdown = append(p.shutdown, tp.Shutdown)
		}
	}
	reg := promclient.NewRegistry()
	prom, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(prom), sdkmetric.WithResource(res)}
	if configured("OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, err
		}
		if !autoexport.IsNoneMetricReader(r) {
			opts = append(opts, sdkmetric.WithReader(r))
		}
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	p.Meter = mp
	p.shutdown = append(p.shutdown, mp.Shutdown)
	p.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	otel.SetTracerProvider(p.Tracer)
	otel.SetMeterProvider(p.Meter)
	otel.SetTextMapPropagator(tracectx.Propagator)
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
