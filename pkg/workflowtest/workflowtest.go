// Package workflowtest runs a workflow function in-process, without the
// engine, Postgres or NATS, for unit tests: the workflow executes exactly
// as under a worker — replayed from its recorded history after every
// suspension, with its steps, sleeps, event waits, children, Now,
// SideEffect, Version and ContinueAsNew — while an Env plays the engine:
// it records each step, keeps a virtual clock that jumps to the next wake
// time instead of sleeping, delivers the events the test sends, and
// answers children and mocked steps from the test's functions.
//
//	env := workflowtest.New()
//	env.OnStep("charge", Receipt{ID: "r-1"}, nil)
//	out, err := workflowtest.Run(env, ProcessOrder, processOrder, Order{ID: "o-1"})
//
// A failed run attempt (the workflow function returns an error) ends Run
// with that error: the run-level retries of the engine are not simulated;
// step retries are (their backoffs advance the virtual clock).
package workflowtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kagzi/kagzi/internal/wfexec"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// ErrBlocked is returned by Run when the workflow waits for something
// that can never come: an event the test did not send, with no timeout.
var ErrBlocked = errors.New("workflowtest: the workflow waits for something that never comes")

// ErrContinuedAsNew is returned by Run when the workflow continued as new;
// ContinuedAsNew returns the new run's input.
var ErrContinuedAsNew = errors.New("workflowtest: the run continued as new")

// MaxExecutions bounds the executions (deliveries) of one Run, against a
// workflow that never settles.
const MaxExecutions = 10000

// RunError is the error of a run whose workflow failed: the message and
// error type as the engine would record them.
type RunError struct {
	Message      string
	Type         string
	NonRetryable bool
	// Cancelled: the run was asked to cancel (CancelAfter) and its workflow
	// returned an error, so the engine would end it CANCELLED.
	Cancelled bool
}

func (e *RunError) Error() string { return e.Message }

// Step is one step of the run's history, as recorded.
type Step struct {
	ID string
	// Kind is FUNCTION, SLEEP, EVENT or CHILD.
	Kind string
	// Status is COMPLETED, FAILED or PENDING.
	Status string
	// Attempts counts the step's recorded attempts.
	Attempts int
	Output   json.RawMessage
	Error    string
}

type stepMock func(attempt int) (any, error)

type event struct {
	at      time.Time
	payload json.RawMessage
}

// Env is the engine for one run. Configure it (mocks, events, clock)
// before Run; read its record after. It is not safe to reuse for a second
// Run.
type Env struct {
	mu       sync.Mutex
	start    time.Time
	clock    time.Time
	mocks    map[string]stepMock
	children map[string]func(json.RawMessage) (json.RawMessage, error)
	events   map[string][]event
	cancelAt *time.Time

	steps      map[string]*protocol.StepState
	kinds      map[string]string
	order      []string
	tries      map[string]int
	waitUntil  map[string]*time.Time // event waits in progress: their timeout
	waitName   map[string]string
	executions int
	err        error // a fault of the test setup that stops the run

	// How the current execution ended, as reported.
	final     *protocol.ReportItem
	sleep     *protocol.ReportItem
	continued json.RawMessage
}

// New returns an Env whose clock starts at 2000-01-01 00:00 UTC (see
// SetStartTime).
func New() *Env {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Env{start: t0, clock: t0, mocks: map[string]stepMock{},
		children: map[string]func(json.RawMessage) (json.RawMessage, error){}, events: map[string][]event{},
		steps: map[string]*protocol.StepState{}, kinds: map[string]string{}, tries: map[string]int{},
		waitUntil: map[string]*time.Time{}, waitName: map[string]string{}}
}

// SetStartTime sets the virtual clock's start.
func (e *Env) SetStartTime(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start, e.clock = t.UTC(), t.UTC()
}

// Now is the virtual clock: the start time plus the time the run spent
// sleeping, waiting and backing off.
func (e *Env) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clock
}

// Elapsed is how much virtual time the run took.
func (e *Env) Elapsed() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clock.Sub(e.start)
}

// OnStep mocks step id: every attempt returns output (encoded as JSON and
// decoded into the step's type, as a recorded output is) or err, instead
// of running the step's function.
func (e *Env) OnStep(id string, output any, err error) {
	e.OnStepFunc(id, func(int) (any, error) { return output, err })
}

// OnStepFunc mocks step id with fn, called with the attempt number (from
// 1): a failing attempt is retried under the step's policy, as it would be.
func (e *Env) OnStepFunc(id string, fn func(attempt int) (any, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mocks[id] = fn
}

// OnChild answers child runs of workflow type typ with fn, given the
// child's input (JSON): its output becomes the child's result, its error
// the child's failure (a *workflow.ChildError of type ChildFailed to the
// parent). A child of a type without an answer stops Run with an error.
func (e *Env) OnChild(typ string, fn func(input json.RawMessage) (any, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.children[typ] = func(in json.RawMessage) (json.RawMessage, error) {
		out, err := fn(in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// OnChildOf answers child runs of the workflow ref declares with fn. fn
// may run the child's own workflow in an Env of its own.
func OnChildOf[In, Out any](e *Env, ref workflow.Ref[In, Out], fn func(in In) (Out, error)) {
	e.OnChild(ref.Name(), func(raw json.RawMessage) (any, error) {
		var in In
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("decode child input into %T: %w", in, err)
			}
		}
		return fn(in)
	})
}

// SendEvent sends an event named name with payload (encoded as JSON) to
// the run now: the next WaitForEvent or DrainEvents for that name
// receives it.
func (e *Env) SendEvent(name string, payload any) {
	e.SendEventAfter(0, name, payload)
}

// SendEventAfter sends the event d after the run's start (virtual time): a
// wait for it that has not timed out by then receives it then, and a
// DrainEvents reached after then takes it.
func (e *Env) SendEventAfter(d time.Duration, name string, payload any) {
	raw, err := json.Marshal(payload)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.fail(fmt.Errorf("workflowtest: event %q: encode payload: %w", name, err))
		return
	}
	e.events[name] = append(e.events[name], event{at: e.start.Add(d), payload: raw})
	sort.SliceStable(e.events[name], func(i, j int) bool { return e.events[name][i].at.Before(e.events[name][j].at) })
}

// CompleteWaitTokenAfter completes, d after the run's start (virtual
// time), the token the run's n-th (from 1) NewWaitToken named name mints,
// with payload, as client.CompleteWaitToken would: its WaitForToken
// receives it. (The Env's tokens are not signed.)
func (e *Env) CompleteWaitTokenAfter(d time.Duration, name string, n int, payload any) {
	id := protocol.WaitTokenID(uuid.Nil, protocol.WaitTokenStepID(name, n))
	e.SendEventAfter(d, protocol.WaitTokenEvent(id), payload)
}

// CancelAfter asks the run to cancel d after its start (virtual time), as
// client.Cancel would: a run waiting then is woken at once; from then on
// its Context is cancelled (cause workflow.ErrCancelled) and durable calls
// that would do something new return the cancellation, while cleanup
// under workflow.WithoutCancel runs as usual.
func (e *Env) CancelAfter(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.start.Add(d)
	e.cancelAt = &t
}

// Steps returns the run's history: the latest attempt of each step, in the
// order the steps were first recorded.
func (e *Env) Steps() []Step {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Step, 0, len(e.order))
	for _, id := range e.order {
		s := e.steps[id]
		out = append(out, Step{ID: id, Kind: e.kinds[id], Status: s.Status, Attempts: s.Attempt, Output: s.Output, Error: s.Error})
	}
	return out
}

// Executions counts the executions of the run: 1 plus one per suspension.
func (e *Env) Executions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.executions
}

// ContinuedAsNew returns the input the run continued as new with, if it
// did (Run then returned ErrContinuedAsNew).
func (e *Env) ContinuedAsNew() (json.RawMessage, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.continued, e.continued != nil
}

// Run runs fn as the workflow ref declares, with input in, until it
// completes, fails, or continues as new, and returns its output.
func Run[In, Out any](e *Env, ref workflow.Ref[In, Out], fn func(ctx workflow.Context, in In) (Out, error), in In) (Out, error) {
	var zero Out
	raw, err := json.Marshal(in)
	if err != nil {
		return zero, fmt.Errorf("workflowtest: encode input: %w", err)
	}
	out, err := RunFunc(e, ref.Name(), func(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
		var v In
		if len(input) > 0 {
			if err := json.Unmarshal(input, &v); err != nil {
				return nil, workflow.NonRetryable(fmt.Errorf("decode input into %T: %w", v, err))
			}
		}
		o, err := fn(ctx, v)
		if err != nil {
			return nil, err
		}
		return json.Marshal(o)
	}, raw)
	if err != nil {
		return zero, err
	}
	var o Out
	if err := json.Unmarshal(out, &o); err != nil {
		return zero, fmt.Errorf("workflowtest: decode output into %T: %w", o, err)
	}
	return o, nil
}

// RunFunc is Run for a workflow in its JSON form, named by a type string.
func RunFunc(e *Env, typ string, fn workflow.Func, input json.RawMessage) (json.RawMessage, error) {
	run := protocol.DeliveredRun{RunID: uuid.New(), Namespace: "default", Queue: "default", Type: typ,
		Attempt: 1, LeaseToken: 1, Input: input}
	ctx := wfexec.WithStepMock(context.Background(), e.mock)
	for {
		e.mu.Lock()
		if e.executions >= MaxExecutions {
			e.mu.Unlock()
			return nil, fmt.Errorf("workflowtest: %d executions and the run has not settled", MaxExecutions)
		}
		e.executions++
		e.final, e.sleep = nil, nil
		run.Steps = run.Steps[:0]
		for _, id := range e.order {
			run.Steps = append(run.Steps, *e.steps[id])
		}
		var soft context.Context
		if e.cancelAt != nil && !e.clock.Before(*e.cancelAt) {
			c, cancel := context.WithCancelCause(ctx)
			cancel(workflow.ErrCancelled)
			soft, run.CancelRequestedAt = c, e.cancelAt
		}
		e.mu.Unlock()

		out := fn.Execute(ctx, wfexec.Execution{Run: &run, Reporter: (*reporter)(e), Cancel: soft,
			Now: e.Now, MaxInlineRetry: -1, Rand: func() float64 { return 0.5 }})

		e.mu.Lock()
		setupErr, final, sleep := e.err, e.final, e.sleep
		e.mu.Unlock()
		if setupErr != nil {
			return nil, setupErr
		}
		switch out.Status {
		case wfexec.OutcomeCompleted:
			switch {
			case final != nil && final.Kind == protocol.ReportRunContinue:
				e.mu.Lock()
				e.continued = final.Output
				e.mu.Unlock()
				return nil, ErrContinuedAsNew
			case final != nil:
				return final.Output, nil
			}
			return nil, errors.New("workflowtest: the run completed without a report")
		case wfexec.OutcomeFailed:
			if final != nil {
				return nil, &RunError{Message: final.Error, Type: final.ErrorType, NonRetryable: final.NonRetryable,
					Cancelled: run.CancelRequestedAt != nil}
			}
			return nil, out.Err
		case wfexec.OutcomeAbandoned:
			return nil, fmt.Errorf("workflowtest: execution abandoned: %w", out.Err)
		}
		if err := e.wake(sleep); err != nil {
			return nil, err
		}
	}
}

// fail records a setup fault (e.mu held).
func (e *Env) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// mock answers a step attempt from the test's mocks.
func (e *Env) mock(id string, attempt int) (json.RawMessage, error, bool) {
	e.mu.Lock()
	fn := e.mocks[id]
	e.mu.Unlock()
	if fn == nil {
		return nil, nil, false
	}
	v, err := fn(attempt)
	if err != nil {
		return nil, err, true
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, workflow.NonRetryable(fmt.Errorf("workflowtest: step %q: encode mocked output: %w", id, err)), true
	}
	return out, nil, true
}

// wake advances the clock to when the suspended run can go on: its timer,
// an event it waits for, an event wait's timeout; children are answered
// when started, so a run waiting only for them goes on at once.
func (e *Env) wake(sleep *protocol.ReportItem) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var next *time.Time
	consider := func(t time.Time) {
		if next == nil || t.Before(*next) {
			next = &t
		}
	}
	if sleep != nil {
		if sleep.Until != nil {
			consider(*sleep.Until)
		}
		if len(sleep.Steps) > 0 {
			consider(e.clock)
		}
	}
	for id, name := range e.waitName {
		if s := e.steps[id]; s == nil || s.Status != "PENDING" {
			continue
		}
		if evs := e.events[name]; len(evs) > 0 {
			consider(evs[0].at)
		}
		if u := e.waitUntil[id]; u != nil {
			consider(*u)
		}
	}
	if e.cancelAt != nil && e.cancelAt.After(e.clock) {
		// A cancel request wakes a run that waits for anything.
		consider(*e.cancelAt)
	} else if e.cancelAt != nil {
		consider(e.clock)
	}
	if next == nil {
		return ErrBlocked
	}
	if next.After(e.clock) {
		e.clock = *next
	}
	return nil
}

// reporter is the Env as the runtime's Reporter.
type reporter Env

func (r *reporter) Report(_ context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	e := (*Env)(r)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	res := make([]protocol.ReportResult, len(items))
	for i := range items {
		it := items[i]
		res[i] = protocol.ReportResult{Code: protocol.ResultOK}
		switch it.Kind {
		case protocol.ReportStepCompleted:
			e.record(it.StepID, it.StepKind, &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: it.Attempt,
				Output: it.Output, RunAttempt: 1})
		case protocol.ReportStepFailed:
			e.tries[it.StepID]++
			e.record(it.StepID, it.StepKind, &protocol.StepState{StepID: it.StepID, Status: "FAILED", Attempt: it.Attempt,
				Error: it.Error, ErrorType: it.ErrorType, RetryAt: it.Until, RunAttempt: 1, Tries: e.tries[it.StepID],
				NonRetryable: it.NonRetryable})
		case protocol.ReportAttributesSet:
			// Recorded as the engine records it; declarations are the
			// engine's to check, so every set is taken here.
			e.record(it.StepID, "FUNCTION", &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: it.Attempt,
				Output: it.Output, RunAttempt: 1})
		case protocol.ReportWaitTokenMint:
			// An unsigned token: the engine signs; here its event is what
			// counts, named after the step alone (CompleteWaitTokenAfter).
			id := protocol.WaitTokenID(uuid.Nil, it.StepID)
			out, _ := json.Marshal(protocol.WaitTokenMinted{Token: "test-" + id.String(), Event: protocol.WaitTokenEvent(id),
				ExpiresAt: it.Until.Truncate(time.Second)})
			e.record(it.StepID, "FUNCTION", &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: 1,
				Output: out, RunAttempt: 1})
			res[i].Output = out
		case protocol.ReportEventWait:
			res[i] = e.eventWait(it)
		case protocol.ReportEventDrain:
			res[i] = e.eventDrain(it)
		case protocol.ReportChildStart:
			e.childStart(it)
		case protocol.ReportRunSleep:
			e.sleep = &it
		case protocol.ReportRunCompleted, protocol.ReportRunFailed, protocol.ReportRunContinue:
			e.final = &it
		default:
			e.fail(fmt.Errorf("workflowtest: unexpected report %q", it.Kind))
			return nil, e.err
		}
		if e.err != nil {
			return nil, e.err
		}
	}
	return res, nil
}

// record sets a step's latest attempt (e.mu held).
func (e *Env) record(id, kind string, s *protocol.StepState) {
	if _, ok := e.steps[id]; !ok {
		e.order = append(e.order, id)
	}
	if kind == "" {
		kind = "FUNCTION"
	}
	e.kinds[id] = kind
	e.steps[id] = s
}

// eventWait answers a WaitForEvent as the engine does (e.mu held).
func (e *Env) eventWait(it protocol.ReportItem) protocol.ReportResult {
	if _, ok := e.waitUntil[it.StepID]; !ok {
		// A wait in progress keeps its first timeout.
		e.waitUntil[it.StepID] = it.Until
	}
	e.waitName[it.StepID] = it.Name
	if evs := e.events[it.Name]; len(evs) > 0 && !evs[0].at.After(e.clock) {
		e.events[it.Name] = evs[1:]
		e.record(it.StepID, "EVENT", &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: it.Attempt,
			Output: evs[0].payload, RunAttempt: 1})
		return protocol.ReportResult{Code: protocol.ResultOK, Output: evs[0].payload}
	}
	if u := e.waitUntil[it.StepID]; u != nil && !e.clock.Before(*u) {
		e.record(it.StepID, "EVENT", &protocol.StepState{StepID: it.StepID, Status: "FAILED", Attempt: it.Attempt,
			Error: "timed out", ErrorType: "EventTimeout", RunAttempt: 1})
		return protocol.ReportResult{Code: protocol.ResultOK}
	}
	e.record(it.StepID, "EVENT", &protocol.StepState{StepID: it.StepID, Status: "PENDING", Attempt: it.Attempt,
		RetryAt: e.waitUntil[it.StepID], RunAttempt: 1})
	return protocol.ReportResult{Code: protocol.ResultOK, Waiting: true}
}

// eventDrain answers a DrainEvents as the engine does: it takes every
// event of the name sent by now, appends them to what the drain step holds
// and returns the whole list; a drain that holds nothing records nothing
// (e.mu held).
func (e *Env) eventDrain(it protocol.ReportItem) protocol.ReportResult {
	var list []json.RawMessage
	if s := e.steps[it.StepID]; s != nil {
		if err := json.Unmarshal(s.Output, &list); err != nil {
			e.fail(fmt.Errorf("workflowtest: drain %q: recorded output: %w", it.StepID, err))
			return protocol.ReportResult{Code: protocol.ResultOK}
		}
	}
	evs := e.events[it.Name]
	for len(evs) > 0 && !evs[0].at.After(e.clock) && len(list) < protocol.MaxDrainEvents {
		list = append(list, evs[0].payload)
		evs = evs[1:]
	}
	e.events[it.Name] = evs
	if len(list) == 0 {
		return protocol.ReportResult{Code: protocol.ResultOK}
	}
	out, err := json.Marshal(list)
	if err != nil {
		e.fail(fmt.Errorf("workflowtest: drain %q: %w", it.StepID, err))
		return protocol.ReportResult{Code: protocol.ResultOK}
	}
	e.record(it.StepID, "EVENT", &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: 1, Output: out, RunAttempt: 1})
	return protocol.ReportResult{Code: protocol.ResultOK, Output: out}
}

// childStart answers a child at once from the test's function (e.mu held;
// released while the function runs, which may run an Env of its own).
func (e *Env) childStart(it protocol.ReportItem) {
	fn := e.children[it.Child.Type]
	if fn == nil {
		e.fail(fmt.Errorf("workflowtest: child %q of type %s: no answer for the type (OnChild, OnChildOf)", it.StepID, it.Child.Type))
		return
	}
	e.mu.Unlock()
	out, err := fn(it.Child.Input)
	e.mu.Lock()
	s := &protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: it.Attempt, Output: out, RunAttempt: 1}
	if err != nil {
		s = &protocol.StepState{StepID: it.StepID, Status: "FAILED", Attempt: it.Attempt, RunAttempt: 1,
			Error:     "child run " + protocol.ChildRunID(it.RunID, it.StepID, it.Attempt).String() + " failed: " + err.Error(),
			ErrorType: "ChildFailed"}
	}
	e.record(it.StepID, "CHILD", s)
}
