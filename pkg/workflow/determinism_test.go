package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/kagzi/kagzi/internal/wfexec"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Now and SideEffect record their values on the first execution and
// return the recorded ones on replay without calling again.
func TestNowAndSideEffectReplay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	calls := 0
	fn := workflow.Func(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		a := workflow.Now(ctx)
		b := workflow.Now(ctx)
		id, err := workflow.SideEffect(ctx, "id", func() int { calls++; return 40 + calls })
		if err != nil {
			return nil, err
		}
		return json.Marshal([]any{a, b, id})
	})
	rep := &recorder{}
	out := fn.Execute(t.Context(), wfexec.Execution{Run: newRun(nil), Reporter: rep, Now: func() time.Time { return t0 }})
	if out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("outcome %v %v", out.Status, out.Err)
	}
	items := rep.all()
	if got := kinds(items); got != "step_completed:now,step_completed:now#2,step_completed:side:id,run_completed" {
		t.Fatalf("reports %s", got)
	}
	first := string(items[3].Output)

	// Replay from the recorded steps, with another clock: same values.
	var steps []protocol.StepState
	for _, it := range items[:3] {
		steps = append(steps, protocol.StepState{StepID: it.StepID, Status: "COMPLETED", Attempt: 1, Output: it.Output})
	}
	rep2 := &recorder{}
	out = fn.Execute(t.Context(), wfexec.Execution{Run: newRun(nil, steps...), Reporter: rep2,
		Now: func() time.Time { return t0.Add(time.Hour) }})
	if out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("replay outcome %v %v", out.Status, out.Err)
	}
	items2 := rep2.all()
	if len(items2) != 1 || string(items2[0].Output) != first || calls != 1 {
		t.Fatalf("replay reported %s output %s (first %s), side effect calls %d", kinds(items2), items2[0].Output, first, calls)
	}
}

// Version records max for a run that reaches the change first, returns
// DefaultVersion for a run whose history went past it, and fails a run
// whose version the code no longer supports.
func TestVersion(t *testing.T) {
	t.Parallel()
	fn := func(min int) workflow.Func {
		return func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
			v, err := workflow.Version(ctx, "change", min, 2)
			if err != nil {
				return nil, err
			}
			again, _ := workflow.Version(ctx, "change", min, 2)
			if again != v {
				return nil, errors.New("second call differs")
			}
			if _, err := workflow.Step(ctx, "after", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return nil, err
			}
			return json.Marshal(v)
		}
	}
	// New run: records 2.
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(nil), rep, fn(workflow.DefaultVersion))
	if out.Status != wfexec.OutcomeCompleted || kinds(rep.all()) != "step_completed:version:change,step_completed:after,run_completed" ||
		string(rep.all()[2].Output) != "2" {
		t.Fatalf("new run: %v %s", out.Status, kinds(rep.all()))
	}
	// A run recorded by the old code (it got past here: "after" is
	// recorded without a version marker): DefaultVersion, nothing recorded.
	rep = &recorder{}
	out = exec(t, t.Context(), newRun(nil, completed("after", 1, 1)), rep, fn(workflow.DefaultVersion))
	if out.Status != wfexec.OutcomeCompleted || kinds(rep.all()) != "run_completed" || string(rep.all()[0].Output) != "0" {
		t.Fatalf("old run: %v %s", out.Status, kinds(rep.all()))
	}
	// The same old run once the code dropped the old branch: fails.
	rep = &recorder{}
	out = exec(t, t.Context(), newRun(nil, completed("after", 1, 1)), rep, fn(1))
	if out.Status != wfexec.OutcomeFailed || !errors.Is(out.Err, workflow.ErrReplay) {
		t.Fatalf("unsupported old run: %v %v", out.Status, out.Err)
	}
	// A recorded version replays.
	rep = &recorder{}
	out = exec(t, t.Context(), newRun(nil, completed("version:change", 1, 1), completed("after", 1, 1)), rep, fn(workflow.DefaultVersion))
	if out.Status != wfexec.OutcomeCompleted || string(rep.all()[0].Output) != "1" {
		t.Fatalf("recorded version: %v %s", out.Status, kinds(rep.all()))
	}
}

// A workflow that returns ContinueAsNew ends with one run_continue item
// carrying the new input.
func TestContinueAsNewReport(t *testing.T) {
	t.Parallel()
	ref := workflow.New[int, int]("Loop")
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(3), rep, func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		var n int
		_ = json.Unmarshal(in, &n)
		return nil, ref.ContinueAsNew(ctx, n+1)
	})
	items := rep.all()
	if out.Status != wfexec.OutcomeCompleted || len(items) != 1 || items[0].Kind != protocol.ReportRunContinue || string(items[0].Output) != "4" {
		t.Fatalf("outcome %v %v, reports %+v", out.Status, out.Err, items)
	}
	// An input that does not encode fails the run instead.
	rep = &recorder{}
	out = exec(t, t.Context(), newRun(3), rep, func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		return nil, workflow.ContinueAsNew(ctx, func() {})
	})
	if out.Status != wfexec.OutcomeFailed || rep.all()[0].Kind != protocol.ReportRunFailed || !rep.all()[0].NonRetryable {
		t.Fatalf("bad input: %v %+v", out.Status, rep.all())
	}
}
