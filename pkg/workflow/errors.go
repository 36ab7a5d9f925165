package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrDuplicateStep is returned by a step whose id was already used in the
// same execution. It reveals non-deterministic workflow code (or two steps
// sharing an id) and fails the run even if the workflow ignores it.
var ErrDuplicateStep = errors.New("workflow: duplicate step id")

// ErrInvalidStepID is returned by a step whose id is empty or longer than
// MaxStepIDLen bytes.
var ErrInvalidStepID = errors.New("workflow: invalid step id")

// ErrReplay is wrapped by the error of a step whose recorded result does not
// fit the code that replays it (for example its output no longer decodes
// into the step's type). Like ErrDuplicateStep, it fails the run even if
// the workflow ignores it.
var ErrReplay = errors.New("workflow: recorded history does not match the workflow code")

// ErrPayloadTooLarge is wrapped by the (non-retryable) error of a step, a
// run or a child start whose output or input, once encoded, exceeds the
// payload limit the engine told the worker (protocol.PayloadLimits).
var ErrPayloadTooLarge = errors.New("workflow: payload too large")

// Causes of the end of a run's context, as context.Cause reports them to
// workflow and step code.
var (
	// ErrCancelled: the run was asked to cancel (client.Cancel, kagzi run
	// cancel, or its parent's cancellation or close policy). Its Context
	// ends, and durable calls made with it that would do something new
	// (run a step, sleep, wait, start a child) return an error wrapping
	// ErrCancelled; recorded results still replay. The workflow may clean
	// up with WithoutCancel(ctx), and ends CANCELLED if it returns an error
	// (COMPLETED if it returns a result).
	ErrCancelled = errors.New("workflow: run cancelled")
	// ErrTerminated: the run was terminated (client.Terminate, kagzi run
	// terminate, or its parent's close); the execution is abandoned
	// without further reports.
	ErrTerminated = errors.New("workflow: run terminated")
	// ErrLeaseLost: the engine no longer recognises this worker's lease on
	// the run (another worker may hold it); the execution is abandoned.
	ErrLeaseLost = errors.New("workflow: lease lost")
	// ErrDraining: the worker is shutting down and its drain timeout
	// passed; the run is released to be executed again elsewhere.
	ErrDraining = errors.New("workflow: worker draining")
	// ErrReportRefused: the engine refused a report as invalid; the
	// execution is abandoned.
	ErrReportRefused = errors.New("workflow: report refused")
	// ErrEventsArrived: the engine refused the run's end because events of
	// a name the execution waited for or drained arrived after the run
	// was delivered to it (see DrainEvents); the execution is abandoned
	// and the run executes again at once, with those events there, without
	// counting an attempt. Workflow code does not see it: its end report
	// is the last thing an execution does.
	ErrEventsArrived = errors.New("workflow: events arrived during the execution")
)

// NonRetryable marks err so that the step or run it fails is not retried,
// whatever attempts its retry policy has left. It returns nil for a nil err.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryableError{err: err}
}

type nonRetryableError struct{ err error }

func (e *nonRetryableError) Error() string { return e.err.Error() }
func (e *nonRetryableError) Unwrap() error { return e.err }

// IsNonRetryable reports whether err, or any error it wraps, was marked by
// NonRetryable (a step's final failure keeps the mark in every replay).
func IsNonRetryable(err error) bool {
	var nr *nonRetryableError
	if errors.As(err, &nr) {
		return true
	}
	return markedStepError(err)
}

// markedStepError reports whether err's tree holds a *StepError with the
// non-retryable mark. Every one is looked at, not the first errors.As
// finds: a replay's error joining several step failures must answer as the
// execution that ran them, where the mark of any of them is found.
func markedStepError(err error) bool {
	if se, ok := err.(*StepError); ok && se.NonRetryable {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if markedStepError(e) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return markedStepError(e)
		}
	}
	return false
}

// TypedError is implemented by errors that name their own type for retry
// policies (see retry.Policy.NonRetryable).
type TypedError interface {
	error
	ErrorType() string
}

// ErrorType names the kind of err as it is reported to the engine and
// matched against a retry policy's non-retryable error types: the
// ErrorType() of the first error in its chain that implements TypedError,
// otherwise the Go type name of the first error in the chain that is not
// a mere wrapper (fmt.Errorf's %w or NonRetryable) — for example
// "CardDeclined" for fmt.Errorf("charge: %w", &CardDeclined{}). It returns
// "" for a nil err.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var te TypedError
	if errors.As(err, &te) {
		return te.ErrorType()
	}
	for {
		t := reflect.TypeOf(err)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		_, ours := err.(*nonRetryableError)
		if ours || t.PkgPath() == "fmt" {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
				continue
			}
		}
		if name := t.Name(); name != "" {
			return name
		}
		return strings.TrimLeft(reflect.TypeOf(err).String(), "*")
	}
}

// PanicError is the error of a step or workflow function that panicked.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack string
}

// Error returns the panic value followed by the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
}

// ErrorType implements TypedError: "panic".
func (e *PanicError) ErrorType() string { return "panic" }

// StepError is the error of a step whose failure is final in this run
// attempt: the recorded message, error type and non-retryable mark. The
// execution that ran the step and every replay return one alike, so
// ErrorType(err) and IsNonRetryable(err) — also of an error joining it with
// others — are the same in all of them; only the execution that ran the
// step can unwrap it to the original Go error.
type StepError struct {
	StepID  string
	Attempt int
	// Type is the recorded ErrorType of the original error.
	Type    string
	Message string
	// NonRetryable: the original error was marked non-retryable.
	NonRetryable bool

	cause error
}

// Error returns the recorded message.
func (e *StepError) Error() string { return e.Message }

// Unwrap returns the original error in the execution that ran the step, nil
// in a replay.
func (e *StepError) Unwrap() error { return e.cause }

// ErrorType implements TypedError: the original error's type.
func (e *StepError) ErrorType() string { return e.Type }
