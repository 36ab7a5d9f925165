package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/wfexec"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// New retry options given to a failing step (RetryStepNow) come with the
// step's latest failed attempt and replace the code's policy for the
// attempts that follow, the attempts made still counted.

// alwaysFails is a workflow whose one step fails every time, under a code
// policy of 3 attempts an hour apart; it counts the step's calls.
func alwaysFails(calls *int) workflow.Func {
	return func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := workflow.Step(ctx, "s", func(context.Context) (int, error) {
			*calls++
			return 0, errors.New("down")
		}, workflow.WithRetry(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour, Jitter: -1}))
		return nil, err
	}
}

// failedOnce is the step's first attempt, failed and due again now.
func failedOnce(override *retry.Policy) protocol.StepState {
	due := time.Now().Add(-time.Second).UTC()
	return protocol.StepState{StepID: "s", Status: "FAILED", Attempt: 1, Error: "down", RetryAt: &due, RunAttempt: 1, Tries: 1,
		RetryOverride: override}
}

func TestRetryOverrideRaisesAttemptsAndShortensTheBackoff(t *testing.T) {
	t.Parallel()
	calls := 0
	rep := &recorder{}
	run := newRun(nil, failedOnce(&retry.Policy{MaxAttempts: 5, InitialIntervalMS: 1}))
	out := exec(t, t.Context(), run, rep, alwaysFails(&calls))
	items := rep.all()
	// Attempts 2 to 5, each backoff waited in place (1 ms, then ×2 as the
	// code says), the fifth final.
	if out.Status != wfexec.OutcomeFailed || calls != 4 {
		t.Fatalf("outcome %v, %d calls", out, calls)
	}
	if got := kinds(items); got != "step_failed:s,step_failed:s,step_failed:s,step_failed:s,run_failed" {
		t.Fatalf("reports %s", got)
	}
	for i, it := range items[:4] {
		if it.Attempt != i+2 {
			t.Fatalf("report %d: attempt %d", i, it.Attempt)
		}
		if final := it.Attempt == 5; final != (it.Until == nil) {
			t.Fatalf("attempt %d: retry at %v", it.Attempt, it.Until)
		}
		if it.Until != nil && it.Until.Sub(*it.FinishedAt) > time.Second {
			t.Fatalf("attempt %d retried after %v, not the override's interval", it.Attempt, it.Until.Sub(*it.FinishedAt))
		}
	}
	// Replayed after the final failure: the recorded failure is returned,
	// the step not run again.
	last := items[3]
	run.Steps = []protocol.StepState{{StepID: "s", Status: "FAILED", Attempt: 5, Error: last.Error, RunAttempt: 1, Tries: 5,
		RetryOverride: &retry.Policy{MaxAttempts: 5, InitialIntervalMS: 1}}}
	if out := exec(t, t.Context(), run, &recorder{}, alwaysFails(&calls)); out.Status != wfexec.OutcomeFailed || calls != 4 {
		t.Fatalf("replay: outcome %v, %d calls", out, calls)
	}
}

func TestRetryOverrideBelowTheTriesMadeMakesTheNextFailureFinal(t *testing.T) {
	t.Parallel()
	calls := 0
	rep := &recorder{}
	out := exec(t, t.Context(), newRun(nil, failedOnce(&retry.Policy{MaxAttempts: 1})), rep, alwaysFails(&calls))
	items := rep.all()
	if out.Status != wfexec.OutcomeFailed || calls != 1 || kinds(items) != "step_failed:s,run_failed" {
		t.Fatalf("outcome %v, %d calls, reports %s", out, calls, kinds(items))
	}
	if items[0].Attempt != 2 || items[0].Until != nil {
		t.Fatalf("attempt %+v, want attempt 2 final", items[0])
	}
}

func TestWithoutOverrideTheCodePolicyDecides(t *testing.T) {
	t.Parallel()
	for name, run := range map[string]*protocol.DeliveredRun{
		"none": newRun(nil, failedOnce(nil)),
		// An override of an earlier run attempt: the step has a fresh
		// budget under the code's policy.
		"earlier run attempt": func() *protocol.DeliveredRun {
			r := newRun(nil, failedOnce(&retry.Policy{MaxAttempts: 5, InitialIntervalMS: 1}))
			r.Attempt = 2
			return r
		}(),
	} {
		calls := 0
		rep := &recorder{}
		out := exec(t, t.Context(), run, rep, alwaysFails(&calls))
		items := rep.all()
		if out.Status != wfexec.OutcomeSuspended || calls != 1 || items[0].Until == nil {
			t.Fatalf("%s: outcome %v, %d calls, reports %s", name, out, calls, kinds(items))
		}
		// The code's backoff: 1 h (its max interval, unset, is raised to
		// the initial).
		if got := items[0].Until.Sub(*items[0].FinishedAt); got != time.Hour {
			t.Fatalf("%s: retried after %v, want 1h", name, got)
		}
	}
}
