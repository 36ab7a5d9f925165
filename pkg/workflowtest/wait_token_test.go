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

var approve = workflow.New[time.Duration, string]("Approve")

// approveFn mints a token valid for ttl and waits for it without a
// timeout.
func approveFn(ctx workflow.Context, ttl time.Duration) (string, error) {
	tok, err := workflow.NewWaitToken(ctx, "approval", ttl)
	if err != nil {
		return "", err
	}
	again, err := workflow.NewWaitToken(ctx, "approval", ttl)
	if err != nil || again.Token() == tok.Token() || again.Event() == tok.Event() {
		return "", errors.New("a second token of the name is not a token of its own")
	}
	ok, err := workflow.WaitForToken[bool](ctx, tok, 0)
	if errors.Is(err, workflow.ErrEventTimeout) {
		return "expired", nil
	}
	if err != nil || !ok {
		return "", err
	}
	return "approved", nil
}

// A wait for a token without a timeout ends at the token's expiry, or
// when the token is completed; the mint is a FUNCTION step of its own; a time to live out of range is
// refused with ErrWaitTokenTTL.
func TestWaitTokenWaitEndsAtExpiry(t *testing.T) {
	env := workflowtest.New()
	out, err := workflowtest.Run(env, approve, approveFn, time.Hour)
	if err != nil || out != "expired" {
		t.Fatalf("got %q, %v; want expired", out, err)
	}
	if env.Elapsed() < time.Hour || env.Elapsed() > time.Hour+time.Second {
		t.Errorf("the wait took %s, want the token's hour", env.Elapsed())
	}
	steps := env.Steps()
	if len(steps) < 3 || steps[0].ID != protocol.WaitTokenStepID("approval", 1) || steps[1].ID != protocol.WaitTokenStepID("approval", 2) {
		t.Fatalf("steps %+v", steps)
	}

	// Completed after 10 minutes: the wait receives the payload then.
	env = workflowtest.New()
	env.CompleteWaitTokenAfter(10*time.Minute, "approval", 1, true)
	out, err = workflowtest.Run(env, approve, approveFn, time.Hour)
	if err != nil || out != "approved" || env.Elapsed() != 10*time.Minute {
		t.Fatalf("got %q, %v after %s; want approved after 10m", out, err, env.Elapsed())
	}
	for _, ttl := range []time.Duration{0, protocol.MaxWaitTokenTTL + time.Second} {
		_, err := workflowtest.Run(workflowtest.New(), approve, approveFn, ttl)
		// The run's failure carries the error's text.
		if err == nil || !strings.Contains(err.Error(), workflow.ErrWaitTokenTTL.Error()) {
			t.Errorf("ttl %s: %v, want ErrWaitTokenTTL", ttl, err)
		}
	}
}
