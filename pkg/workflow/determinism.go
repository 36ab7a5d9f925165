package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
)

// counted returns base for the first call with that base in this
// execution and base#n for the n-th, as WaitForEvent names its steps.
func (ex *execution) counted(base string) string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.calls == nil {
		ex.calls = make(map[string]int)
	}
	ex.calls[base]++
	if n := ex.calls[base]; n > 1 {
		return base + "#" + strconv.Itoa(n)
	}
	return base
}

// SideEffect runs fn once, records its result as the step
// "side:<name>" ("side:<name>#<n>" for the n-th call with that name in a
// run) and returns it; replays return the recorded value without calling
// fn. Use it for small non-deterministic values a workflow branches on (a
// random id, a UUID, a configuration read) that need no retries: fn runs
// in the workflow's goroutine, is not retried, and must not fail or block
// for long (use Step for I/O). The calls must come in the same order on
// every execution, like steps; in Parallel branches, give each branch its
// own name.
func SideEffect[T any](ctx Context, name string, fn func() T) (T, error) {
	if fn == nil {
		var zero T
		return zero, fmt.Errorf("workflow: side effect %q: nil function", name)
	}
	id := ctx.execution().counted("side:" + name)
	return Step(ctx, id, func(context.Context) (T, error) { return fn(), nil }, WithRetry(retry.Policy{MaxAttempts: 1}))
}

// Now returns the current time as recorded for the run: the first
// execution reads the worker's clock and records it as the step "now"
// ("now#<n>" for the n-th call in a run); replays return the recorded time.
// Use it instead of time.Now wherever the time steers the workflow. Each
// call is recorded with the run's next report (no round trip of its own). In Parallel branches
// the calls' order may differ between executions; use SideEffect with a
// name per branch there.
func Now(ctx Context) time.Time {
	ex := ctx.execution()
	id := ex.counted("now")
	t, err := Step(ctx, id, func(context.Context) (time.Time, error) { return ex.now().UTC(), nil },
		WithRetry(retry.Policy{MaxAttempts: 1}), pureStep)
	if err != nil {
		// Only a misuse (a step of the same id) gets here, and it already
		// fails the run (a duplicate step id is fatal).
		ex.log.Error("workflow.Now could not record the time", "step_id", id, "err", err)
		return ex.now().UTC()
	}
	return t
}

// DefaultVersion is what Version returns for a run whose history passed
// the change before the code called Version there: the code as it was
// before the change.
const DefaultVersion = 0

// Version lets a workflow change while runs of the old code are in flight
// (patching). Wrap the change in a branch on what Version returns for a
// change id:
//
//	v, err := workflow.Version(ctx, "charge-in-cents", workflow.DefaultVersion, 1)
//	if v == workflow.DefaultVersion { /* old code */ } else { /* new code */ }
//
// A run that reaches the call for the first time records max (as the step
// "version:<changeID>") and gets it from then on. A run whose recorded
// history already goes past this point — it ran this part with the code
// from before the change — gets DefaultVersion, and nothing is recorded;
// if min is above DefaultVersion (support for the old code was dropped)
// that is a non-determinism error that fails the run. A recorded version
// outside [min, max] fails the run the same way. Later calls with the
// same change id in the execution return the same answer.
//
// The history "goes past this point" when the run has recorded steps the
// execution has not reached yet; in Parallel branches, call Version before
// the branches start.
func Version(ctx Context, changeID string, min, max int) (int, error) {
	if min > max {
		return 0, fmt.Errorf("workflow: version %q: min %d above max %d", changeID, min, max)
	}
	ex := ctx.execution()
	id := "version:" + changeID
	ex.mu.Lock()
	v, known := ex.versions[changeID]
	prev := ex.steps[id]
	ahead := false
	if prev == nil && !known {
		for sid := range ex.steps {
			if _, seen := ex.seen[sid]; !seen {
				ahead = true
				break
			}
		}
	}
	ex.mu.Unlock()
	switch {
	case known:
	case prev == nil && ahead:
		v = DefaultVersion
	default:
		got, err := Step(ctx, id, func(context.Context) (int, error) { return max, nil }, WithRetry(retry.Policy{MaxAttempts: 1}), pureStep)
		if err != nil {
			return 0, err
		}
		v = got
	}
	if v < min || v > max {
		return 0, ex.replayError("version %q: the run has version %d, the code supports %d to %d", changeID, v, min, max)
	}
	ex.mu.Lock()
	if ex.versions == nil {
		ex.versions = make(map[string]int)
	}
	ex.versions[changeID] = v
	ex.mu.Unlock()
	return v, nil
}

// ContinueAsNewError is what ContinueAsNew returns; the workflow returns
// it to end its run that way.
type ContinueAsNewError struct {
	input json.RawMessage
	err   error
}

func (e *ContinueAsNewError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "workflow: continue as new"
}

// Unwrap returns the error that kept the continuation from being made
// (an input that does not encode), if any.
func (e *ContinueAsNewError) Unwrap() error { return e.err }

// ContinueAsNew returns the error that, returned by the workflow function,
// ends the run and starts a fresh run of the same type, queue and external
// id with input (encoded as JSON) and an empty history — atomically: the
// run ends COMPLETED (without output, naming the new run) in the same
// transaction that starts the new one. Use it to keep a long-lived loop's
// history short (each delivery ships the run's history). The new run has
// the type's default version if one is set (else it is pinned by the
// worker that claims it) and no deadline. A client's Handle.Result follows
// the chain to the run that ends without continuing; events sent by
// external id go to the live run. A child run cannot continue as new: its
// run then fails (its parent waits for that run id).
//
//	return zero, workflow.ContinueAsNew(ctx, nextState)
func ContinueAsNew(ctx Context, input any) error {
	raw, err := encodeInput(input)
	if err != nil {
		return &ContinueAsNewError{err: NonRetryable(fmt.Errorf("workflow: continue as new: %w", err))}
	}
	return &ContinueAsNewError{input: raw}
}
