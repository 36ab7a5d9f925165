package wfexec

import (
	"context"
	"encoding/json"
)

// StepMock answers for attempt attempt of step stepID instead of its
// function: the output (JSON) or the error. ok false runs the function.
// The test kit (pkg/workflowtest) executes runs with one; the worker never
// does.
type StepMock func(stepID string, attempt int) (output json.RawMessage, err error, ok bool)

type stepMockKey struct{}

// WithStepMock returns ctx carrying m; the runtime looks for it on the
// context an execution runs under.
func WithStepMock(ctx context.Context, m StepMock) context.Context {
	return context.WithValue(ctx, stepMockKey{}, m)
}

// StepMockFrom returns the mock ctx carries, or nil.
func StepMockFrom(ctx context.Context) StepMock {
	m, _ := ctx.Value(stepMockKey{}).(StepMock)
	return m
}
