package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The workflows of the soak scenario. One type, Soak, takes the shape of
// its input's kind, so that a steady mix of the engine's features (steps,
// durable sleeps, child runs, step retries, failing runs) runs through the
// same dispatch path; SoakChild is its children's type.

// Workflow types of the soak scenario.
const (
	SoakType      = "Soak"
	SoakChildType = "SoakChild"
)

// Kinds of Soak run.
const (
	// SoakSteps runs three steps.
	SoakSteps = "steps"
	// SoakSleep runs a step, sleeps durably for SleepMS and runs another.
	SoakSleep = "sleep"
	// SoakChildren runs a step and two SoakChild runs, and waits for both.
	SoakChildren = "child"
	// SoakRetry runs a step and a step whose first attempt fails.
	SoakRetry = "retry"
	// SoakFail runs a step and a step that fails for good: the run ends
	// FAILED.
	SoakFail = "fail"
)

// SoakInput is the input of Soak.
type SoakInput struct {
	Kind    string `json:"kind"`
	SleepMS int64  `json:"sleep_ms,omitempty"`
}

// SoakOutput is the output of Soak.
type SoakOutput struct {
	// FirstNS is when the run's code first ran (Unix nanoseconds), as
	// Probe records it: the soak scenario's dispatch latency is this minus
	// the time the start returned.
	FirstNS int64 `json:"first_ns"`
}

// errSoakFail is the failure of SoakFail runs.
var errSoakFail = errors.New("soak: failing by design")

// soakRetryPolicy makes the failed first attempt of a SoakRetry step retry
// within the worker's inline retry limit, in the same execution, as most
// transient failures of real steps do.
var soakRetryPolicy = retry.Policy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond}

// Soak is the soak scenario's workflow; its first step records when its
// code first ran.
func Soak(ctx workflow.Context, in SoakInput) (SoakOutput, error) {
	first, err := workflow.Step(ctx, "t0", func(context.Context) (int64, error) { return time.Now().UnixNano(), nil })
	if err != nil {
		return SoakOutput{}, err
	}
	out := SoakOutput{FirstNS: first}
	step := func(id string) error {
		_, err := workflow.Step(ctx, id, func(context.Context) (int, error) { return 1, nil })
		return err
	}
	switch in.Kind {
	case SoakSteps:
		err = errors.Join(step("s1"), step("s2"))
	case SoakSleep:
		if err = workflow.Sleep(ctx, "nap", time.Duration(in.SleepMS)*time.Millisecond); err == nil {
			err = step("woke")
		}
	case SoakChildren:
		fs := []*workflow.ChildFuture[int]{
			workflow.StartChild[int](ctx, "c1", SoakChildType, struct{}{}),
			workflow.StartChild[int](ctx, "c2", SoakChildType, struct{}{}),
		}
		_, err = workflow.ChildAll(ctx, fs)
	case SoakRetry:
		_, err = workflow.Step(ctx, "flaky", func(ctx context.Context) (int, error) {
			if info, ok := workflow.StepInfoFrom(ctx); ok && info.Attempt == 1 {
				return 0, errors.New("soak: first attempt fails")
			}
			return 1, nil
		}, workflow.WithRetry(soakRetryPolicy))
	case SoakFail:
		_, err = workflow.Step(ctx, "broken", func(context.Context) (int, error) {
			return 0, workflow.NonRetryable(errSoakFail)
		})
	default:
		err = workflow.NonRetryable(fmt.Errorf("soak: unknown kind %q", in.Kind))
	}
	if err != nil {
		return SoakOutput{}, err
	}
	return out, nil
}

// SoakChild is the child of SoakChildren runs: one step.
func SoakChild(ctx workflow.Context, _ struct{}) (int, error) {
	return workflow.Step(ctx, "c", func(context.Context) (int, error) { return 1, nil })
}

// RegisterWorkflows registers the workflows of the bench's own scenarios
// (Soak, SoakChild) on w; `kagzi serve worker` registers them next to the
// harness workflows of tests/testflows.
func RegisterWorkflows(w *worker.Worker) error {
	return errors.Join(worker.Register(w, SoakType, Soak), worker.Register(w, SoakChildType, SoakChild))
}
