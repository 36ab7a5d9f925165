package client

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// SignalWithStartRequest is an event for the live run with an external id,
// and the run to start if there is none.
type SignalWithStartRequest struct {
	// Type is the workflow type of the run to start; a live run holding
	// the external id must be of this type (ErrConflict otherwise).
	Type string
	// ExternalID names the run (required).
	ExternalID string
	// Input of the run to start (encoded as JSON); unused when a live run
	// holds the id.
	Input any
	// Event is the event's name, Payload its payload (encoded as JSON; nil
	// is null).
	Event   string
	Payload any
	// Options of the run to start; unused when a live run holds the id.
	// Options.ExternalID must be empty or ExternalID.
	Options StartOptions
}

// SignalWithStartResult says which run got the event.
type SignalWithStartResult struct {
	// Handle is the run's; Handle.Created equals Started.
	Handle *Handle
	// Started reports that the call started the run.
	Started bool
	// Event is the event stored, with the run's status and queue as the
	// event found them (PENDING for a run just started).
	Event SentEvent
}

// SignalWithStart sends an event to the live run holding an external id,
// starting the run first if none is live, atomically: the event is stored
// on a run while it is live, never on one that finished meanwhile, and
// callers racing with the same id reach the one live run (or start it).
// The run receives it in WaitForEvent or DrainEvents like an event of
// SendEvent, and cannot end past it: if the event's name is one the
// ending execution waited for or drained and the event came during that
// execution, the engine refuses the end and executes the run again with
// it. So a workflow that drains its event names right before it returns
// (its last durable calls, see workflow.DrainEvents) receives every
// caller's event, whatever the timing; one that never waits for or drains
// the name (or not after the event came) ends with the event unreceived
// (shown so by `kagzi run show` and the console), never silently dropped.
// A finished run with the id does not count: a new run starts. A live run
// of another workflow type than req.Type is ErrConflict, and nothing is
// stored.
func (c *Client) SignalWithStart(ctx context.Context, req SignalWithStartRequest) (SignalWithStartResult, error) {
	if req.ExternalID == "" {
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start: %w: external id is required", store.ErrInvalidArgument)
	}
	if req.Options.ExternalID != "" && req.Options.ExternalID != req.ExternalID {
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start: %w: options name external id %q, the request %q",
			store.ErrInvalidArgument, req.Options.ExternalID, req.ExternalID)
	}
	if err := protocol.ValidEventName(req.Event); err != nil {
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start: %w: %v", store.ErrInvalidArgument, err)
	}
	payload, err := encodeInput(req.Payload)
	if err != nil {
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start: event %q: %w", req.Event, err)
	}
	opts := req.Options
	opts.ExternalID = req.ExternalID
	p, err := c.params(req.Type, req.Input, opts)
	if err != nil {
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start %s: %w", req.Type, err)
	}
	ctx, span := c.startSpan(ctx, &p)
	defer span.End()
	sent, err := c.st.EventsSendWithStart(ctx, store.EventsSendWithStartParams{Run: p, Name: req.Event, Payload: payload})
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return SignalWithStartResult{}, fmt.Errorf("signal-with-start %s: %w", req.Type, err)
	}
	span.SetAttributes(attribute.String("kagzi.run_id", sent.RunID.String()), attribute.Bool("kagzi.created", sent.Started),
		attribute.String("kagzi.event", req.Event))
	if sent.Started {
		c.started.Add(ctx, 1, metric.WithAttributes(attribute.String("namespace", c.ns), attribute.String("queue", p.Queue),
			attribute.String("workflow_type", p.Type)))
	}
	return SignalWithStartResult{
		Handle:  &Handle{c: c, RunID: sent.RunID, Created: sent.Started},
		Started: sent.Started,
		Event:   sentEvent(sent.SentEvent),
	}, nil
}

// SignalWithStartWorkflow is SignalWithStart for the workflow ref declares:
// it sends the event named event with payload to the live run holding
// externalID, starting it with input in first if none is live, and returns
// the run's typed handle and whether this call started it. At most one
// StartOptions may be given; it applies only to a run this call starts.
func SignalWithStartWorkflow[In, Out any](ctx context.Context, c *Client, ref workflow.Ref[In, Out], externalID string, in In,
	event string, payload any, opts ...StartOptions) (*TypedHandle[Out], bool, error) {
	var o StartOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return nil, false, fmt.Errorf("signal-with-start %s: %w: at most one StartOptions, got %d", ref.Name(), store.ErrInvalidArgument, len(opts))
	}
	res, err := c.SignalWithStart(ctx, SignalWithStartRequest{Type: ref.Name(), ExternalID: externalID, Input: in,
		Event: event, Payload: payload, Options: o})
	if err != nil {
		return nil, false, err
	}
	return &TypedHandle[Out]{Handle: res.Handle}, res.Started, nil
}
