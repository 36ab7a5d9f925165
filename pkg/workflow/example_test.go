package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kagzi/kagzi/internal/wfexec"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// engine stands in for Kagzi in the examples: it executes a workflow
// function once, as a worker would on one delivery, answers event waits from
// events, and prints what the execution reported to the engine.
type engine struct {
	mu     sync.Mutex
	events map[string][]string
	report []string
}

func (e *engine) Report(_ context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	res := make([]protocol.ReportResult, len(items))
	for i, it := range items {
		res[i].Code = protocol.ResultOK
		line := string(it.Kind)
		if it.StepID != "" {
			line += " " + it.StepID
		}
		if it.Kind == protocol.ReportStepCompleted || it.Kind == protocol.ReportStepFailed {
			line += fmt.Sprintf(" (attempt %d)", it.Attempt)
		}
		if it.Kind == protocol.ReportEventWait {
			if q := e.events[it.Name]; len(q) > 0 {
				res[i].Output, e.events[it.Name] = json.RawMessage(q[0]), q[1:]
				line += ": received"
			} else {
				res[i].Waiting = true
				line += ": waiting"
			}
		}
		if len(it.Steps) > 0 {
			line += " for children " + strings.Join(it.Steps, ",")
		}
		e.report = append(e.report, line)
	}
	return res, nil
}

// execute runs fn once against the engine and prints the reports and the
// outcome.
func (e *engine) execute(fn workflow.Func) {
	run := &protocol.DeliveredRun{RunID: uuid.MustParse("0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e"), Namespace: "default",
		Queue: "default", Type: "Example", Attempt: 1, LeaseToken: 1, Input: json.RawMessage("null")}
	out := fn.Execute(context.Background(), wfexec.Execution{Run: run, Reporter: e})
	for _, l := range e.report {
		fmt.Println(l)
	}
	fmt.Println("outcome:", out.Status)
}

// A flaky step is retried under its policy; every attempt is recorded.
func ExampleStep_retry() {
	calls := 0
	charge := func(ctx context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", errors.New("gateway timeout")
		}
		return "ch_42", nil
	}
	e := &engine{}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		id, err := workflow.Step(ctx, "charge", charge,
			workflow.WithRetry(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond}))
		if err != nil {
			return nil, err
		}
		return json.Marshal(id)
	})
	// Output:
	// step_failed charge (attempt 1)
	// step_failed charge (attempt 2)
	// step_completed charge (attempt 3)
	// run_completed
	// outcome: completed
}

// A NonRetryable error, or one whose type the policy lists, is not retried.
func ExampleNonRetryable() {
	e := &engine{}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := workflow.Step(ctx, "validate", func(context.Context) (int, error) {
			return 0, workflow.NonRetryable(errors.New("order has no items"))
		})
		return nil, err // fails the run at once: the run's policy does not retry it either
	})
	// Output:
	// step_failed validate (attempt 1)
	// run_failed
	// outcome: failed
}

// An event sent before the run waits for it is kept and received at once; a
// wait with no event suspends the run until one comes (or the timeout).
func ExampleWaitForEvent() {
	type Decision struct {
		Approved bool
		By       string
	}
	e := &engine{events: map[string][]string{"approval": {`{"Approved":true,"By":"ada"}`}}}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		d, err := workflow.WaitForEvent[Decision](ctx, "approval", 24*time.Hour)
		if errors.Is(err, workflow.ErrEventTimeout) {
			return json.Marshal("nobody decided in time")
		}
		if err != nil {
			return nil, err
		}
		fmt.Println("approved by", d.By)
		// The second wait finds no event: the run is suspended here.
		_, err = workflow.WaitForEvent[string](ctx, "shipped", 0)
		return nil, err
	})
	// Output:
	// approved by ada
	// event_wait event:approval: received
	// event_wait event:shipped: waiting
	// outcome: suspended
}

// Fan-out/fan-in: every child is started in one report, and the parent is
// suspended (holding no worker slot) until the last of them finishes; the
// replay then returns their outputs.
func ExampleChildAll() {
	e := &engine{}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		var fs []*workflow.ChildFuture[int]
		for i := 0; i < 3; i++ {
			fs = append(fs, workflow.StartChild[int](ctx, fmt.Sprintf("square-%d", i), "Square", i))
		}
		squares, err := workflow.ChildAll(ctx, fs)
		if err != nil {
			return nil, err
		}
		return json.Marshal(squares)
	})
	// Output:
	// child_start square-0
	// child_start square-1
	// child_start square-2
	// run_sleep for children square-0,square-1,square-2
	// outcome: suspended
}

// Parallel runs branches concurrently; each step is memoized on its own.
func ExampleParallel() {
	e := &engine{}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		var price, stock int
		err := workflow.Parallel(ctx, workflow.FailFast,
			func(ctx workflow.Context) (err error) {
				price, err = workflow.Step(ctx, "price", func(context.Context) (int, error) { return 42, nil })
				return err
			},
			func(ctx workflow.Context) (err error) {
				stock, err = workflow.Step(ctx, "stock", func(context.Context) (int, error) { return 7, nil })
				return err
			})
		if err != nil {
			return nil, err
		}
		fmt.Println("price", price, "stock", stock)
		return nil, nil
	})
	// Unordered output:
	// price 42 stock 7
	// step_completed price (attempt 1)
	// step_completed stock (attempt 1)
	// run_completed
	// outcome: completed
}

// Sleep records its wake time as a step and suspends the run in the same
// report; the engine delivers the run again when the time has come.
func ExampleSleep() {
	e := &engine{}
	e.execute(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		if err := workflow.Sleep(ctx, "cool-off", time.Hour); err != nil {
			return nil, err
		}
		return nil, nil
	})
	// Output:
	// step_completed cool-off (attempt 1)
	// run_sleep
	// outcome: suspended
}

// A typed reference, and the determinism helpers: Now and SideEffect are
// recorded on the first execution and replayed after.
func ExampleNew() {
	type Invoice struct{ Number string }
	issue := workflow.New[string, Invoice]("IssueInvoice")
	billing := func(ctx workflow.Context, customer string) (Invoice, error) {
		issued := workflow.Now(ctx)
		n, err := workflow.SideEffect(ctx, "number", func() string { return uuid.NewString()[:8] })
		if err != nil {
			return Invoice{}, err
		}
		// A child started through its declaration: typed input and result.
		inv, err := issue.Child(ctx, "issue", customer+"/"+n+"/"+issued.Format("2006-01"))
		return inv, err
	}
	e := &engine{}
	e.execute(func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		out, err := billing(ctx, "acme")
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	})
	// Output:
	// step_completed now (attempt 1)
	// step_completed side:number (attempt 1)
	// child_start issue
	// run_sleep for children issue
	// outcome: suspended
}

// Patching: runs that passed the change before it existed keep the old
// path; new runs record version 1 and take the new one.
func ExampleVersion() {
	e := &engine{}
	e.execute(func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		v, err := workflow.Version(ctx, "cents", workflow.DefaultVersion, 1)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	// Output:
	// step_completed version:cents (attempt 1)
	// run_completed
	// outcome: completed
}
