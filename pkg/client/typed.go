package client

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/workflow"
)

// TypedHandle refers to a started run of a workflow declared with
// workflow.New: its Result is the workflow's output type.
type TypedHandle[Out any] struct {
	*Handle
}

// Result waits for the run to finish (following continue-as-new, like
// Handle.Result) and returns its output. A run that failed or was
// cancelled returns a *RunError.
func (h *TypedHandle[Out]) Result(ctx context.Context) (Out, error) {
	var out Out
	err := h.Handle.Result(ctx, &out)
	return out, err
}

// StartWorkflow starts a run of the workflow ref declares with input in,
// and returns a handle whose Result is an Out. A run whose type no worker
// serves yet waits PENDING until one registers it; set
// StartOptions.RequireWorker to refuse such a start with ErrNoWorker
// instead.
func StartWorkflow[In, Out any](ctx context.Context, c *Client, ref workflow.Ref[In, Out], in In, opts StartOptions) (*TypedHandle[Out], error) {
	h, err := c.Start(ctx, ref.Name(), in, opts)
	if err != nil {
		return nil, err
	}
	return &TypedHandle[Out]{Handle: h}, nil
}

// StartWorkflowTx is StartWorkflow inside the caller's transaction (see
// Client.StartTx).
func StartWorkflowTx[In, Out any](ctx context.Context, c *Client, tx pgx.Tx, ref workflow.Ref[In, Out], in In, opts StartOptions) (*TypedHandle[Out], error) {
	h, err := c.StartTx(ctx, tx, ref.Name(), in, opts)
	if err != nil {
		return nil, err
	}
	return &TypedHandle[Out]{Handle: h}, nil
}

// HandleFor returns a typed handle for an existing run of the workflow ref
// declares (the caller vouches for the run's type).
func HandleFor[In, Out any](c *Client, ref workflow.Ref[In, Out], id uuid.UUID) *TypedHandle[Out] {
	return &TypedHandle[Out]{Handle: c.Handle(id)}
}

// ScheduleWorkflow creates a schedule that starts a run of the workflow
// ref declares with input in at every time of its cron expression (see
// Client.CreateSchedule).
func ScheduleWorkflow[In, Out any](ctx context.Context, c *Client, ref workflow.Ref[In, Out], in In, o ScheduleOptions) (*Schedule, error) {
	return c.CreateSchedule(ctx, ref.Name(), in, o)
}
