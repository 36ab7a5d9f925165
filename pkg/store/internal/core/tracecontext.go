package core

import (
	"context"

	"github.com/kagzi/kagzi/internal/tracectx"
)

// NewTraceParent is the trace context of a run created outside any trace
// (tracectx.NewBirth).
func NewTraceParent() (string, error) { return tracectx.NewBirth() }

type traceKey struct{}

// WithTraceContext returns ctx carrying tc, a W3C traceparent: a run this
// store creates with ctx takes it when its parameters name none (e.g. a
// schedule's trigger, whose caller traces the start).
func WithTraceContext(ctx context.Context, tc string) context.Context {
	if tc == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tc)
}

// TraceOr returns tc, else the trace context ctx carries, else a fresh
// traceparent.
func TraceOr(ctx context.Context, tc string) (string, error) {
	if tc != "" {
		return tc, nil
	}
	if v, ok := ctx.Value(traceKey{}).(string); ok && v != "" {
		return v, nil
	}
	return NewTraceParent()
}
