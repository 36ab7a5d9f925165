package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"runtime/debug"
	"time"

	"github.com/kagzi/kagzi/internal/metricattr"
	"github.com/kagzi/kagzi/internal/wfexec"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// StepOption configures one step.
type StepOption interface {
	applyStep(*stepOptions)
}

type stepOptions struct {
	timeout time.Duration
	policy  *retry.Policy
	// pure: the step function has no effect outside the run (Now,
	// Version), so the results held before it need not be durable first.
	pure bool
}

// pureStep marks the engine's own effect-free steps.
var pureStep = stepOptionFunc(func(o *stepOptions) { o.pure = true })

type stepOptionFunc func(*stepOptions)

func (f stepOptionFunc) applyStep(o *stepOptions) { f(o) }

// WithStepTimeout bounds one attempt of the step: the step function's
// context ends after d, and the attempt fails with the function's error.
// A d of zero or less means no timeout.
func WithStepTimeout(d time.Duration) StepOption {
	return stepOptionFunc(func(o *stepOptions) { o.timeout = d })
}

// WithRetry sets the step's retry policy (zero fields take the defaults of
// package retry). Without it a step gets retry.Default(): 5 attempts, 1 s
// before the second, ×2 each time, at most 60 s, ±20% jitter. Use
// retry.Policy{MaxAttempts: 1} for a step that must not be retried.
func WithRetry(p retry.Policy) StepOption {
	return stepOptionFunc(func(o *stepOptions) { o.policy = &p })
}

// Step runs fn as the durable step id of the run and returns its result.
//
// If the run's history records step id as completed, Step returns the
// recorded output decoded into T without running fn (replay). Otherwise it
// first makes durable what the run did before (results still held), runs
// fn with the run's context, records the outcome — the JSON encoding of
// the result, or the error — and returns it. The value returned is always
// the recorded JSON decoded into T, so a first execution and a replay see
// the same value. A result is held, not sent, when Step returns: workflow
// code between durable calls has no effect outside the run (it must be
// deterministic), so the result need only be durable before the next
// thing that has one. It goes with the run's next report (the next step's
// start waits for it; a sleep, wait, child start or the run's end carries
// it, applied in one transaction), so a run's last step costs no report of
// its own. A crash before then runs the step again.
//
// Retries. If fn fails (returns an error or panics), the failed attempt is
// recorded (every attempt is a step attempt of its own) and fn is tried
// again under the step's retry policy (WithRetry; default retry.Default()),
// unless the error is marked with NonRetryable or its ErrorType is listed in
// the policy's NonRetryable types. A short backoff (at most the worker's
// inline retry limit, 2 s by default) is waited for in place; a longer one
// suspends the run until the retry time, freeing the worker's slot, and the
// next attempt runs when the engine delivers the run again. A step that
// exhausts its attempts, or fails non-retryably, returns a *StepError with
// the recorded message, error type and non-retryable mark, wrapping its last
// error (errors.As finds the original in this execution); the workflow
// decides what to do with it. The budget counts attempts within one attempt of the run:
// when the run is retried (its workflow returned the error, or a manual
// retry of a failed run), a failed step gets a fresh budget. New retry
// options given to a failing step while it backs off (client.RetryStepNow
// with RetryStepNowOptions) replace the policy's max attempts, intervals
// and backoff coefficient for the step's next attempts in that run
// attempt; the attempts made stay counted.
//
// A failure the run already recorded as final (in this run attempt) is
// returned again on replay without running fn, as a *StepError with the
// recorded message and type: ErrorType(err) names the same type in the
// execution that ran the step and in every replay, so branch on it rather
// than on the Go type of the error.
//
// An id used twice in one execution returns an error wrapping
// ErrDuplicateStep and fails the run. If the run's context ends, or a
// report fails (lease lost), Step does not return: the execution is
// abandoned.
func Step[T any](ctx Context, id string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var zero T
	ex := ctx.execution()
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return zero, err
	}
	if prev != nil && prev.Status == stepCompleted {
		var v T
		if out := ex.output(prev); len(out) > 0 {
			if err := json.Unmarshal(out, &v); err != nil {
				return zero, ex.replayError("step %q: recorded output does not decode into %T: %v", id, v, err)
			}
		}
		return v, nil
	}
	if prev != nil && prev.Status == stepFailed && ex.sameEpoch(prev) && prev.RetryAt == nil {
		return zero, &StepError{StepID: id, Attempt: prev.Attempt, Type: prev.ErrorType, Message: prev.Error, NonRetryable: prev.NonRetryable}
	}
	var o stepOptions
	for _, opt := range opts {
		if opt != nil {
			opt.applyStep(&o)
		}
	}
	if !o.pure {
		// The step function may act outside the run: what the workflow
		// did before must be durable first. The reply may also carry a
		// cancel request, which the check below then sees.
		ex.flush()
	}
	if err := cancelled(ctx); err != nil {
		return zero, err
	}
	if fn == nil {
		return zero, fmt.Errorf("workflow: step %q: nil function", id)
	}
	policy := retry.Default()
	if o.policy != nil {
		policy = o.policy.WithDefaults()
	}
	attempt, tries := 1, 0
	if prev != nil {
		attempt = prev.Attempt + 1
		if prev.Status == stepFailed && ex.sameEpoch(prev) {
			// A retry scheduled by this run attempt (a final failure
			// returned above): continue its budget,
			// waiting for the rest of the backoff if delivered early.
			tries = prev.Tries
			// New retry options an operator gave the step (RetryStepNow)
			// replace the code's for the attempts that follow. They come
			// with the history, so every execution and replay of this
			// run attempt decides with them.
			policy = policy.WithOverride(prev.RetryOverride)
			if err := ex.waitUntil(ctx, *prev.RetryAt); err != nil {
				return zero, err
			}
		}
	}
	for {
		v, retryAt, err := runAttempt(ctx, ex, id, attempt, &tries, o, policy, fn)
		if retryAt == nil {
			return v, err
		}
		if err := ex.waitUntil(ctx, *retryAt); err != nil {
			return zero, err
		}
		attempt++
	}
}

// runAttempt makes and records one attempt of step id. It returns the
// step's result, or, when the attempt failed and is to be retried, the
// retry time (the failed attempt is then recorded, or queued to go with the
// suspension if the backoff is too long to wait in place).
func runAttempt[T any](ctx Context, ex *execution, id string, attempt int, tries *int, o stepOptions, policy retry.Policy,
	fn func(context.Context) (T, error)) (T, *time.Time, error) {
	var zero T
	if !o.pure {
		// Another Parallel branch may have held a result meanwhile. The
		// step function may act outside the run: the lease must hold.
		ex.flush()
		ex.confirmLease()
	}
	sctx, span := ex.tracer.Start(ctx, "kagzi.step "+id, trace.WithAttributes(
		attribute.String("kagzi.run_id", ex.run.RunID.String()),
		attribute.String("kagzi.workflow_type", ex.run.Type),
		attribute.String("kagzi.step_id", id),
		attribute.Int("kagzi.step.attempt", attempt),
	))
	started := ex.now()
	v, ferr := runOrMock(ex, id, attempt, func() (T, error) {
		return runStep(context.WithValue(sctx, stepInfoKey{}, StepInfo{RunID: ex.run.RunID.String(), StepID: id, Attempt: attempt}), o, fn)
	})
	finished := ex.now()
	if ferr != nil {
		span.RecordError(ferr)
		span.SetStatus(codes.Error, ferr.Error())
	}
	span.End()
	if ex.stepMS != nil {
		ex.stepMS.Record(ex.ctx, float64(finished.Sub(started))/float64(time.Millisecond), stepAttrs.Get(ex.run.Type, stepTypeAttrs))
	}
	if ex.ctx.Err() != nil {
		// Cancelled, lease lost or drained while the step ran: the result
		// may not be recorded any more.
		ex.abandon(context.Cause(ex.ctx))
	}
	if ctx.Err() != nil {
		// The Parallel branch was cancelled (fail-fast): the attempt is not
		// recorded; a later execution runs the step again.
		return zero, nil, context.Cause(ctx)
	}

	var out json.RawMessage
	if ferr == nil {
		out, ferr = json.Marshal(v)
		if ferr != nil {
			ferr = NonRetryable(fmt.Errorf("workflow: step %q: encode output: %w", id, ferr))
		} else {
			ferr = ex.checkPayload(fmt.Sprintf("step %q output", id), out)
		}
	}
	if ferr == nil {
		// Decode what is recorded, so replays see the same value.
		var rv T
		if err := json.Unmarshal(out, &rv); err != nil {
			ferr = NonRetryable(fmt.Errorf("workflow: step %q: output does not decode into %T: %w", id, rv, err))
		} else {
			v = rv
		}
	}

	it := ex.item(protocol.ReportStepCompleted)
	it.StepID = id
	it.StepKind = stepKindFunction
	it.Attempt = attempt
	it.StartedAt = &started
	it.FinishedAt = &finished
	if ferr == nil {
		it.Output = out
		// Held: made durable before the next effect outside the run (the
		// next step function), or with the run's next report — a sleep,
		// a wait, a child start, the end — in that report's transaction.
		ex.later(it)
		return v, nil, nil
	}
	*tries++
	it.Kind = protocol.ReportStepFailed
	setError(&it, ferr)
	if it.NonRetryable || policy.IsNonRetryable(it.ErrorType) || policy.Exhausted(*tries) {
		ex.report(it)
		// What a replay will return, so the workflow sees the same error
		// type and mark now and then.
		return zero, nil, &StepError{StepID: id, Attempt: attempt, Type: it.ErrorType, Message: it.Error,
			NonRetryable: it.NonRetryable, cause: ferr}
	}
	retryAt := finished.Add(policy.Delay(*tries, ex.rand())).UTC()
	it.Until = &retryAt
	ex.log.Debug("step attempt failed; retrying", "step_id", id, "attempt", attempt, "retry_at", retryAt, "err", ferr)
	if d := retryAt.Sub(ex.now()); ex.inline >= 0 && d <= ex.inline {
		ex.report(it)
	} else {
		// Recorded with the suspension that waits for the retry time.
		ex.later(it)
	}
	return zero, &retryAt, nil
}

// StepInfo describes the step attempt a step function runs as.
type StepInfo struct {
	RunID   string
	StepID  string
	Attempt int
}

type stepInfoKey struct{}

// StepInfoFrom returns the step attempt a step function's context belongs
// to (ok false outside a step). Attempt numbers count every attempt of the
// step in the run, from 1.
func StepInfoFrom(ctx context.Context) (info StepInfo, ok bool) {
	info, ok = ctx.Value(stepInfoKey{}).(StepInfo)
	return info, ok
}

// runStep calls fn, turning a panic into a *PanicError. The exit sentinel
// (a workflow call made from inside a step) is passed on.
func runStep[T any](ctx context.Context, o stepOptions, fn func(context.Context) (T, error)) (v T, err error) {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			if sig, ok := r.(*exitSignal); ok {
				panic(sig)
			}
			var zero T
			v, err = zero, &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	return fn(ctx)
}

// runOrMock runs the step, unless the execution runs under the test kit
// and it mocks this step: then the mock's output, decoded into T, or its
// error.
func runOrMock[T any](ex *execution, id string, attempt int, run func() (T, error)) (T, error) {
	m := wfexec.StepMockFrom(ex.ctx)
	if m == nil {
		return run()
	}
	out, err, ok := m(id, attempt)
	if !ok {
		return run()
	}
	var v T
	if err != nil {
		return v, err
	}
	if len(out) > 0 {
		if err := json.Unmarshal(out, &v); err != nil {
			return v, NonRetryable(fmt.Errorf("workflow: step %q: mocked output does not decode into %T: %w", id, v, err))
		}
	}
	return v, nil
}

// stepAttrs are the attribute sets of the step duration, one per workflow
// type.
var stepAttrs metricattr.Cache[string]

func stepTypeAttrs(typ string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("workflow_type", typ)}
}
