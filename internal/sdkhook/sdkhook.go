// Package sdkhook carries what the public packages hand each other beyond
// their API: a replacement for step functions, from the test kit
// (pkg/workflowtest) to the workflow runtime (pkg/workflow), and pkg/client's
// constructor over the engine's store (see internal/engineclient). It is
// internal so that applications cannot reach either.
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

// NewClient is pkg/client's constructor over the engine's store, a
// func(*store.Store, *nats.Conn, client.Options) (*client.Client, error);
// pkg/client sets it when it is linked. It is untyped because pkg/client
// imports this package; internal/engineclient gives it its type.
var NewClient any
