package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// ChildOption configures a child run.
type ChildOption interface {
	applyChild(*protocol.ChildSpec)
}

type childOptionFunc func(*protocol.ChildSpec)

func (f childOptionFunc) applyChild(c *protocol.ChildSpec) { f(c) }

// WithChildQueue starts the child in task queue q (default: the parent's).
func WithChildQueue(q string) ChildOption {
	return childOptionFunc(func(c *protocol.ChildSpec) { c.Queue = q })
}

// WithChildVersion pins the child's workflow version (default: the version
// of the first worker that claims it).
func WithChildVersion(v string) ChildOption {
	return childOptionFunc(func(c *protocol.ChildSpec) { c.Version = v })
}

// WithChildRetry sets the child run's retry policy (default: the defaults
// of package retry).
func WithChildRetry(p retry.Policy) ChildOption {
	return childOptionFunc(func(c *protocol.ChildSpec) { pp := p; c.RetryPolicy = &pp })
}

// ParentClosePolicy says what happens to a child run still live when its
// parent ends (completes, fails, is cancelled or terminated, or passes its
// deadline). The default is ParentCloseTerminate, as in Temporal.
type ParentClosePolicy string

// Parent-close policies.
const (
	// ParentCloseTerminate terminates the child when the parent ends.
	ParentCloseTerminate ParentClosePolicy = "TERMINATE"
	// ParentCloseRequestCancel asks the child to cancel when the parent
	// ends (its context is cancelled; it may clean up).
	ParentCloseRequestCancel ParentClosePolicy = "REQUEST_CANCEL"
	// ParentCloseAbandon leaves the child running when the parent ends. A
	// request to cancel the parent is not passed on to it either.
	ParentCloseAbandon ParentClosePolicy = "ABANDON"
)

// WithParentClosePolicy sets what happens to the child if the parent ends
// before it (default ParentCloseTerminate). A request to cancel the parent
// is passed on to children whose policy is not ParentCloseAbandon.
func WithParentClosePolicy(p ParentClosePolicy) ChildOption {
	return childOptionFunc(func(c *protocol.ChildSpec) { c.ParentClosePolicy = string(p) })
}

// WithChildPriority sets the child run's priority (higher is claimed first).
func WithChildPriority(p int) ChildOption {
	return childOptionFunc(func(c *protocol.ChildSpec) { c.Priority = p })
}

// ChildError is the error of a child run that failed or was cancelled, as
// its parent sees it.
type ChildError struct {
	// StepID is the parent's step that started the child.
	StepID string
	// RunID is the child run.
	RunID uuid.UUID
	// Type is "ChildFailed" or "ChildCancelled".
	Type string
	// Message is the child's error.
	Message string
}

// Error returns the child's error.
func (e *ChildError) Error() string { return e.Message }

// ErrorType implements TypedError.
func (e *ChildError) ErrorType() string { return e.Type }

// ChildFuture is a child run started by StartChild. Get waits for its
// result.
type ChildFuture[Out any] struct {
	ex      *execution
	stepID  string
	attempt int
	runID   uuid.UUID
	err     error
}

// RunID is the child run's id (uuid.Nil if it could not be started).
func (f *ChildFuture[Out]) RunID() uuid.UUID { return f.runID }

// StartChild starts a run of workflow type typ with input (encoded as JSON)
// as the child step id of the run, and returns at once: the child runs on
// whichever worker claims it, while the parent goes on. Get (or ChildAll,
// for many) waits for its result.
//
// The child's run id is derived from the parent's run id and the step id,
// so a replayed parent finds the child it started before instead of
// starting another; the child is recorded as a CHILD step of the parent,
// whose output is the child's. Starting is sent to the engine with the
// parent's next report (so starting many children costs one round trip).
// A child that failed in an earlier attempt of the parent run is started
// again (as a new child run) when the parent is retried.
//
// Errors (a bad or duplicate id, a bad type, an input that does not
// encode) are returned by Get.
func StartChild[Out any](ctx Context, id, typ string, input any, opts ...ChildOption) *ChildFuture[Out] {
	ex := ctx.execution()
	f := &ChildFuture[Out]{ex: ex, stepID: id}
	prev, err := ex.enter(ctx, id)
	if err != nil {
		f.err = err
		return f
	}
	f.attempt = 1
	if prev != nil {
		f.attempt = prev.Attempt
		if prev.Status != stepFailed || ex.sameEpoch(prev) {
			// Started before: running, or finished in this run attempt.
			f.runID = protocol.ChildRunID(ex.run.RunID, id, f.attempt)
			return f
		}
		// Failed in an earlier run attempt: start a new child.
		f.attempt++
	}
	if err := cancelled(ctx); err != nil {
		f.err = err
		return f
	}
	if err := protocol.ValidToken("child workflow type", typ); err != nil {
		f.err = NonRetryable(fmt.Errorf("workflow: child %q: %w", id, err))
		return f
	}
	raw, err := encodeInput(input)
	if err == nil {
		err = ex.checkPayload("input", raw)
	}
	if err != nil {
		f.err = NonRetryable(fmt.Errorf("workflow: child %q: %w", id, err))
		return f
	}
	spec := &protocol.ChildSpec{Type: typ, Input: raw}
	for _, opt := range opts {
		if opt != nil {
			opt.applyChild(spec)
		}
	}
	now := ex.now()
	it := ex.item(protocol.ReportChildStart)
	it.StepID = id
	it.Attempt = f.attempt
	it.Child = spec
	it.StartedAt = &now
	ex.mu.Lock()
	ex.started[id] = true
	ex.mu.Unlock()
	ex.later(it)
	f.runID = protocol.ChildRunID(ex.run.RunID, id, f.attempt)
	return f
}

func encodeInput(input any) (json.RawMessage, error) {
	switch v := input.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("input is not valid JSON")
		}
		return v, nil
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	return raw, nil
}

// Get waits durably for the child run to finish and returns its output
// decoded into Out, or a *ChildError if it failed or was cancelled. Until
// the child finishes, the parent is suspended (it holds no worker slot);
// the child's end wakes it. Get may be called again (it returns the same).
func (f *ChildFuture[Out]) Get(ctx Context) (Out, error) {
	outs, errs := awaitChildren(ctx, []*ChildFuture[Out]{f})
	return outs[0], errs[0]
}

// Child starts a child run and waits for its result: StartChild followed by
// Get.
func Child[Out any](ctx Context, id, typ string, input any, opts ...ChildOption) (Out, error) {
	return StartChild[Out](ctx, id, typ, input, opts...).Get(ctx)
}

// ChildAll waits for every child in fs (fan-in) and returns their outputs
// in order. The parent is suspended once, until the last of them finishes.
// The error joins the errors of the children that failed (their outputs are
// zero); errors.As finds each *ChildError.
func ChildAll[Out any](ctx Context, fs []*ChildFuture[Out]) ([]Out, error) {
	outs, errs := awaitChildren(ctx, fs)
	return outs, errors.Join(errs...)
}

// awaitChildren parks until every child in fs has finished, then returns
// each one's output or error.
func awaitChildren[Out any](ctx Context, fs []*ChildFuture[Out]) ([]Out, []error) {
	ex := ctx.execution()
	outs := make([]Out, len(fs))
	errs := make([]error, len(fs))
	if ex.ctx.Err() != nil {
		ex.abandon(ex.ctx.Err())
	}
	var waiting []string
	ex.mu.Lock()
	for i, f := range fs {
		if f == nil {
			errs[i] = errors.New("workflow: nil child future")
			continue
		}
		if f.err != nil {
			errs[i] = f.err
			continue
		}
		if ex.started[f.stepID] {
			waiting = append(waiting, f.stepID)
			continue
		}
		if s := ex.steps[f.stepID]; s == nil || s.Status == stepPending {
			waiting = append(waiting, f.stepID)
		}
	}
	ex.mu.Unlock()
	if len(waiting) > 0 {
		sort.Strings(waiting)
		if err := ex.park(ctx, &waiter{children: waiting}); err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
			return outs, errs
		}
	}
	for i, f := range fs {
		if errs[i] != nil {
			continue
		}
		s := ex.steps[f.stepID]
		switch s.Status {
		case stepCompleted:
			if out := ex.output(s); len(out) > 0 {
				if err := json.Unmarshal(out, &outs[i]); err != nil {
					errs[i] = NonRetryable(fmt.Errorf("workflow: child %q: output does not decode into %T: %w", f.stepID, outs[i], err))
				}
			}
		default:
			errs[i] = &ChildError{StepID: f.stepID, RunID: f.runID, Type: s.ErrorType, Message: s.Error}
		}
	}
	return outs, errs
}
