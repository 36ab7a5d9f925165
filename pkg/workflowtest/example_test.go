package workflowtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/pkg/workflowtest"
)

var remind = workflow.New[string, string]("Remind")

// remindFn waits a day for an acknowledgement, sending a reminder when
// none came.
func remindFn(ctx workflow.Context, user string) (string, error) {
	_, err := workflow.WaitForEvent[bool](ctx, "ack", 24*time.Hour)
	if errors.Is(err, workflow.ErrEventTimeout) {
		return workflow.Step(ctx, "send-reminder", func(ctx context.Context) (string, error) {
			return "", errors.New("would send an e-mail")
		})
	}
	return "acknowledged", err
}

// A unit test of a workflow: no engine, a mocked step, a virtual day.
func Example() {
	env := workflowtest.New()
	env.OnStep("send-reminder", "reminded", nil)
	out, err := workflowtest.Run(env, remind, remindFn, "ada")
	fmt.Println(out, err, env.Elapsed())

	env = workflowtest.New()
	env.SendEventAfter(time.Hour, "ack", true)
	out, err = workflowtest.Run(env, remind, remindFn, "ada")
	fmt.Println(out, err, env.Elapsed())
	// Output:
	// reminded <nil> 24h0m0s
	// acknowledged <nil> 1h0m0s
}
