package client

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// ForkOptions say where a fork (Client.Fork) executes from.
type ForkOptions struct {
	// Step is the step the fork executes again, with every step recorded
	// after it: the steps the run completed before it (in the order of
	// its history) replay from their recorded results. "" forks from the
	// start, reusing nothing. A step the run did not record is
	// ErrInvalidArgument.
	Step string
	// Version pins the fork to this version of the workflow; "" keeps the
	// run's version (deploy the fix under the same version, or name the
	// new one here).
	Version string
}

// Fork starts a new run that reruns run runID from a step (DBOS's fork,
// Temporal's reset, Inngest's rerun from a step): same type, queue, input,
// retry policy, priority and version, with the run's completed steps
// before opts.Step copied into its history, so only opts.Step and what
// follows it execute. It is PENDING and claimable at once; the run it was
// forked from is not changed, and the two are linked (Run.ForkedFrom,
// Run.Forks). One fork is made per (run, step): a repeated request returns
// it, with Handle.Created false. The fork takes no external id, deadline,
// parent or schedule from the run. An unknown run is ErrNotFound.
func (c *Client) Fork(ctx context.Context, runID uuid.UUID, opts ForkOptions) (*Handle, error) {
	f, err := c.st.RunsFork(ctx, store.RunsForkParams{Namespace: c.ns, RunID: runID, Step: opts.Step, Version: opts.Version})
	if err != nil {
		return nil, err
	}
	if f.Created {
		c.forkSpan(ctx, f)
	}
	return &Handle{c: c, RunID: f.Run.ID, Created: f.Created}, nil
}

// forkSpan records the fork as the first span of the fork's trace.
func (c *Client) forkSpan(ctx context.Context, f store.Fork) {
	_, span := c.tracer.Start(tracectx.WithTraceParent(ctx, f.Run.TraceContext), "kagzi.fork "+f.Run.Type,
		trace.WithAttributes(attribute.String("kagzi.run_id", f.Run.ID.String()), attribute.String("kagzi.workflow_type", f.Run.Type),
			attribute.String("kagzi.forked_from", f.From.String()), attribute.String("kagzi.forked_at_step", f.Step)))
	span.End()
}

// ForkWorkflow is Client.Fork for a run of the workflow ref declares: the
// handle's Result is an Out. A run of another type is ErrInvalidArgument,
// and nothing is forked.
func ForkWorkflow[In, Out any](ctx context.Context, c *Client, ref workflow.Ref[In, Out], runID uuid.UUID, opts ForkOptions) (*TypedHandle[Out], error) {
	r, err := c.st.RunsGet(ctx, c.ns, runID)
	if err != nil {
		return nil, err
	}
	if r.Type != ref.Name() {
		return nil, fmt.Errorf("fork run %s: %w: it is a run of %q, not %q", runID, ErrInvalidArgument, r.Type, ref.Name())
	}
	h, err := c.Fork(ctx, runID, opts)
	if err != nil {
		return nil, err
	}
	return &TypedHandle[Out]{Handle: h}, nil
}

// ForkFilter selects the runs Client.ForkMany forks and says from where.
// The selection is that of the console's dead-letter view: failed runs by
// type and error group.
type ForkFilter struct {
	// Type selects runs of this workflow type ("" any).
	Type string
	// Status selects runs in this status ("" FAILED).
	Status RunStatus
	// ErrorGroup selects runs whose error has this fingerprint: digits,
	// ids and quoted values masked, as the dead-letter view groups them
	// ("" any).
	ErrorGroup string
	// ErrorType selects runs whose failed step failed with this error type
	// (workflow.Error's type; "" any).
	ErrorType string
	// Since and Until select runs that finished in [Since, Until) (zero:
	// unbounded).
	Since, Until time.Time
	// Step forks every run from this step; runs that did not record it are
	// skipped (ForkResult.Skipped). "" without FromFailedStep forks from
	// the start.
	Step string
	// FromFailedStep forks each run from its failed step, the one whose
	// failure ended it; a run without one (its own code failed) is forked
	// from the start.
	FromFailedStep bool
	// Version pins the forks ("" keeps each run's version).
	Version string
	// Limit bounds how many runs are selected, those that finished last
	// first (0: 1000; at most 10,000).
	Limit int
}

// ForkResult reports a ForkMany.
type ForkResult struct {
	// Matched runs were selected: Forked of them were forked now,
	// AlreadyForked had been forked from the same step before (their fork
	// is listed, not made again), Skipped did not record ForkFilter.Step.
	Matched, Forked, AlreadyForked, Skipped int
	Forks                                   []ForkedRun
}

// ForkedRun is one fork ForkMany made or found.
type ForkedRun struct {
	// From is the run forked, Step the step it was forked at.
	From uuid.UUID
	Step string
	// RunID is the fork; Created is false for a fork made before.
	RunID   uuid.UUID
	Created bool
}

// ForkMany forks every run f selects, each as Fork would, in one
// transaction: a bulk rerun of dead letters after a fix. It is idempotent
// like Fork: a second call forks nothing twice and counts the forks that
// exist in AlreadyForked.
func (c *Client) ForkMany(ctx context.Context, f ForkFilter) (ForkResult, error) {
	p := store.RunsForkManyParams{Namespace: c.ns, Type: f.Type, Status: f.Status, ErrorGroup: f.ErrorGroup,
		ErrorType: f.ErrorType, Step: f.Step, FromFailedStep: f.FromFailedStep, Version: f.Version, Limit: f.Limit}
	if !f.Since.IsZero() {
		p.FinishedAfter = &f.Since
	}
	if !f.Until.IsZero() {
		p.FinishedBefore = &f.Until
	}
	res, err := c.st.RunsForkMany(ctx, p)
	if err != nil {
		return ForkResult{}, err
	}
	out := ForkResult{Matched: res.Matched, Forked: res.Forked, AlreadyForked: res.AlreadyForked, Skipped: res.Skipped}
	for _, fk := range res.Forks {
		if fk.Created {
			c.forkSpan(ctx, fk)
		}
		out.Forks = append(out.Forks, ForkedRun{From: fk.From, Step: fk.Step, RunID: fk.Run.ID, Created: fk.Created})
	}
	return out, nil
}

// forkLinks fills r's fork links.
func (c *Client) forkLinks(ctx context.Context, r *Run) error {
	l, err := c.st.RunsForkLinks(ctx, c.ns, r.ID)
	if err != nil {
		return err
	}
	r.ForkedFrom, r.ForkedAtStep, r.Forks = l.ForkedFrom, l.ForkedAtStep, l.Forks
	return nil
}
