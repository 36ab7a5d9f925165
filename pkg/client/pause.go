package client

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/kagzitype"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// Pause and resume (docs/pause.md): a paused run, or any run of a paused
// queue or workflow type, is not claimed until it is resumed. What makes
// it due meanwhile (its wake time, a retry backoff's end, an event) is
// recorded and waits; no attempt is counted for a pause.

// MaxPauseReasonLen bounds, in bytes, PauseOptions.Reason.
const MaxPauseReasonLen = store.MaxPauseReasonLen

// DefaultPausedBy is who a pause is recorded as made by when
// PauseOptions.By is empty.
const DefaultPausedBy = "client"

// PauseOptions say who pauses and why; both are recorded and shown by
// `kagzi run show`, the console and Get (Run.Paused).
type PauseOptions struct {
	// Reason says why (printable text, at most MaxPauseReasonLen bytes).
	Reason string
	// By names who paused (printable, at most 200 bytes); empty is
	// DefaultPausedBy.
	By string
}

func (o PauseOptions) store() store.PauseOptions {
	if o.By == "" {
		o.By = DefaultPausedBy
	}
	return store.PauseOptions{By: o.By, Reason: o.Reason}
}

// Pause is who paused a run, a queue or a workflow type, why and when
// (Run.Paused).
type Pause = kagzitype.Pause

// RunPause is what PauseRun did.
type RunPause struct {
	// Status is the run's: a pause does not change it. A RUNNING run
	// finishes the step it is in, then gives its lease back and waits.
	Status RunStatus
	// AlreadyPaused: the run was paused before; nothing changed and
	// Pause is that earlier pause.
	AlreadyPaused bool
	Pause         Pause
}

// PauseRun pauses a live run: it is not claimed until ResumeRun. A run
// executing a step finishes that step (its result is recorded), then
// stops. Pausing a paused run changes nothing (RunPause.AlreadyPaused);
// pausing a finished run is an error wrapping ErrRunFinished (an
// ErrConflict), an unknown run ErrNotFound.
func (c *Client) PauseRun(ctx context.Context, id uuid.UUID, o PauseOptions) (RunPause, error) {
	r, err := c.st.RunsPause(ctx, c.ns, id, o.store())
	if err != nil {
		return RunPause{}, err
	}
	return RunPause{Status: r.Status, AlreadyPaused: !r.Paused, Pause: r.Pause}, nil
}

// RunResume is what ResumeRun did.
type RunResume struct {
	Status RunStatus
	// WasPaused is false when the run was not paused (nothing changed).
	WasPaused bool
	// DueAt is when the run is claimable again (nil while it still waits
	// for an event or a child, or runs).
	DueAt *time.Time
}

// ResumeRun resumes a paused run: it is claimable when it would have
// been without the pause (at once if that time has passed), and the
// dispatchers of its queue are woken. Resuming a run that is not paused
// changes nothing (RunResume.WasPaused false), so two resumes make one
// claim.
func (c *Client) ResumeRun(ctx context.Context, id uuid.UUID) (RunResume, error) {
	r, err := c.st.RunsResume(ctx, c.ns, id)
	if err != nil {
		return RunResume{}, err
	}
	return RunResume{Status: r.Status, WasPaused: r.Resumed, DueAt: r.DueAt}, nil
}

// PausedScope is a paused queue or workflow type.
type PausedScope struct {
	// Kind is "queue" or "type".
	Kind string
	Name string
	Pause
}

// PauseQueue pauses a task queue of the client's namespace: none of its
// runs is claimed until ResumeQueue. Runs that hold a lease go on until
// they next suspend (a sleep, a wait, a retry backoff) or end. already
// is true when the queue was paused before (the first pause is kept).
func (c *Client) PauseQueue(ctx context.Context, queue string, o PauseOptions) (p PausedScope, already bool, err error) {
	return c.pauseScope(ctx, store.PauseQueue, queue, o)
}

// ResumeQueue resumes a paused queue and wakes its dispatchers. A queue
// that is not paused is ErrNotFound.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	_, err := c.st.PausesRemove(ctx, c.ns, store.PauseQueue, queue)
	return err
}

// PauseType pauses a workflow type of the client's namespace on every
// queue, as PauseQueue pauses a queue.
func (c *Client) PauseType(ctx context.Context, workflowType string, o PauseOptions) (p PausedScope, already bool, err error) {
	return c.pauseScope(ctx, store.PauseType, workflowType, o)
}

// ResumeType resumes a paused workflow type and wakes the dispatchers of
// the queues with runs of it due. A type that is not paused is
// ErrNotFound.
func (c *Client) ResumeType(ctx context.Context, workflowType string) error {
	_, err := c.st.PausesRemove(ctx, c.ns, store.PauseType, workflowType)
	return err
}

// ListPaused lists the paused queues and workflow types of the client's
// namespace, queues first, by name.
func (c *Client) ListPaused(ctx context.Context) ([]PausedScope, error) {
	ps, err := c.st.PausesList(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	out := make([]PausedScope, len(ps))
	for i, p := range ps {
		out[i] = PausedScope{Kind: string(p.Kind), Name: p.Name, Pause: p.Pause}
	}
	return out, nil
}

func (c *Client) pauseScope(ctx context.Context, kind store.PauseKind, name string, o PauseOptions) (PausedScope, bool, error) {
	p, added, err := c.st.PausesAdd(ctx, c.ns, kind, name, o.store())
	if err != nil {
		return PausedScope{}, false, err
	}
	return PausedScope{Kind: string(p.Kind), Name: p.Name, Pause: p.Pause}, !added, nil
}

// RetryStepNowOptions are new retry options for the failing step, as
// Temporal's update of an activity's options: each field set replaces the
// workflow code's value (workflow.WithRetry) for the step's next attempts
// in the run's current attempt; a zero field keeps the code's. The
// attempts made so far stay counted, so a MaxAttempts at or below them
// makes the next failure final. Bounds (else ErrInvalidArgument):
// MaxAttempts 1 to retry.MaxOverrideAttempts, each interval positive and
// at most retry.MaxOverrideInterval (the initial no longer than the
// maximum when both are set), BackoffCoefficient 1 to
// retry.MaxOverrideBackoff. Intervals are kept to whole milliseconds. The
// jitter and the non-retryable error types stay the code's.
type RetryStepNowOptions struct {
	MaxAttempts        int
	InitialInterval    time.Duration
	MaxInterval        time.Duration
	BackoffCoefficient float64
}

// policy is o as the override the store checks and keeps (nil: none).
func (o RetryStepNowOptions) policy() *retry.Policy {
	p := retry.Policy{MaxAttempts: o.MaxAttempts, InitialInterval: o.InitialInterval, MaxInterval: o.MaxInterval,
		BackoffCoefficient: o.BackoffCoefficient}
	if p.IsZero() {
		return nil
	}
	return &p
}

// RetryStepNow makes a run that backs off before a failing step's next
// attempt try it at once (Temporal's activity reset), and returns the
// steps it did that for. The attempts counted so far stay counted; a
// paused run's attempt waits for its resume. A run that backs off before
// no step's attempt (running, sleeping, waiting, finished) is ErrConflict.
// With options (at most one), the step's next attempts follow new retry
// options (RetryStepNowOptions), kept with the run's history so every
// replay decides as the first execution did.
func (c *Client) RetryStepNow(ctx context.Context, id uuid.UUID, opts ...RetryStepNowOptions) ([]string, error) {
	var override *retry.Policy
	switch len(opts) {
	case 0:
	case 1:
		override = opts[0].policy()
	default:
		return nil, fmt.Errorf("%w: RetryStepNow takes at most one RetryStepNowOptions, got %d", ErrInvalidArgument, len(opts))
	}
	r, err := c.st.RunsRetryStepNow(ctx, c.ns, id, override)
	if err != nil {
		return nil, err
	}
	return r.Steps, nil
}
