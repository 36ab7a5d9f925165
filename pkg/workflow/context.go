package workflow

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
)

// Context is the context of one execution of a workflow run. It is a
// context.Context, cancelled when the run is cancelled, when the worker
// loses its lease on the run, when the run's deadline passes or when a
// draining worker gives the run up; context.Cause tells which (ErrCancelled,
// ErrLeaseLost, ErrDraining, context.DeadlineExceeded).
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
	// run is retried, not when a run is replayed after a sleep.
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

func (c *wfContext) RunID() uuid.UUID      { return c.ex.run.RunID }
func (c *wfContext) Attempt() int          { return c.ex.run.Attempt }
func (c *wfContext) Type() string          { return c.ex.run.Type }
func (c *wfContext) Version() string       { return c.ex.run.Version }
func (c *wfContext) Namespace() string     { return c.ex.run.Namespace }
func (c *wfContext) Logger() *slog.Logger  { return c.ex.log }
func (c *wfContext) execution() *execution { return c.ex }
