package store

import (
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

// traceOr returns tc, or a fresh traceparent when tc is empty.
func traceOr(tc string) (string, error) {
	if tc != "" {
		return tc, nil
	}
	return newTraceParent()
}
