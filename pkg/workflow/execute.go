package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/kagzi/kagzi/internal/wfexec"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// MaxStepIDLen bounds a step id, in bytes.
const MaxStepIDLen = protocol.MaxNameLen

// Step kinds and statuses as the engine records them.
const (
	stepKindFunction = "FUNCTION"
	stepKindSleep    = "SLEEP"
	stepKindEvent    = "EVENT"
	stepKindChild    = "CHILD"
	stepCompleted    = "COMPLETED"
	stepFailed       = "FAILED"
	stepPending      = "PENDING"
)

// Func is a workflow function in the form the runtime executes: its input
// and output are JSON. Package worker adapts typed functions to it.
type Func func(ctx Context, input json.RawMessage) (json.RawMessage, error)

// DefaultMaxInlineRetry is the longest step retry backoff an execution
// waits for in the worker by default; a longer one suspends the run.
const DefaultMaxInlineRetry = 2 * time.Second

// Execute is the runtime's entry: it runs one execution of the delivered
// run e.Run with fn under ctx, the run's context. It calls fn, replays the
// steps recorded in e.Run.Steps, reports new step results, and finally
// reports run_completed or run_failed unless the execution was suspended
// or abandoned. It recovers panics of fn and reports them as failures. It
// returns when fn has returned and the final report is recorded (taken,
// with a wfexec.EndReporter).
//
// The worker (package worker) and the test kit (package workflowtest)
// call it; e's type is internal to the engine, so applications cannot.
func (fn Func) Execute(ctx context.Context, e wfexec.Execution) wfexec.Outcome {
	ex := newExecution(ctx, e)
	soft := e.Cancel
	if soft == nil {
		soft = ctx
	}
	wctx := &wfContext{Context: soft, ex: ex}
	if e.Run.InputSize > 0 && len(e.Run.Input) == 0 {
		in, err := ex.fetch("", 0)
		if err != nil {
			return wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: err}
		}
		ex.input = in
	}

	out, err := ex.call(fn, wctx)

	ex.mu.Lock()
	state, cause, fatal := ex.state, ex.cause, ex.fatal
	ex.mu.Unlock()
	switch state {
	case stateSuspended:
		return wfexec.Outcome{Status: wfexec.OutcomeSuspended}
	case stateAbandoned:
		return wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: cause}
	}
	if ctx.Err() != nil {
		return wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: context.Cause(ctx)}
	}
	if err == nil && fatal != nil {
		err = fatal
	}
	if err == nil {
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		if !json.Valid(out) {
			err = NonRetryable(errors.New("workflow: run output is not valid JSON"))
		} else {
			err = ex.checkPayload("run output", out)
		}
	}
	now := ex.now()
	it := ex.item(protocol.ReportRunCompleted)
	it.FinishedAt = &now
	var can *ContinueAsNewError
	if errors.As(err, &can) && fatal == nil {
		if can.err != nil {
			err = can.err
		} else if err = ex.checkPayload("continue-as-new input", can.input); err == nil {
			it.Kind, it.Output = protocol.ReportRunContinue, can.input
		}
	}
	if err != nil {
		it.Kind = protocol.ReportRunFailed
		setError(&it, err)
	} else if it.Kind == protocol.ReportRunCompleted {
		it.Output = out
	}
	if it.Kind != protocol.ReportRunFailed {
		ex.guardEnd(&it)
	}
	// Held step results and child starts not yet sent go first, in the
	// same report: the engine applies them and the end in one transaction.
	pending := ex.takeForSend()
	var rerr error
	if er, ok := e.Reporter.(wfexec.EndReporter); ok {
		rerr = er.ReportEnd(ctx, append(pending, it)...)
	} else {
		_, rerr = e.Reporter.Report(ctx, append(pending, it)...)
	}
	ex.sent(pending)
	if rerr != nil {
		return wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: rerr}
	}
	if err != nil {
		return wfexec.Outcome{Status: wfexec.OutcomeFailed, Err: err}
	}
	return wfexec.Outcome{Status: wfexec.OutcomeCompleted}
}

type execState int

const (
	stateRunning execState = iota
	stateSuspended
	stateAbandoned
)

// exitSignal is the panic value that unwinds a suspended or abandoned
// execution; Execute recovers it and does not report it as a failure.
type exitSignal struct{}

var errExit = &exitSignal{}

// execution is the state of one execution of a run.
//
// Workflow code runs on one goroutine, or on several while Parallel runs
// branches. A goroutine that must wait for something the engine provides
// (a timer, an event, children, a step's retry time) parks: it records what
// it waits for and blocks. When no goroutine runs workflow code any more
// and some are parked, the last one to stop suspends the run once, waiting
// for the union of what the parked goroutines wait for, and every parked
// goroutine then unwinds with the exit signal. The engine delivers the run
// again when any of those is there, and the replay takes each branch as far
// as it can go.
type execution struct {
	ctx     context.Context
	run     *protocol.DeliveredRun
	input   json.RawMessage // the run's input (fetched if not inline)
	rep     wfexec.Reporter
	fetcher wfexec.PayloadFetcher
	limits  protocol.PayloadLimits
	log     *slog.Logger
	now     func() time.Time
	rand    func() float64
	inline  time.Duration
	steps   map[string]*protocol.StepState
	tracer  trace.Tracer
	stepMS  metric.Float64Histogram

	mu     sync.Mutex
	seen   map[string]struct{}
	events map[string]int // WaitForEvent calls per event name
	drains map[string]int // DrainEvents calls per event name (made on first use)
	// replayed counts the delivered steps entered so far: when it is
	// len(steps), the replay has reached the end of the recorded history
	// (see atFrontier).
	replayed int
	// calls counts Now and SideEffect calls per step id base; versions
	// are the Version answers of this execution per change id (both made
	// on first use: most runs make no such call).
	calls    map[string]int
	versions map[string]int
	// started: CHILD steps started by this execution (not yet finished).
	started map[string]bool
	state   execState
	cause   error // why the execution was abandoned
	fatal   error // non-determinism: fails the run even if the workflow swallows it
	// pending items are sent with the next report (completed steps' results,
	// child starts, the record of a sleep, a failed attempt before a
	// suspension). flushing counts the reports in flight that carry such
	// items; flushed is signalled (with mu) when one is acknowledged.
	pending  []protocol.ReportItem
	flushing int
	flushed  *sync.Cond
	// active counts goroutines running workflow code; waits are the parked
	// ones. exited is closed when the state leaves stateRunning.
	active     int
	waits      map[*waiter]struct{}
	exited     chan struct{}
	exitClosed bool
}

// waiter is what one parked goroutine waits for.
type waiter struct {
	until    *time.Time // a timer
	children []string   // CHILD steps, all of them
	events   bool       // the run's event waits in progress
}

func newExecution(ctx context.Context, e wfexec.Execution) *execution {
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := e.Now
	if now == nil {
		now = time.Now
	}
	rnd := e.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	inline := e.MaxInlineRetry
	if inline == 0 {
		inline = DefaultMaxInlineRetry
	}
	// Copies: payloads fetched during the replay are kept in them, and
	// the delivered run is not modified.
	steps := make(map[string]*protocol.StepState, len(e.Run.Steps))
	for i := range e.Run.Steps {
		s := e.Run.Steps[i]
		if prev, ok := steps[s.StepID]; !ok || s.Attempt > prev.Attempt {
			steps[s.StepID] = &s
		}
	}
	limits := e.Limits
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = protocol.DefaultPayloadMaxBytes
	}
	if limits.WarnBytes <= 0 || limits.WarnBytes > limits.MaxBytes {
		limits.WarnBytes = min(protocol.DefaultPayloadWarnBytes, limits.MaxBytes)
	}
	tracer := e.Tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	ex := &execution{
		tracer:  tracer,
		stepMS:  e.StepDuration,
		ctx:     ctx,
		run:     e.Run,
		input:   e.Run.Input,
		rep:     e.Reporter,
		fetcher: e.Payloads,
		limits:  limits,
		log:     log,
		now:     now,
		rand:    rnd,
		inline:  inline,
		steps:   steps,
		seen:    make(map[string]struct{}),
		events:  make(map[string]int),
		started: make(map[string]bool),
		active:  1,
		waits:   make(map[*waiter]struct{}),
		exited:  make(chan struct{}),
	}
	ex.flushed = sync.NewCond(&ex.mu)
	return ex
}

// call runs the workflow function, recovering panics: the exit sentinel is
// swallowed (the state says why), any other panic becomes a PanicError.
func (ex *execution) call(fn Func, wctx *wfContext) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			if _, ok := r.(*exitSignal); ok {
				err = nil
				return
			}
			err = &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	return fn(wctx, ex.input)
}

// checkPayload refuses an output or input above the payload limit the
// engine told the worker (non-retryable: the same value would be refused
// again) and logs one above the warning size.
func (ex *execution) checkPayload(what string, p []byte) error {
	if len(p) > ex.limits.MaxBytes {
		return NonRetryable(fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, len(p), ex.limits.MaxBytes))
	}
	if len(p) > ex.limits.WarnBytes {
		ex.log.Warn("large payload", "what", what, "bytes", len(p))
	}
	return nil
}

// setError records err on a report item, clipped to what the engine keeps.
func setError(it *protocol.ReportItem, err error) {
	it.Error = protocol.ClipText(err.Error(), protocol.MaxErrorLen)
	it.ErrorType = protocol.ClipText(ErrorType(err), protocol.MaxNameLen)
	it.NonRetryable = IsNonRetryable(err)
}

// fetch reads a payload the delivery carried by size only.
func (ex *execution) fetch(stepID string, attempt int) (json.RawMessage, error) {
	if ex.fetcher == nil {
		return nil, errors.New("workflow: the run has a payload to fetch and no fetcher")
	}
	return ex.fetcher.FetchPayload(ex.ctx, stepID, attempt)
}

// output returns the recorded output of a step's latest attempt, fetching
// it the first time if the delivery carried only its size. A failed fetch
// abandons the execution (the call does not return).
func (ex *execution) output(s *protocol.StepState) json.RawMessage {
	ex.mu.Lock()
	out, size := s.Output, s.OutputSize
	ex.mu.Unlock()
	if len(out) > 0 || size == 0 {
		return out
	}
	out, err := ex.fetch(s.StepID, s.Attempt)
	if err != nil {
		ex.abandon(err)
	}
	ex.mu.Lock()
	s.Output = out
	ex.mu.Unlock()
	return out
}

// enter starts a durable call (step, sleep, wait, child) with the given id
// from a goroutine whose context is ctx (the run's, or a Parallel branch's):
// it ends the execution if it is no longer running or was abandoned,
// rejects a bad or duplicate id, and returns the recorded latest attempt of
// the step, if any. A call whose context is cancelled (a cancel request, a
// FailFast branch) still returns what is recorded — a replay must take the
// path the first execution took — and gets the cancellation (cancelled)
// only where it would do something new.
func (ex *execution) enter(ctx context.Context, id string) (*protocol.StepState, error) {
	ex.mu.Lock()
	state := ex.state
	ex.mu.Unlock()
	if state != stateRunning {
		// A suspended or abandoned execution whose exit was swallowed by
		// workflow code: unwind again.
		panic(errExit)
	}
	if ex.ctx.Err() != nil {
		ex.abandon(context.Cause(ex.ctx))
	}
	if id == "" || len(id) > MaxStepIDLen {
		return nil, fmt.Errorf("%w: %q must be 1 to %d bytes", ErrInvalidStepID, id, MaxStepIDLen)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if _, dup := ex.seen[id]; dup {
		err := fmt.Errorf("%w %q: step ids must be unique within a run and called in the same order on every execution", ErrDuplicateStep, id)
		if ex.fatal == nil {
			ex.fatal = err
		}
		return nil, err
	}
	ex.seen[id] = struct{}{}
	prev := ex.steps[id]
	if prev != nil {
		ex.replayed++
	}
	return prev, nil
}

// atFrontier reports whether every step of the delivered history has been
// entered: nothing recorded came after the call that asks (in a workflow
// with branches, a step of another branch not replayed yet may have, so
// the answer is no until it is). A call at the frontier may do what a
// first execution would do there without changing a past the recorded
// steps depend on.
func (ex *execution) atFrontier() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.replayed == len(ex.steps)
}

// guardEnd adds to a run's end (run_completed, run_continue) what the
// execution saw of the run's events: the delivery's count and the names it
// waited for or drained. The engine ends the run only if none of those
// arrived since, unconsumed (ResultRerun otherwise). Without a count (an
// older dispatcher) or a name, the end is unguarded, as before.
func (ex *execution) guardEnd(it *protocol.ReportItem) {
	if ex.run.EventSeq == nil {
		return
	}
	ex.mu.Lock()
	names := make([]string, 0, len(ex.events)+len(ex.drains))
	for n := range ex.events {
		names = append(names, n)
	}
	for n := range ex.drains {
		if _, dup := ex.events[n]; !dup {
			names = append(names, n)
		}
	}
	ex.mu.Unlock()
	if len(names) == 0 {
		return
	}
	seq := *ex.run.EventSeq
	it.EventsSeen = &seq
	if len(names) > protocol.MaxEventNames {
		it.AllEvents = true
		return
	}
	sort.Strings(names)
	it.EventNames = names
}

// cancelled returns the cause of ctx's end (a cancel request, a FailFast
// branch's cancellation), or nil while it has not ended.
func cancelled(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// sameEpoch reports whether a recorded attempt was made by the delivered
// run attempt: a failure recorded by an earlier run attempt (or before a
// manual retry) is tried again with a fresh budget, while one recorded by
// this run attempt is final for it.
func (ex *execution) sameEpoch(s *protocol.StepState) bool {
	return s.RunAttempt == ex.run.Attempt
}

// replayError records a mismatch between history and code and returns it.
func (ex *execution) replayError(format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{ErrReplay}, args...)...)
	ex.mu.Lock()
	if ex.fatal == nil {
		ex.fatal = err
	}
	ex.mu.Unlock()
	return err
}

// item starts a report item for this run.
func (ex *execution) item(kind protocol.ReportKind) protocol.ReportItem {
	return protocol.ReportItem{Kind: kind, RunID: ex.run.RunID, LeaseToken: ex.run.LeaseToken}
}

// later queues items to go with the next report.
func (ex *execution) later(items ...protocol.ReportItem) {
	ex.mu.Lock()
	ex.pending = append(ex.pending, items...)
	ex.mu.Unlock()
}

// takeForSend returns and clears the queued items, for a report the
// caller sends at once and then confirms with sent. It first waits for the
// reports in flight that carry queued items (another Parallel branch's):
// whatever the caller does after its own report is acknowledged, every
// result held before it is then durable too.
func (ex *execution) takeForSend() []protocol.ReportItem {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for ex.flushing > 0 {
		ex.flushed.Wait()
	}
	p := ex.pending
	ex.pending = nil
	if len(p) > 0 {
		ex.flushing++
	}
	return p
}

// sent ends the flight of the queued items takeForSend returned (their
// report returned, acknowledged or failed).
func (ex *execution) sent(p []protocol.ReportItem) {
	if len(p) == 0 {
		return
	}
	ex.mu.Lock()
	ex.flushing--
	ex.flushed.Broadcast()
	ex.mu.Unlock()
}

// flush makes every queued item durable: it sends them, or waits for the
// report in flight that carries them. A step's result is held (queued)
// after the step returns, since workflow code between durable calls has no
// effect outside the run; it must be durable before anything that has one
// — the next step function runs — and flush is called there. Every other
// durable call sends the queued items with its own report, which the
// engine applies in one transaction. If the report fails the execution is
// abandoned (the call does not return).
func (ex *execution) flush() {
	pending := ex.takeForSend()
	if len(pending) == 0 {
		return
	}
	_, err := ex.rep.Report(ex.ctx, pending...)
	ex.sent(pending)
	if err != nil {
		ex.abandon(err)
	}
}

// confirmLease makes sure, where the reporter can tell, that the run's
// lease still holds before a step function acts outside the run (see
// wfexec.LeaseConfirmer); if it does not, the execution is abandoned (the
// call does not return).
func (ex *execution) confirmLease() {
	c, ok := ex.rep.(wfexec.LeaseConfirmer)
	if !ok {
		return
	}
	if err := c.ConfirmLease(ex.ctx); err != nil {
		ex.abandon(err)
	}
}

// report sends the queued items and then items, and returns the results of
// items; if that fails the execution is abandoned (the call does not
// return).
func (ex *execution) report(items ...protocol.ReportItem) []protocol.ReportResult {
	pending := ex.takeForSend()
	results, err := ex.rep.Report(ex.ctx, append(pending, items...)...)
	ex.sent(pending)
	if err != nil {
		ex.abandon(err)
	}
	if len(results) != len(pending)+len(items) {
		ex.abandon(fmt.Errorf("workflow: %d report results for %d items", len(results), len(pending)+len(items)))
	}
	return results[len(pending):]
}

// closeExitedLocked releases the parked goroutines; ex.mu is held.
func (ex *execution) closeExitedLocked() {
	if !ex.exitClosed {
		ex.exitClosed = true
		close(ex.exited)
	}
}

// park blocks the calling goroutine, whose context is ctx, until the run is
// suspended (then it unwinds with the exit signal) — see execution. If this
// goroutine was the last running workflow code, it suspends the run itself.
// It returns only if ctx ends (a cancel request, a FailFast branch), with
// the cause; a goroutine whose context has already ended does not park.
func (ex *execution) park(ctx context.Context, w *waiter) error {
	if err := cancelled(ctx); err != nil {
		if ex.ctx.Err() != nil {
			ex.abandon(context.Cause(ex.ctx))
		}
		return err
	}
	ex.mu.Lock()
	if ex.state != stateRunning {
		ex.mu.Unlock()
		panic(errExit)
	}
	ex.waits[w] = struct{}{}
	ex.active--
	suspend := ex.decideLocked()
	exited := ex.exited
	ex.mu.Unlock()
	if suspend {
		ex.suspendAll()
		panic(errExit)
	}
	select {
	case <-exited:
		panic(errExit)
	case <-ctx.Done():
	}
	ex.mu.Lock()
	if ex.state != stateRunning {
		ex.mu.Unlock()
		panic(errExit)
	}
	delete(ex.waits, w)
	ex.active++
	ex.mu.Unlock()
	if ex.ctx.Err() != nil {
		ex.abandon(context.Cause(ex.ctx))
	}
	return context.Cause(ctx)
}

// decideLocked reports whether the run must be suspended now (no goroutine
// runs workflow code and some are parked) and, if so, marks it suspended so
// that nobody unparks meanwhile; the caller then calls suspendAll. ex.mu is
// held.
func (ex *execution) decideLocked() bool {
	if ex.state != stateRunning || ex.active > 0 || len(ex.waits) == 0 {
		return false
	}
	ex.state = stateSuspended
	return true
}

// suspendAll reports the suspension of the run — until the earliest timer
// of the parked goroutines, for the union of their children and events —
// with the queued items, and releases the parked goroutines. A failed report
// abandons the execution instead.
func (ex *execution) suspendAll() {
	ex.mu.Lock()
	it := ex.item(protocol.ReportRunSleep)
	seen := map[string]bool{}
	for w := range ex.waits {
		if w.until != nil && (it.Until == nil || w.until.Before(*it.Until)) {
			u := *w.until
			it.Until = &u
		}
		for _, c := range w.children {
			if !seen[c] {
				seen[c] = true
				it.Steps = append(it.Steps, c)
			}
		}
		it.Events = it.Events || w.events
	}
	ex.mu.Unlock()
	sort.Strings(it.Steps)
	pending := ex.takeForSend()
	_, err := ex.rep.Report(ex.ctx, append(pending, it)...)
	ex.sent(pending)
	ex.mu.Lock()
	if err != nil {
		ex.state, ex.cause = stateAbandoned, err
	}
	ex.closeExitedLocked()
	ex.mu.Unlock()
}

// suspended ends an execution whose run the engine already suspended (an
// event_wait with Suspend). It does not return.
func (ex *execution) suspended() {
	ex.mu.Lock()
	if ex.state == stateRunning {
		ex.state = stateSuspended
	}
	ex.closeExitedLocked()
	ex.mu.Unlock()
	panic(errExit)
}

// waitUntil waits until t from a goroutine whose context is ctx: in place
// when t is within the inline retry limit, else by parking (suspending the
// run). It returns an error only if ctx (a branch's) is cancelled.
func (ex *execution) waitUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(ex.now())
	if d <= 0 {
		return nil
	}
	if ex.inline < 0 || d > ex.inline {
		return ex.park(ctx, &waiter{until: &t})
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		if ex.ctx.Err() != nil {
			ex.abandon(context.Cause(ex.ctx))
		}
		return context.Cause(ctx)
	}
}

// abandon ends the execution without further reports. It does not return.
func (ex *execution) abandon(cause error) {
	if cause == nil {
		cause = errors.New("workflow: execution abandoned")
	}
	ex.mu.Lock()
	if ex.state == stateRunning {
		ex.state = stateAbandoned
		ex.cause = cause
	}
	ex.closeExitedLocked()
	ex.mu.Unlock()
	panic(errExit)
}
