package workflowtest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/pkg/workflowtest"
)

var (
	phase = workflow.NewState[string]("phase")
	lines = workflow.NewStream[string]("lines")
)

func TestStateAndStreamInProcess(t *testing.T) {
	env := workflowtest.New()
	env.SendEventAfter(time.Minute, "go", "x")
	flow := workflow.New[struct{}, int]("Lines")
	out, err := workflowtest.Run(env, flow, func(ctx workflow.Context, _ struct{}) (int, error) {
		if err := phase.Set(ctx, "start"); err != nil {
			return 0, err
		}
		for _, l := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"} {
			if err := lines.Write(ctx, l); err != nil {
				return 0, err
			}
		}
		// A suspension: the next execution replays the Sets and Writes.
		if _, err := workflow.WaitForEvent[string](ctx, "go", 0); err != nil {
			return 0, err
		}
		if err := phase.Set(ctx, "done"); err != nil {
			return 0, err
		}
		if err := lines.Close(ctx); err != nil {
			return 0, err
		}
		if err := lines.Close(ctx); err != nil {
			return 0, err
		}
		err := lines.Write(ctx, "late")
		if !errors.Is(err, workflow.ErrStreamClosed) || !workflow.IsNonRetryable(err) {
			return 0, err
		}
		bad := workflow.NewStream[int]("a#b")
		if err := bad.Write(ctx, 1); !errors.Is(err, workflow.ErrInvalidStepID) {
			return 0, err
		}
		return 1, nil
	}, struct{}{})
	if err != nil || out != 1 {
		t.Fatalf("run: %d %v", out, err)
	}
	if env.Executions() != 2 {
		t.Fatalf("%d executions, want 2", env.Executions())
	}
	v, version, err := workflowtest.State(env, phase)
	if err != nil || v != "done" || version != 2 {
		t.Fatalf("state: %q v%d %v", v, version, err)
	}
	got, closed, err := workflowtest.StreamEntries(env, lines)
	if err != nil || !closed || strings.Join(got, "") != "abcdefghijk" {
		t.Fatalf("stream: %q %v %v", got, closed, err)
	}
}

func TestStreamFull(t *testing.T) {
	env := workflowtest.New()
	flow := workflow.New[struct{}, int]("Full")
	out, err := workflowtest.Run(env, flow, func(ctx workflow.Context, _ struct{}) (int, error) {
		for i := 1; i <= protocol.MaxStreamEntries; i++ {
			if err := lines.Write(ctx, "x"); err != nil {
				return 0, err
			}
		}
		err := lines.Write(ctx, "one too many")
		if !errors.Is(err, workflow.ErrStreamFull) || !workflow.IsNonRetryable(err) {
			return 0, err
		}
		return 1, nil
	}, struct{}{})
	if err != nil || out != 1 {
		t.Fatalf("run: %d %v", out, err)
	}
	got, _, err := workflowtest.StreamEntries(env, lines)
	if err != nil || len(got) != protocol.MaxStreamEntries {
		t.Fatalf("%d entries, %v", len(got), err)
	}
}

func TestStateFullAndTooLarge(t *testing.T) {
	env := workflowtest.New()
	big := workflow.NewState[string]("big")
	flow := workflow.New[struct{}, int]("StateFull")
	out, err := workflowtest.Run(env, flow, func(ctx workflow.Context, _ struct{}) (int, error) {
		for i := 1; i <= protocol.MaxStateSets; i++ {
			if err := phase.Set(ctx, "x"); err != nil {
				return 0, err
			}
		}
		if err := phase.Set(ctx, "one too many"); !errors.Is(err, workflow.ErrStateFull) {
			return 0, err
		}
		err := big.Set(ctx, strings.Repeat("x", protocol.DefaultPayloadMaxBytes+1))
		if !workflow.IsNonRetryable(err) || !strings.Contains(err.Error(), "payload too large") {
			return 0, err
		}
		return 1, nil
	}, struct{}{})
	if err != nil || out != 1 {
		t.Fatalf("run: %d %v", out, err)
	}
	if _, version, err := workflowtest.State(env, phase); err != nil || version != protocol.MaxStateSets {
		t.Fatalf("state version %d %v", version, err)
	}
	if _, version, err := workflowtest.State(env, big); err != nil || version != 0 {
		t.Fatalf("a value too large is not set: v%d %v", version, err)
	}
}
