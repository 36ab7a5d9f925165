// Package tracectx carries W3C trace context where Kagzi needs it: on
// NATS message headers and as the traceparent string stored on a run. It
// depends on the OpenTelemetry API only, so the worker SDK can use it.
package tracectx

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the W3C trace-context propagator Kagzi uses everywhere.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// HeaderCarrier adapts nats.Header to propagation.TextMapCarrier.
type HeaderCarrier nats.Header

// Get implements propagation.TextMapCarrier.
func (h HeaderCarrier) Get(key string) string { return nats.Header(h).Get(key) }

// Set implements propagation.TextMapCarrier.
func (h HeaderCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }

// Keys implements propagation.TextMapCarrier.
func (h HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Msg returns a NATS message for subject carrying data and the W3C trace
// context of ctx in its headers.
func Msg(ctx context.Context, subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	Propagator.Inject(ctx, HeaderCarrier(m.Header))
	return m
}

// FromMsg returns ctx carrying the trace context of m's headers.
func FromMsg(ctx context.Context, m *nats.Msg) context.Context {
	if m == nil || m.Header == nil {
		return ctx
	}
	return Propagator.Extract(ctx, HeaderCarrier(m.Header))
}

// TraceParent returns the W3C traceparent of ctx's span ("" if none).
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceParent returns ctx with tp (a W3C traceparent) as the remote
// parent span context; a malformed tp leaves ctx unchanged.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

type rootIDsKey struct{}

type rootIDs struct {
	tid trace.TraceID
	sid trace.SpanID
}

// WithRootIDs returns ctx asking that a root span started with it take
// trace id tid and span id sid: a span whose id was chosen before it was
// reported, such as the root of a run's trace that the store started. The
// id generator of internal/telemetry's providers honours it; other
// providers ignore it (compare the span's ids before ending it).
func WithRootIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, rootIDsKey{}, rootIDs{tid, sid})
}

// RootIDs returns the ids WithRootIDs put on ctx.
func RootIDs(ctx context.Context) (trace.TraceID, trace.SpanID, bool) {
	r, ok := ctx.Value(rootIDsKey{}).(rootIDs)
	return r.tid, r.sid, ok && r.tid.IsValid() && r.sid.IsValid()
}
