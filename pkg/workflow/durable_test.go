package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kagzi/kagzi/internal/wfexec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Retries, events, children and parallel branches, against a recording
// reporter standing in for the engine.

var fast = workflow.WithRetry(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond, Jitter: -1})

type flaky struct{ code string }

func (e *flaky) Error() string { return "flaky " + e.code }

func TestStepRetriesInPlaceAndRecordsEveryAttempt(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	calls := 0
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		v, err := workflow.Step(ctx, "s", func(context.Context) (int, error) {
			calls++
			if calls < 3 {
				return 0, &flaky{"x"}
			}
			return 42, nil
		}, fast)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	items := rep.all()
	if out.Status != wfexec.OutcomeCompleted || calls != 3 {
		t.Fatalf("outcome %v, %d calls", out, calls)
	}
	if got := kinds(items); got != "step_failed:s,step_failed:s,step_completed:s,run_completed" {
		t.Fatalf("reports %s", got)
	}
	for i, it := range items[:3] {
		if it.Attempt != i+1 {
			t.Fatalf("item %d attempt %d", i, it.Attempt)
		}
	}
	if items[0].Until == nil || items[0].ErrorType != "flaky" || items[0].Error != "flaky x" || items[0].NonRetryable {
		t.Fatalf("failed attempt %+v", items[0])
	}
}

func TestStepExhaustsItsAttemptsThenReplaysTheFailure(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	run := newRun(nil)
	calls := 0
	var stepErr error
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, stepErr = workflow.Step(ctx, "s", func(context.Context) (int, error) { calls++; return 0, &flaky{"y"} },
			workflow.WithRetry(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: -1}))
		// The workflow handles the failure and sleeps.
		if err := workflow.Sleep(ctx, "nap", time.Hour); err != nil {
			return nil, err
		}
		return json.Marshal(workflow.ErrorType(stepErr))
	}
	out := exec(t, t.Context(), run, rep, fn)
	var fl *flaky
	if out.Status != wfexec.OutcomeSuspended || calls != 3 || !errors.As(stepErr, &fl) {
		t.Fatalf("outcome %v, %d calls, err %v", out, calls, stepErr)
	}
	items := rep.all()
	last := items[2]
	if last.Kind != protocol.ReportStepFailed || last.Attempt != 3 || last.Until != nil {
		t.Fatalf("final attempt %+v", last)
	}
	// Replayed in the same run attempt: the failure is returned again,
	// without running the step, with the same error type.
	run.Steps = []protocol.StepState{
		{StepID: "s", Status: "FAILED", Attempt: 3, Error: last.Error, ErrorType: last.ErrorType, RunAttempt: 1, Tries: 3},
		completed("nap", 1, time.Now().Add(-time.Minute).UTC()),
	}
	rep = &recorder{}
	out = exec(t, t.Context(), run, rep, fn)
	var se *workflow.StepError
	if out.Status != wfexec.OutcomeCompleted || calls != 3 || !errors.As(stepErr, &se) || se.Error() != "flaky y" {
		t.Fatalf("replay: outcome %v, %d calls, err %#v", out, calls, stepErr)
	}
	if got := rep.all()[0]; string(got.Output) != `"flaky"` {
		t.Fatalf("error type on replay %s, want the original's", got.Output)
	}
	// A later run attempt gives the step a fresh budget.
	run.Attempt = 2
	rep = &recorder{}
	calls = 0
	exec(t, t.Context(), run, rep, fn)
	if calls != 3 || rep.all()[0].Attempt != 4 {
		t.Fatalf("fresh budget: %d calls, first attempt %d", calls, rep.all()[0].Attempt)
	}
}

func TestNonRetryableErrorsAndTypesFailAtOnce(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	calls := map[string]int{}
	policy := workflow.WithRetry(retry.Policy{InitialInterval: time.Millisecond, NonRetryable: []string{"Code42"}})
	exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err1 := workflow.Step(ctx, "marked", func(context.Context) (int, error) {
			calls["marked"]++
			return 0, workflow.NonRetryable(errors.New("no"))
		}, policy)
		_, err2 := workflow.Step(ctx, "typed", func(context.Context) (int, error) {
			calls["typed"]++
			return 0, fmt.Errorf("wrapped: %w", &codeErr{"42"})
		}, policy)
		if err1 == nil || err2 == nil {
			t.Error("steps did not fail")
		}
		return nil, nil
	})
	if calls["marked"] != 1 || calls["typed"] != 1 {
		t.Fatalf("calls %v", calls)
	}
	if got := kinds(rep.all()); got != "step_failed:marked,step_failed:typed,run_completed" {
		t.Fatalf("reports %s", got)
	}
}

func TestLongBackoffSuspendsUntilTheRetryTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := now
	rep := &recorder{}
	run := newRun(nil)
	calls := 0
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		v, err := workflow.Step(ctx, "s", func(context.Context) (int, error) {
			calls++
			if calls == 1 {
				return 0, errors.New("first")
			}
			return 7, nil
		}, workflow.WithRetry(retry.Policy{InitialInterval: time.Minute, Jitter: -1}))
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	e := wfexec.Execution{Run: run, Reporter: rep, Now: func() time.Time { return clock }}
	if out := fn.Execute(t.Context(), e); out.Status != wfexec.OutcomeSuspended {
		t.Fatalf("outcome %v", out)
	}
	items := rep.all()
	want := now.Add(time.Minute)
	if kinds(items) != "step_failed:s,run_sleep" || !items[0].Until.Equal(want) || !items[1].Until.Equal(want) || rep.calls != 1 {
		t.Fatalf("reports %s %+v (%d round trips)", kinds(items), items, rep.calls)
	}
	// Delivered after the retry time: attempt 2 runs.
	run.Steps = []protocol.StepState{{StepID: "s", Status: "FAILED", Attempt: 1, Error: "first", RetryAt: &want, RunAttempt: 1, Tries: 1}}
	clock = want.Add(time.Second)
	rep = &recorder{}
	e.Reporter = rep
	if out := fn.Execute(t.Context(), e); out.Status != wfexec.OutcomeCompleted || calls != 2 {
		t.Fatalf("outcome %v, %d calls", out, calls)
	}
	if got := rep.all(); got[0].Attempt != 2 || got[0].Kind != protocol.ReportStepCompleted {
		t.Fatalf("second attempt %+v", got[0])
	}
}

// events answers event_wait items: a payload when one is queued for the
// name, else waiting (or timed out when asked to).
type events struct {
	mu      sync.Mutex
	queued  map[string][]string
	timeout bool
}

func (e *events) answer(it protocol.ReportItem) protocol.ReportResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	if it.Kind != protocol.ReportEventWait {
		return protocol.ReportResult{Code: protocol.ResultOK}
	}
	if q := e.queued[it.Name]; len(q) > 0 {
		e.queued[it.Name] = q[1:]
		return protocol.ReportResult{Code: protocol.ResultOK, Output: json.RawMessage(q[0])}
	}
	if e.timeout {
		return protocol.ReportResult{Code: protocol.ResultOK}
	}
	return protocol.ReportResult{Code: protocol.ResultOK, Waiting: true}
}

func TestWaitForEvent(t *testing.T) {
	t.Parallel()
	type paid struct{ Amount int }
	ev := &events{queued: map[string][]string{"paid": {`{"Amount":5}`, `{"Amount":6}`}}}
	rep := &recorder{answer: ev.answer}
	var got []int
	var waitErr error
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		for i := 0; i < 2; i++ {
			p, err := workflow.WaitForEvent[paid](ctx, "paid", time.Hour)
			if err != nil {
				return nil, err
			}
			got = append(got, p.Amount)
		}
		_, waitErr = workflow.WaitForEvent[string](ctx, "late", time.Minute)
		return nil, nil
	}
	// Two events already there are received; the third wait suspends the
	// run in the same round trip.
	out := exec(t, t.Context(), newRun(nil), rep, fn)
	items := rep.all()
	if out.Status != wfexec.OutcomeSuspended || fmt.Sprint(got) != "[5 6]" || len(items) != 3 || rep.calls != 3 {
		t.Fatalf("outcome %v, got %v, %d items in %d round trips", out, got, len(items), rep.calls)
	}
	if items[0].StepID != "event:paid" || items[1].StepID != "event:paid#2" || items[2].StepID != "event:late" {
		t.Fatalf("step ids %s %s %s", items[0].StepID, items[1].StepID, items[2].StepID)
	}
	if !items[2].Suspend || items[2].Until == nil || items[2].Name != "late" {
		t.Fatalf("wait item %+v", items[2])
	}
	// A timeout is an error the workflow can handle.
	got = nil
	ev = &events{queued: map[string][]string{"paid": {`{"Amount":1}`, `{"Amount":2}`}}, timeout: true}
	rep = &recorder{answer: ev.answer}
	if out := exec(t, t.Context(), newRun(nil), rep, fn); out.Status != wfexec.OutcomeCompleted || !errors.Is(waitErr, workflow.ErrEventTimeout) {
		t.Fatalf("outcome %v, wait err %v", out, waitErr)
	}
	// Replay: recorded receipts and timeouts come back without a report.
	run := newRun(nil, completed("event:paid", 1, paid{9}), completed("event:paid#2", 1, paid{8}),
		protocol.StepState{StepID: "event:late", Status: "FAILED", Attempt: 1, RunAttempt: 1, ErrorType: "EventTimeout"})
	got, rep = nil, &recorder{}
	if out := exec(t, t.Context(), run, rep, fn); out.Status != wfexec.OutcomeCompleted || fmt.Sprint(got) != "[9 8]" ||
		!errors.Is(waitErr, workflow.ErrEventTimeout) || kinds(rep.all()) != "run_completed" {
		t.Fatalf("replay: %v %v %v %s", out, got, waitErr, kinds(rep.all()))
	}
}

func TestChildrenStartTogetherAndFanIn(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	run := newRun(nil)
	var outs []int
	var joined error
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		var fs []*workflow.ChildFuture[int]
		for i := 0; i < 3; i++ {
			fs = append(fs, workflow.StartChild[int](ctx, fmt.Sprintf("c%d", i), "Square", i, workflow.WithChildQueue("math")))
		}
		outs, joined = workflow.ChildAll(ctx, fs)
		return nil, nil
	}
	out := exec(t, t.Context(), run, rep, fn)
	items := rep.all()
	if out.Status != wfexec.OutcomeSuspended || rep.calls != 1 || kinds(items) != "child_start:c0,child_start:c1,child_start:c2,run_sleep" {
		t.Fatalf("outcome %v, %d round trips, reports %s", out, rep.calls, kinds(items))
	}
	if c := items[1].Child; c.Type != "Square" || c.Queue != "math" || string(c.Input) != "1" || items[1].Attempt != 1 {
		t.Fatalf("child start %+v %+v", items[1], c)
	}
	if got := strings.Join(items[3].Steps, ","); got != "c0,c1,c2" || items[3].Until != nil {
		t.Fatalf("suspension waits for %q until %v", got, items[3].Until)
	}
	// One child still running: the replay waits for it alone.
	run.Steps = []protocol.StepState{completed("c0", 1, 0), completed("c1", 1, 1),
		{StepID: "c2", Status: "PENDING", Attempt: 1, RunAttempt: 1}}
	rep = &recorder{}
	if out := exec(t, t.Context(), run, rep, fn); out.Status != wfexec.OutcomeSuspended || kinds(rep.all()) != "run_sleep" ||
		strings.Join(rep.all()[0].Steps, ",") != "c2" {
		t.Fatalf("partial: %v %s", out, kinds(rep.all()))
	}
	// All finished, one failed.
	run.Steps[2] = protocol.StepState{StepID: "c2", Status: "FAILED", Attempt: 1, RunAttempt: 1, Error: "child run x failed: boom", ErrorType: "ChildFailed"}
	rep = &recorder{}
	if out := exec(t, t.Context(), run, rep, fn); out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("fan-in: %v", out)
	}
	var ce *workflow.ChildError
	if fmt.Sprint(outs) != "[0 1 0]" || !errors.As(joined, &ce) || ce.StepID != "c2" || workflow.ErrorType(joined) != "ChildFailed" {
		t.Fatalf("outs %v, err %v", outs, joined)
	}
	if ce.RunID != protocol.ChildRunID(run.RunID, "c2", 1) {
		t.Fatalf("child run id %s", ce.RunID)
	}
}

func TestParallelBranchesRunConcurrently(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	var inFlight, peak atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	arrived := atomic.Int32{}
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		var a, b int
		err := workflow.Parallel(ctx, workflow.CollectAll,
			func(ctx workflow.Context) (err error) {
				a, err = workflow.Step(ctx, "a", func(context.Context) (int, error) { return meet(&inFlight, &peak, &arrived, both, &once, 1) })
				return err
			},
			func(ctx workflow.Context) (err error) {
				b, err = workflow.Step(ctx, "b", func(context.Context) (int, error) { return meet(&inFlight, &peak, &arrived, both, &once, 2) })
				return err
			})
		if err != nil {
			return nil, err
		}
		return json.Marshal(a + b)
	})
	if out.Status != wfexec.OutcomeCompleted || peak.Load() != 2 {
		t.Fatalf("outcome %v, peak concurrency %d", out, peak.Load())
	}
	items := rep.all()
	if len(items) != 3 || string(items[2].Output) != "3" {
		t.Fatalf("reports %s", kinds(items))
	}
}

// meet blocks until two callers are inside at once (or a second passed).
func meet(inFlight, peak, arrived *atomic.Int32, both chan struct{}, once *sync.Once, v int) (int, error) {
	n := inFlight.Add(1)
	defer inFlight.Add(-1)
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			break
		}
	}
	if arrived.Add(1) == 2 {
		once.Do(func() { close(both) })
	}
	select {
	case <-both:
	case <-time.After(time.Second):
	}
	return v, nil
}

func TestParallelSuspendsOnceNoBranchCanGoOn(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := &recorder{answer: (&events{}).answer}
	run := newRun(nil)
	after := 0
	var fn workflow.Func = func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		err := workflow.Parallel(ctx, workflow.CollectAll,
			func(ctx workflow.Context) error { return workflow.Sleep(ctx, "nap", time.Hour) },
			func(ctx workflow.Context) error {
				_, err := workflow.Child[int](ctx, "kid", "K", nil)
				return err
			},
			func(ctx workflow.Context) error {
				_, err := workflow.WaitForEvent[int](ctx, "go", 2*time.Hour)
				return err
			},
			func(ctx workflow.Context) error {
				_, err := workflow.Step(ctx, "work", func(context.Context) (int, error) { return 1, nil })
				return err
			})
		after++
		return nil, err
	}
	e := wfexec.Execution{Run: run, Reporter: rep, Now: func() time.Time { return now }}
	if out := fn.Execute(t.Context(), e); out.Status != wfexec.OutcomeSuspended || after != 0 {
		t.Fatalf("outcome %v, code after Parallel ran %d times", out, after)
	}
	items := rep.all()
	last := items[len(items)-1]
	wake := now.Add(time.Hour)
	if last.Kind != protocol.ReportRunSleep || !last.Until.Equal(wake) || !last.Events || strings.Join(last.Steps, ",") != "kid" {
		t.Fatalf("suspension %+v (reports %s)", last, kinds(items))
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, string(it.Kind)+":"+it.StepID)
	}
	got := strings.Join(ids, " ")
	for _, want := range []string{"step_completed:work", "step_completed:nap", "child_start:kid", "event_wait:event:go"} {
		if !strings.Contains(got, want) {
			t.Fatalf("reports %s lack %s", got, want)
		}
	}
	// Replayed with everything there: Parallel returns and the run completes.
	raw, _ := json.Marshal(wake)
	run.Steps = []protocol.StepState{completed("work", 1, 1), {StepID: "nap", Status: "COMPLETED", Attempt: 1, Output: raw},
		completed("kid", 1, 5), completed("event:go", 1, 3)}
	now = wake.Add(time.Second)
	rep = &recorder{}
	e.Reporter = rep
	if out := fn.Execute(t.Context(), e); out.Status != wfexec.OutcomeCompleted || after != 1 || kinds(rep.all()) != "run_completed" {
		t.Fatalf("replay: %v, after=%d, reports %s", out, after, kinds(rep.all()))
	}
}

func TestParallelFailFastCancelsTheOthers(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	boom := errors.New("boom")
	var slowErr error
	out := exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		err := workflow.Parallel(ctx, workflow.FailFast,
			func(ctx workflow.Context) error {
				_, err := workflow.Step(ctx, "bad", func(context.Context) (int, error) { return 0, workflow.NonRetryable(boom) })
				return err
			},
			func(ctx workflow.Context) error {
				_, slowErr = workflow.Step(ctx, "slow", func(sctx context.Context) (int, error) {
					<-sctx.Done()
					return 0, sctx.Err()
				})
				return slowErr
			})
		return nil, err
	})
	if out.Status != wfexec.OutcomeFailed || !errors.Is(out.Err, boom) || slowErr == nil {
		t.Fatalf("outcome %v, slow branch err %v", out, slowErr)
	}
	// The cancelled step is not recorded.
	if got := kinds(rep.all()); got != "step_failed:bad,run_failed" {
		t.Fatalf("reports %s", got)
	}
}

func TestParallelCollectsAllErrors(t *testing.T) {
	t.Parallel()
	rep := &recorder{}
	e1, e2 := errors.New("one"), errors.New("two")
	var err error
	exec(t, t.Context(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		err = workflow.Parallel(ctx, workflow.CollectAll,
			func(workflow.Context) error { return e1 },
			func(workflow.Context) error { return nil },
			func(workflow.Context) error { panic("three") })
		return nil, nil
	})
	var pe *workflow.PanicError
	if !errors.Is(err, e1) || errors.Is(err, e2) || !errors.As(err, &pe) {
		t.Fatalf("joined error %v", err)
	}
}
