package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kagzi/kagzi/internal/wfexec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// recorder is a wfexec.Reporter that records items and answers with fail
// (for the whole report) and answer (per item; default ok).
type recorder struct {
	mu     sync.Mutex
	items  []protocol.ReportItem
	calls  int
	fail   func(items []protocol.ReportItem) error
	answer func(it protocol.ReportItem) protocol.ReportResult
}

func (r *recorder) Report(ctx context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		if err := r.fail(items); err != nil {
			return nil, err
		}
	}
	r.items = append(r.items, items...)
	results := make([]protocol.ReportResult, len(items))
	for i, it := range items {
		results[i] = protocol.ReportResult{Code: protocol.ResultOK}
		if r.answer != nil {
			results[i] = r.answer(it)
		}
	}
	return results, nil
}

func (r *recorder) all() []protocol.ReportItem {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.ReportItem(nil), r.items...)
}

func newRun(input any, steps ...protocol.StepState) *protocol.DeliveredRun {
	raw, _ := json.Marshal(input)
	return &protocol.DeliveredRun{
		RunID: uuid.Must(uuid.NewV7()), Namespace: "default", Queue: "default",
		Type: "T", Attempt: 1, LeaseToken: 7, Input: raw, Steps: steps,
	}
}

func completed(id string, attempt int, v any) protocol.StepState {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return protocol.StepState{StepID: id, Status: "COMPLETED", Attempt: attempt, Output: raw}
}

func exec(t *testing.T, ctx context.Context, run *protocol.DeliveredRun, rep *recorder, fn workflow.Func) wfexec.Outcome {
	t.Helper()
	return fn.Execute(ctx, wfexec.Execution{Run: run, Reporter: rep})
}

func kinds(items []protocol.ReportItem) string {
	var s []string
	for _, it := range items {
		k := string(it.Kind)
		if it.StepID != "" {
			k += ":" + it.StepID
		}
		s = append(s, k)
	}
	return strings.Join(s, ",")
}

func TestStepsReportOnceAndCompleteRun(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	run := newRun(20)
	calls := map[string]int{}
	out := exec(t, t.Context(), run, rep, func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		var n int
		if err := json.Unmarshal(in, &n); err != nil {
			return nil, err
		}
		a, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { calls["a"]++; return n + 1, nil })
		if err != nil {
			return nil, err
		}
		b, err := workflow.Step(ctx, "b", func(context.Context) (int, error) {
			// a's result is durable before b, which may act outside the
			// run, starts.
			if got := kinds(rep.all()); got != "step_completed:a" {
				t.Errorf("before step b: reports %s", got)
			}
			calls["b"]++
			return a * 2, nil
		})
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	})
	if out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("outcome %v %v", out.Status, out.Err)
	}
	items := rep.all()
	if got := kinds(items); got != "step_completed:a,step_completed:b,run_completed" {
		t.Fatalf("reports %s", got)
	}
	// The last step's result goes with the completion: two round trips.
	if calls["a"] != 1 || calls["b"] != 1 || rep.calls != 2 {
		t.Fatalf("calls %v, report round trips %d", calls, rep.calls)
	}
	for _, it := range items {
		if it.RunID != run.RunID || it.LeaseToken != 7 {
			t.Fatalf("item %+v not under the run's lease", it)
		}
	}
	if items[0].Attempt != 1 || string(items[0].Output) != "21" || items[0].StepKind != "FUNCTION" || items[0].StartedAt == nil {
		t.Fatalf("step a item %+v", items[0])
	}
	if string(items[2].Output) != "42" {
		t.Fatalf("run output %s", items[2].Output)
	}
}

func TestReplayReturnsRecordedOutputs(t *testing.T) {
	t.Parallel()
	type res struct{ V string }
	rep := &recorder{}
	run := newRun(nil, completed("a", 1, res{"x"}),
		protocol.StepState{StepID: "b", Status: "FAILED", Attempt: 2, Error: "boom"})
	ran := 0
	out := exec(t, t.Context(), run, rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		a, err := workflow.Step(ctx, "a", func(context.Context) (res, error) { ran++; return res{"fresh"}, nil })
		if err != nil {
			return nil, err
		}
		b, err := workflow.Step(ctx, "b", func(context.Context) (string, error) { return a.V + "y", nil })
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	})
	if out.Status != wfexec.OutcomeCompleted || ran != 0 {
		t.Fatalf("outcome %v, step a ran %d times", out, ran)
	}
	items := rep.all()
	if kinds(items) != "step_completed:b,run_completed" || items[0].Attempt != 3 || string(items[1].Output) != `"xy"` {
		t.Fatalf("reports %s %+v", kinds(items), items)
	}
}

func TestDuplicateStepFailsRunEvenIfSwallowed(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	var dupErr error
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		for range 2 {
			_, dupErr = workflow.Step(ctx, "same", func(context.Context) (int, error) { return 1, nil })
		}
		return nil, nil // ignores the error
	})
	if !errors.Is(dupErr, workflow.ErrDuplicateStep) {
		t.Fatalf("second step err %v", dupErr)
	}
	items := rep.all()
	last := items[len(items)-1]
	if out.Status != wfexec.OutcomeFailed || last.Kind != protocol.ReportRunFailed || !strings.Contains(last.Error, `"same"`) {
		t.Fatalf("outcome %v, last report %+v", out, last)
	}
}

func TestReplayTypeMismatchFailsRun(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(nil, completed("a", 1, "text")), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
		_ = err
		return nil, nil
	})
	if out.Status != wfexec.OutcomeFailed || !errors.Is(out.Err, workflow.ErrReplay) {
		t.Fatalf("outcome %v", out)
	}
}

func TestStepErrorAndPanicAreStepFailures(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	errBad := workflow.NonRetryable(errors.New("bad card"))
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		once := workflow.WithRetry(retry.Policy{MaxAttempts: 1})
		_, err := workflow.Step(ctx, "p", func(context.Context) (int, error) { panic("kaput") }, once)
		var pe *workflow.PanicError
		if !errors.As(err, &pe) || pe.Value != "kaput" {
			return nil, fmt.Errorf("want panic error, got %v", err)
		}
		_, err = workflow.Step(ctx, "e", func(context.Context) (int, error) { return 0, errBad }) // non-retryable
		return nil, err
	})
	items := rep.all()
	if kinds(items) != "step_failed:p,step_failed:e,run_failed" {
		t.Fatalf("reports %s (%v)", kinds(items), out.Err)
	}
	if !strings.Contains(items[0].Error, "kaput") || items[0].ErrorType != "panic" {
		t.Fatalf("panic step item %+v", items[0])
	}
	if !items[1].NonRetryable || items[1].Error != "bad card" || !items[2].NonRetryable || items[2].ErrorType != "errorString" {
		t.Fatalf("items %+v", items[1:])
	}
	if out.Status != wfexec.OutcomeFailed || !workflow.IsNonRetryable(out.Err) {
		t.Fatalf("outcome %v", out)
	}
}

func TestWorkflowPanicIsRunFailed(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil, nil
	})
	items := rep.all()
	if out.Status != wfexec.OutcomeFailed || len(items) != 1 || items[0].Kind != protocol.ReportRunFailed {
		t.Fatalf("outcome %v, reports %s", out, kinds(items))
	}
	if !strings.Contains(items[0].Error, "assignment to entry in nil map") || !strings.Contains(items[0].Error, "workflow_test.go") {
		t.Fatalf("error lacks panic message or stack: %q", items[0].Error)
	}
}

func TestSleepSuspendsThenReplays(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	after := 0
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		if err := workflow.Sleep(ctx, "nap", time.Hour); err != nil {
			return nil, err
		}
		after++
		return json.Marshal("woke")
	}
	rep := &recorder{}
	run := newRun(nil)
	out := fn.Execute(t.Context(), wfexec.Execution{Run: run, Reporter: rep, Now: func() time.Time { return now }})
	items := rep.all()
	if out.Status != wfexec.OutcomeSuspended || after != 0 || rep.calls != 1 {
		t.Fatalf("outcome %v, code after sleep ran %d times, %d round trips", out, after, rep.calls)
	}
	if kinds(items) != "step_completed:nap,run_sleep" || items[0].StepKind != "SLEEP" {
		t.Fatalf("reports %s", kinds(items))
	}
	wake := now.Add(time.Hour)
	var recorded time.Time
	if err := json.Unmarshal(items[0].Output, &recorded); err != nil || !recorded.Equal(wake) || !items[1].Until.Equal(wake) {
		t.Fatalf("recorded %v (%v), until %v, want %v", recorded, err, items[1].Until, wake)
	}

	// Delivered again early: sleeps the rest, records no new step.
	rep = &recorder{}
	run.Steps = []protocol.StepState{{StepID: "nap", Status: "COMPLETED", Attempt: 1, Output: items[0].Output}}
	out = fn.Execute(t.Context(), wfexec.Execution{Run: run, Reporter: rep, Now: func() time.Time { return now.Add(time.Minute) }})
	if got := rep.all(); out.Status != wfexec.OutcomeSuspended || kinds(got) != "run_sleep" || !got[0].Until.Equal(wake) {
		t.Fatalf("early replay: %v %s", out, kinds(got))
	}

	// Delivered after the wake time: continues.
	rep = &recorder{}
	out = fn.Execute(t.Context(), wfexec.Execution{Run: run, Reporter: rep, Now: func() time.Time { return wake.Add(time.Second) }})
	if got := rep.all(); out.Status != wfexec.OutcomeCompleted || kinds(got) != "run_completed" || after != 1 {
		t.Fatalf("late replay: %v %s, after=%d", out, kinds(got), after)
	}
}

func TestSuspensionSurvivesRecoverInWorkflowCode(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (res json.RawMessage, err error) {
		defer func() {
			if recover() != nil {
				res, err = json.Marshal("swallowed")
			}
		}()
		_ = workflow.Sleep(ctx, "nap", time.Hour)
		return json.Marshal("not reached")
	})
	if out.Status != wfexec.OutcomeSuspended || kinds(rep.all()) != "step_completed:nap,run_sleep" {
		t.Fatalf("outcome %v, reports %s", out, kinds(rep.all()))
	}
}

func TestFailedReportAbandons(t *testing.T) {
	t.Parallel()
	rep := &recorder{fail: func(items []protocol.ReportItem) error {
		if items[0].StepID == "a" {
			return workflow.ErrLeaseLost
		}
		return nil
	}}
	reached := false
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return nil, err
		}
		// a's result is held; b's start makes it durable first, and the
		// lost lease stops the execution there.
		_, err = workflow.Step(ctx, "b", func(context.Context) (int, error) { reached = true; return 1, nil })
		return nil, err
	})
	if out.Status != wfexec.OutcomeAbandoned || !errors.Is(out.Err, workflow.ErrLeaseLost) || reached || len(rep.all()) != 0 {
		t.Fatalf("outcome %v, reached %v, reports %s", out, reached, kinds(rep.all()))
	}
}

func TestCancelledRunIsAbandonedWithoutReports(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	ctx, cancel := context.WithCancelCause(t.Context())
	out := exec(t, ctx, newRun(nil), rep, func(wctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		return nil, func() error {
			_, err := workflow.Step(wctx, "wait", func(ctx context.Context) (int, error) {
				cancel(workflow.ErrCancelled)
				<-ctx.Done()
				return 0, ctx.Err()
			})
			return err
		}()
	})
	if out.Status != wfexec.OutcomeAbandoned || !errors.Is(out.Err, workflow.ErrCancelled) || len(rep.all()) != 0 {
		t.Fatalf("outcome %v, reports %s", out, kinds(rep.all()))
	}
}

func TestStepTimeoutAndInvalidID(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	var idErr, toErr error
	exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, idErr = workflow.Step(ctx, "", func(context.Context) (int, error) { return 1, nil })
		_, toErr = workflow.Step(ctx, "slow", func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}, workflow.WithStepTimeout(time.Millisecond), workflow.WithRetry(retry.Policy{MaxAttempts: 1}))
		return nil, nil
	})
	if !errors.Is(idErr, workflow.ErrInvalidStepID) || !errors.Is(toErr, context.DeadlineExceeded) {
		t.Fatalf("id err %v, timeout err %v", idErr, toErr)
	}
	if got := kinds(rep.all()); got != "step_failed:slow,run_completed" {
		t.Fatalf("reports %s", got)
	}
}

type plainErr struct{}

func (*plainErr) Error() string { return "plain" }

type codeErr struct{ code string }

func (e *codeErr) Error() string     { return e.code }
func (e *codeErr) ErrorType() string { return "Code" + e.code }

func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	if workflow.NonRetryable(nil) != nil || workflow.IsNonRetryable(errors.New("x")) || workflow.ErrorType(nil) != "" {
		t.Fatal("nil / plain error handling")
	}
	wrapped := fmt.Errorf("ctx: %w", workflow.NonRetryable(&codeErr{"42"}))
	if !workflow.IsNonRetryable(wrapped) || workflow.ErrorType(wrapped) != "Code42" {
		t.Fatalf("wrapped: %v %q", workflow.IsNonRetryable(wrapped), workflow.ErrorType(wrapped))
	}
	var ce *codeErr
	if !errors.As(wrapped, &ce) || wrapped.Error() != "ctx: 42" {
		t.Fatal("NonRetryable must keep the chain and message")
	}
	if got := workflow.ErrorType(fmt.Errorf("a: %w", workflow.NonRetryable(fmt.Errorf("b: %w", &plainErr{})))); got != "plainErr" {
		t.Fatalf("type behind wrappers: %q", got)
	}
	if got := workflow.ErrorType(fmt.Errorf("a: %w", errors.New("b"))); got != "errorString" {
		t.Fatalf("type of errors.New: %q", got)
	}
	// Replayed step failures joined: the mark of any of them counts, as in
	// the execution that ran the steps.
	joined := errors.Join(&workflow.StepError{StepID: "a", Message: "a"},
		fmt.Errorf("b: %w", &workflow.StepError{StepID: "b", Message: "b", NonRetryable: true}))
	if !workflow.IsNonRetryable(joined) {
		t.Fatal("a marked step failure joined after an unmarked one")
	}
	if workflow.IsNonRetryable(errors.Join(&workflow.StepError{StepID: "a"}, errors.New("b"))) {
		t.Fatal("nothing marked")
	}
}

// A result held by one Parallel branch and sent by another branch's report
// is durable before the first branch's next step function runs: its flush
// waits for the report in flight.
func TestHeldResultDurableAcrossBranches(t *testing.T) {
	t.Parallel()
	inFlight := make(chan struct{})
	var once sync.Once
	rec := &recorder{}
	rep := slowReporter{rec: rec, before: func(items []protocol.ReportItem) {
		for _, it := range items {
			if it.StepID == "a" {
				once.Do(func() { close(inFlight) })
				// A slow report: a flush that did not wait for it would
				// run c before a is recorded.
				time.Sleep(20 * time.Millisecond)
			}
		}
	}}
	aDone := make(chan struct{})
	fn := workflow.Func(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		err := workflow.Parallel(ctx, workflow.CollectAll,
			func(ctx workflow.Context) error {
				if _, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return err
				}
				close(aDone)
				<-inFlight
				_, err := workflow.Step(ctx, "c", func(context.Context) (int, error) {
					if !strings.Contains(kinds(rec.all()), "step_completed:a") {
						t.Error("step c ran before a's result was recorded")
					}
					return 3, nil
				})
				return err
			},
			func(ctx workflow.Context) error {
				<-aDone
				_, err := workflow.Step(ctx, "b", func(context.Context) (int, error) { return 2, nil })
				return err
			})
		return nil, err
	})
	out := fn.Execute(t.Context(), wfexec.Execution{Run: newRun(nil), Reporter: rep})
	if out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("outcome %v %v", out.Status, out.Err)
	}
	if got := kinds(rec.all()); !strings.HasSuffix(got, "run_completed") || strings.Count(got, "step_completed") != 3 {
		t.Fatalf("reports %s", got)
	}
}

// slowReporter calls before, outside the recorder's lock, then reports.
type slowReporter struct {
	rec    *recorder
	before func([]protocol.ReportItem)
}

func (r slowReporter) Report(ctx context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	r.before(items)
	return r.rec.Report(ctx, items...)
}
