package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// newTraceParent returns a fresh W3C traceparent (version 00, sampled) for
// a run created outside any trace: every run has a trace from birth, so the
// dispatcher's and the workers' spans of all its executions join one trace
// instead of each starting a root of their own. Its span id names the run's
// root, which no process reports when nothing traced the start; backends
// show the run's first spans under it (Jaeger notes the parent as absent).
func newTraceParent() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate trace context: %w", err)
	}
	// All-zero ids are invalid; with 128 random bits that is not going to
	// happen, but a zero span id would make the context unusable.
	b[23] |= 1
	b[0] |= 1
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01", nil
}

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

// traceOr returns tc, else the trace context ctx carries, else a fresh
// traceparent.
func traceOr(ctx context.Context, tc string) (string, error) {
	if tc != "" {
		return tc, nil
	}
	if v, ok := ctx.Value(traceKey{}).(string); ok && v != "" {
		return v, nil
	}
	return newTraceParent()
}
