// Package modeltest is a model-based test of Kagzi's execution semantics.
//
// A Program is a small random workflow, written as data: sequences and
// Parallel groups of steps with scripted outcomes per attempt, durable
// sleeps, event waits, child workflows, handled or returned errors, run
// retry policies and deadlines, cancel requests and terminations sent at a
// point the program signals, children left running under each
// parent-close policy when their parent ends, and chains of runs that
// continue as new with another program. Generate makes programs from a seed;
// Predict, a reference implementation that does not use package workflow,
// says how each one must end (status, output or error, the function
// invocations of every step); Interpret is the workflow that runs a
// program on a real worker (registered as WorkflowType); package driver
// starts programs through the real engine and sends their events when the
// program signals that it reached the point where they belong, and so its
// cancel requests and terminations; Check tells the engine's outcome from
// the model's. Shrink reduces a program whose outcome
// differs to a minimal one that still differs. PausePoint picks programs
// whose runs the driver pauses and resumes, which must end as the model
// says all the same; a Scenario (operators.go) is what an operator does
// to many runs — pauses, resumes, queries over search attributes,
// batches — with the model of its every answer. The package links no
// database driver: the worker binary registers the interpreter.
package modeltest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// WorkflowType is the workflow type the interpreter is registered as.
const WorkflowType = "ModelProgram"

// Op kinds.
const (
	KindStep     = "step"
	KindSleep    = "sleep"
	KindWait     = "wait"
	KindChildren = "children"
	KindParallel = "parallel"
	// KindCancel waits for an event nobody sends (Name), after a signal step
	// that has the driver ask the run to cancel once the wait is in
	// progress: the wait returns workflow.ErrCancelled, the Cleanup step
	// runs with workflow.WithoutCancel, and the op's error is the
	// cancellation. Every later durable call that would do something new
	// returns the cancellation too, and a run that returns an error ends
	// CANCELLED.
	KindCancel = "cancel"
	// KindTerminate is KindCancel with a termination instead: the run ends
	// CANCELLED ("terminated: " + TerminateReason(ID)) and no more of its
	// code runs.
	KindTerminate = "terminate"
	// KindDetach starts Children with their parent-close policies
	// (Child.Policy) and does not wait for them: each child's program
	// starts with a KindHold op, and a signal step has the driver send the
	// parent the event Name once every child holds. The parent then goes on
	// and ends (completes, fails, is cancelled or terminated) while the
	// children hold, and the policy decides their end.
	KindDetach = "detach"
	// KindHold is the first op of a detached child: it signals, then waits
	// for the event Name, which the driver sends (Payload) only to a child
	// whose policy is ParentCloseAbandon, once its parent ended; then its
	// Cleanup step runs with workflow.WithoutCancel. A cancel request (the
	// ParentCloseRequestCancel policy, or the parent's own cancellation
	// passed on) ends the wait with workflow.ErrCancelled.
	KindHold = "hold"
	// KindSide is a workflow.SideEffect (recorded as the step
	// "side:<ID>") whose function returns Outcomes[0].Value: invoked once
	// over every execution and run attempt, replayed after.
	KindSide = "side"
	// KindVersion is workflow.Version(ID, DefaultVersion, 1): a run that
	// reaches it records 1, and replays return it. Generated only in a
	// program's top-level sequence (see workflow.Version on Parallel).
	KindVersion = "version"
	// KindState sets the run's durable state Name to Outcomes[0].Value
	// (workflow.State.Set, recorded as a step "state:<Name>#<n>"): a
	// client reading the state of the run after it ended gets, per name,
	// the value of the last such op that ran (the driver reads it; the
	// model predicts it). Generated only in a program's top-level
	// sequence, so their order is the program's.
	KindState = "state"
	// KindUpdate serves one update (workflow.Update.Handle) named Name: a
	// signal step first has the driver send it, with the request Payload
	// (client.Update, which waits for the answer); the handler answers
	// UpdateAnswer(Payload, Outcomes[0].Value), or fails with an error of
	// type TypeDeclined if Outcomes[0] is OutDeclined. The op observes the
	// request; the driver keeps the answer its caller got, which the
	// model predicts. Generated only in a program's top-level sequence,
	// before any cancellation, termination or missed deadline.
	KindUpdate = "update"
)

// UpdateAnswer is the answer of a KindUpdate op's handler to request req.
func UpdateAnswer(req string, v int) string { return req + "/" + strconv.Itoa(v) }

// updateFailure is the message of the error a KindUpdate op's handler
// fails with.
func updateFailure(id string) string { return "update " + id + ": declined" }

// Parent-close policies of detached children (workflow.ParentClosePolicy).
const (
	PolicyTerminate     = "TERMINATE"
	PolicyRequestCancel = "REQUEST_CANCEL"
	PolicyAbandon       = "ABANDON"
)

// HoldTimeoutMS is the timeout of the waits of KindCancel, KindTerminate,
// KindHold and KindDetach: far longer than any run, so only the driver ends
// them.
const HoldTimeoutMS = 10 * 60 * 1000

// HeldPayload is the event the driver sends a parent whose detached
// children all hold.
const HeldPayload = "held"

// Outcome kinds of one step attempt.
const (
	// OutOK returns Value.
	OutOK = "ok"
	// OutFail returns a retryable error of type TypeTransient.
	OutFail = "fail"
	// OutDeclined returns an error of type TypeDeclined, which a step's
	// policy may list as non-retryable.
	OutDeclined = "declined"
	// OutFatal returns an error marked workflow.NonRetryable (type
	// TypeFatal).
	OutFatal = "fatal"
	// OutTimeout waits on the step's context until its timeout ends it.
	OutTimeout = "timeout"
	// OutPanic panics.
	OutPanic = "panic"
)

// Error types of scripted failures.
const (
	TypeTransient = "Transient"
	TypeDeclined  = "Declined"
	TypeFatal     = "Fatal"
)

// What the engine names other errors (their ErrorType), as a workflow sees
// them: a step whose context timed out, a panic, an event wait that timed
// out (a fmt-wrapped errors.New), a failed child, several errors joined.
const (
	TypeStepTimeout  = "deadlineExceededError"
	TypePanic        = "panic"
	TypeEventTimeout = "errorString"
	TypeChildFailed  = "ChildFailed"
	TypeJoined       = "joinError"
	// TypeChildCancelled: a child that ended CANCELLED.
	TypeChildCancelled = "ChildCancelled"
	// TypeCancelled: workflow.ErrCancelled (an errors.New).
	TypeCancelled = "errorString"
)

// Messages of cancellation and termination.
const (
	// CancelledError is workflow.ErrCancelled's message: the error of a
	// durable call made with a cancelled context.
	CancelledError = "workflow: run cancelled"
	// ParentClosedError is the error of a child terminated by its parent's
	// end (ParentCloseTerminate).
	ParentClosedError = "terminated: parent closed"
	// UnstartedClosedError is the error of a child that never started
	// when its parent's end asked it to cancel (ParentCloseRequestCancel).
	UnstartedClosedError = "cancelled: parent closed"
)

// TerminateReason is the reason the driver terminates a run with at the
// KindTerminate op id.
func TerminateReason(id string) string { return "model " + id }

// terminatedError is the error of a run terminated at the op id.
func terminatedError(id string) string { return "terminated: " + TerminateReason(id) }

// Error dispositions: what the workflow does with an op's error.
const (
	// OnErrHandle records the error in the output and goes on.
	OnErrHandle = "handle"
	// OnErrReturn returns it: the run's attempt fails (or, in a Parallel
	// branch, the branch does).
	OnErrReturn = "return"
)

// Event sending modes of a wait.
const (
	// SendBefore: the event is stored before the wait is reached (a signal
	// step before the wait blocks until the driver has sent it).
	SendBefore = "before"
	// SendDuring: the driver sends the event once the wait is recorded in
	// progress (the wait's timeout is long).
	SendDuring = "during"
	// SendAfter: the wait times out; a signal step after it has the driver
	// send the event then, so a later wait for the name takes it.
	SendAfter = "after"
	// SendNever: nothing is sent for this wait (it takes an event sent
	// earlier, if one is unconsumed, else times out).
	SendNever = "never"
	// SendCancel (KindCancel), SendTerminate (KindTerminate): the driver
	// cancels (terminates) the run once the wait is recorded in progress.
	SendCancel    = "cancel"
	SendTerminate = "terminate"
	// SendHold (KindHold): the driver sends the event once the run's
	// parent ended, if the run's parent-close policy is ABANDON.
	SendHold = "hold"
	// SendHeld (KindDetach): the driver sends the event to the run once
	// every child in Signal.Holds has its hold wait in progress.
	SendHeld = "held"
	// SendUpdate (KindUpdate): the driver sends the update Name with the
	// request Payload and keeps the answer.
	SendUpdate = "update"
)

// Parallel modes.
const (
	ModeCollectAll = "collect"
	ModeFailFast   = "failfast"
)

// Program is one random workflow: the input of WorkflowType.
type Program struct {
	// Key names the program (and, for a child, its place in its parent):
	// invocation logs and signals carry it.
	Key string `json:"key"`
	Ops []Op   `json:"ops"`
	// RunRetry is the run's retry policy (nil: one attempt).
	RunRetry *Retry `json:"run_retry,omitempty"`
	// DeadlineMS, if positive, is the run's deadline after its start.
	DeadlineMS int `json:"deadline_ms,omitempty"`
	// Signal and NATS are where signal steps publish (filled in by the
	// Driver; empty for programs without waits).
	Signal string `json:"signal,omitempty"`
	NATS   string `json:"nats,omitempty"`
	// Continue, if set, is the program the run continues as
	// (workflow.ContinueAsNew) once its ops end without an error: the run
	// ends COMPLETED naming the new run, which runs Continue with an empty
	// history, the same retry policy (RunRetry is the first program's) and
	// no deadline. Only a top-level program continues, and only one
	// without cancellations, terminations or detached children.
	Continue *Program `json:"continue,omitempty"`
}

// ContinueKey is the key of the n-th program (from 1) of the chain of
// runs that starts with the program key.
func ContinueKey(key string, n int) string { return key + "+" + strconv.Itoa(n) }

// RootKey is the key of the top-level program whose chain (ContinueKey)
// ('+') or child ('.') the program key names.
func RootKey(key string) string {
	if i := strings.IndexAny(key, ".+"); i >= 0 {
		return key[:i]
	}
	return key
}

// Chain is p and the programs it continues as, in order.
func (p *Program) Chain() []*Program {
	var out []*Program
	for q := p; q != nil; q = q.Continue {
		out = append(out, q)
	}
	return out
}

// Retry is a retry policy of a step, a run or a child.
type Retry struct {
	MaxAttempts int `json:"max"`
	IntervalMS  int `json:"ms"`
	// Coefficient multiplies the interval after each failure (0: 1).
	Coefficient float64 `json:"coef,omitempty"`
	// NonRetryable lists error types that are not retried.
	NonRetryable []string `json:"nr,omitempty"`
}

// Op is one operation of a program.
type Op struct {
	Kind string `json:"kind"`
	// ID is the op's step id (steps, sleeps, children) or its path; every
	// op of a program has a distinct ID.
	ID string `json:"id"`
	// OnErr is OnErrHandle or OnErrReturn (steps, waits, children,
	// parallel groups).
	OnErr string `json:"on_err,omitempty"`

	// Step: the outcome of attempt n is Outcomes[n-1] (the last one
	// repeats); Retry is its policy; TimeoutMS its attempt timeout.
	Outcomes  []Outcome `json:"outcomes,omitempty"`
	Retry     *Retry    `json:"retry,omitempty"`
	TimeoutMS int       `json:"timeout_ms,omitempty"`

	// Sleep: MS milliseconds.
	MS int `json:"ms,omitempty"`

	// Wait: for the event Name, at most TimeoutMS, its event sent by the
	// driver as Send says, with Payload.
	Name    string `json:"name,omitempty"`
	Send    string `json:"send,omitempty"`
	Payload string `json:"payload,omitempty"`

	// Children: started together, then awaited with Get (one) or
	// ChildAll (several).
	Children []Child `json:"children,omitempty"`

	// Parallel: Mode and the branches, each a sequence.
	Mode     string `json:"mode,omitempty"`
	Branches [][]Op `json:"branches,omitempty"`

	// Cancel, hold: a step run with workflow.WithoutCancel after the wait,
	// whatever the wait returned (nil: none).
	Cleanup *Op `json:"cleanup,omitempty"`
}

// Outcome is the scripted result of one step attempt.
type Outcome struct {
	Kind  string `json:"k"`
	Value int    `json:"v,omitempty"`
}

// Child is one child run: a nested program with its own retry policy and,
// for a detached child, its parent-close policy.
type Child struct {
	ID      string  `json:"id"`
	Program Program `json:"program"`
	Retry   *Retry  `json:"retry,omitempty"`
	Policy  string  `json:"policy,omitempty"`
}

// outcome returns the scripted outcome of attempt n (from 1).
func (o *Op) outcome(n int) Outcome {
	if len(o.Outcomes) == 0 {
		return Outcome{Kind: OutOK}
	}
	if n > len(o.Outcomes) {
		n = len(o.Outcomes)
	}
	if n < 1 {
		n = 1
	}
	return o.Outcomes[n-1]
}

// stepFailure is the message of a scripted failure of step id's attempt n.
func stepFailure(id string, n int, kind string) string {
	return fmt.Sprintf("step %s attempt %d: %s", id, n, kind)
}

// panicValue is what a scripted panic of step id's attempt n panics with.
func panicValue(id string, n int) string { return fmt.Sprintf("step %s attempt %d panicked", id, n) }

// eventTimeout is the message of a wait for name, as step id, that timed
// out (workflow.ErrEventTimeout wrapped as WaitForEvent does).
func eventTimeout(name, id string) string {
	return fmt.Sprintf("workflow: timed out waiting for event %q (step %q)", name, id)
}

// eventStepID is the step id of the n-th wait for name in a run.
func eventStepID(name string, n int) string {
	if n <= 1 {
		return "event:" + name
	}
	return "event:" + name + "#" + strconv.Itoa(n)
}

// signalStepID is the id of the signal step of the wait op id.
func signalStepID(id string) string { return "sig-" + id }

// Obs is what one op observed, as the interpreter records it in the run's
// output and the model predicts it.
type Obs struct {
	// V is the value: a step's output, an event's payload, the outputs of
	// children (null for a failed one).
	V json.RawMessage `json:"v,omitempty"`
	// Err and Type are the error and its workflow.ErrorType, NR whether it
	// is marked non-retryable.
	Err  string `json:"err,omitempty"`
	Type string `json:"type,omitempty"`
	NR   bool   `json:"nr,omitempty"`
}

// Record is the output of a program: what each op observed, by op ID.
type Record map[string]Obs

// ChildRunPlaceholder stands for a child run's id in normalised messages.
const ChildRunPlaceholder = "<child>"

// childFailure is the message of the error of a failed child whose own
// error is msg, as its parent sees it (normalised).
func childFailure(msg string) string {
	return "child run " + ChildRunPlaceholder + " failed: " + msg
}

// childCancelled is the message of the error of a child that ended
// CANCELLED with msg, as its parent sees it (normalised).
func childCancelled(msg string) string {
	return "child run " + ChildRunPlaceholder + " cancelled: " + msg
}

var childRunID = regexp.MustCompile(`child run [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} `)

// NormalizeMessage cuts what cannot be predicted from an error message:
// the goroutine stack a panic's message carries after a blank line, and
// the ids of child runs.
func NormalizeMessage(s string) string {
	s = childRunID.ReplaceAllString(s, "child run "+ChildRunPlaceholder+" ")
	lines := strings.Split(s, "\n")
	var out []string
	skip := false
	for _, l := range lines {
		// A panic's message is "panic: <value>\n\n<stack>"; joined errors
		// put one message per line, so a stack ends at the next "panic:"
		// or scripted message.
		if skip && !(strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "step ") || strings.HasPrefix(l, "workflow: ") ||
			strings.HasPrefix(l, "child run ") || strings.HasPrefix(l, "context ")) {
			continue
		}
		skip = false
		if strings.Contains(l, "panic: ") {
			skip = true
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// Walk calls fn for every op of ops, depth first (cleanup steps
// included), children's programs excluded.
func Walk(ops []Op, fn func(*Op)) {
	for i := range ops {
		fn(&ops[i])
		if c := ops[i].Cleanup; c != nil {
			fn(c)
		}
		for b := range ops[i].Branches {
			Walk(ops[i].Branches[b], fn)
		}
	}
}

// Clone deep-copies p.
func (p Program) Clone() Program {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	var q Program
	if err := json.Unmarshal(b, &q); err != nil {
		panic(err)
	}
	return q
}

// String is the program as compact JSON.
func (p Program) String() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// WithKey returns p under another key, its children's keys following.
func (p Program) WithKey(key string) Program {
	q := p.Clone()
	q.Key = key
	setChildKeys(&q)
	for i, c := range q.Chain()[1:] {
		c.Key = ContinueKey(key, i+1)
		setChildKeys(c)
	}
	return q
}
