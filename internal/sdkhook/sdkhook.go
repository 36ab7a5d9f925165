// Package sdkhook carries what the public test kit (pkg/workflowtest)
// hands to the workflow runtime (pkg/workflow) beyond the public API: a
// replacement for step functions. It is internal so that applications
// cannot reach it except through the test kit.
package sdkhook

import (
	"context"
	"encoding/json"
)

// StepMock answers for attempt attempt of step stepID instead of its
// function: the output (JSON) or the error. ok false runs the function.
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
