package workflow

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
)

// Context is the context of one execution of a workflow run. It is a
// context.Context, cancelled when the run is asked to cancel (cause
// ErrCancelled: the workflow may handle it, see ErrCancelled and
// WithoutCancel), and when the execution is abandoned: the worker lost its
// lease on the run, the run was terminated, its deadline passed, or a
// draining worker gave it up; context.Cause tells which (ErrLeaseLost,
// ErrTerminated, context.DeadlineExceeded, ErrDraining).
//
// A Context is made by the runtime for each execution; it cannot be
// implemented outside this package. Values and deadlines added with the
// context package produce a plain context.Context, which steps accept but
// Step and Sleep do not.
type Context interface {
	context.Context
	// RunID is the id of the run.
	RunID() uuid.UUID
	// Attempt is the run's attempt number, from 1; it grows when a failed
	// run is retried, not when a run is replayed after a sleep or taken
	// back after its worker was lost.
	Attempt() int
	// Type is the workflow type the run was started with.
	Type() string
	// Version is the workflow version the run was started with ("" if none).
	Version() string
	// Namespace is the run's namespace.
	Namespace() string
	// Logger logs with the run's id, type and attempt attached.
	Logger() *slog.Logger

	execution() *execution
}

type wfContext struct {
	context.Context
	ex *execution
}

// WithoutCancel returns a Context that a cancel request does not end, for
// the cleanup a workflow runs after it was asked to cancel: steps, sleeps,
// waits and children called with it run as usual. It still ends when the
// execution is abandoned (lease lost, terminated, deadline, drain), and it
// keeps ctx's values.
func WithoutCancel(ctx Context) Context {
	ex := ctx.execution()
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// Ends with the execution, which always ends (its context is cancelled
	// when the execution returns), so the registration does not outlive it.
	context.AfterFunc(ex.ctx, func() { cancel(context.Cause(ex.ctx)) })
	return &wfContext{Context: c, ex: ex}
}

func (c *wfContext) RunID() uuid.UUID      { return c.ex.run.RunID }
func (c *wfContext) Attempt() int          { return c.ex.run.Attempt }
func (c *wfContext) Type() string          { return c.ex.run.Type }
func (c *wfContext) Version() string       { return c.ex.run.Version }
func (c *wfContext) Namespace() string     { return c.ex.run.Namespace }
func (c *wfContext) Logger() *slog.Logger  { return c.ex.log }
func (c *wfContext) execution() *execution { return c.ex }
