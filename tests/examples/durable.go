package examples

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// One example workflow per durable-execution feature. Each is small and
// deterministic between steps; side effects and clocks live in steps.

// ReminderInput is the input of Reminder.
type ReminderInput struct {
	To       string `json:"to"`
	Message  string `json:"message"`
	AfterSec int    `json:"after_sec"`
}

// Reminder sleeps durably, then "sends" the reminder. The sleep holds no
// worker slot: the run is delivered again when it is due, on any worker,
// even after every worker restarted in between.
func Reminder(ctx workflow.Context, in ReminderInput) (string, error) {
	if err := workflow.Sleep(ctx, "wait", time.Duration(in.AfterSec)*time.Second); err != nil {
		return "", err
	}
	return workflow.Step(ctx, "send", func(context.Context) (string, error) {
		return fmt.Sprintf("reminded %s: %s", in.To, in.Message), nil
	})
}

// Expense is the input of ApproveExpense.
type Expense struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
	// TimeoutSec is how long a manager has to decide (default 1 day).
	TimeoutSec int `json:"timeout_sec"`
}

// Decision is the payload of the "decision" event.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// ApproveExpense waits for a manager's "decision" event — sent with
//
//	kagzi event send <run id or external id> decision --payload '{"approved": true, "by": "ada"}'
//
// — and pays the expense if approved. Without a decision before the
// timeout, it is rejected automatically: the timeout is an error the
// workflow handles (workflow.ErrEventTimeout).
func ApproveExpense(ctx workflow.Context, e Expense) (string, error) {
	timeout := time.Duration(e.TimeoutSec) * time.Second
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	d, err := workflow.WaitForEvent[Decision](ctx, "decision", timeout)
	switch {
	case errors.Is(err, workflow.ErrEventTimeout):
		return "rejected: no decision in time", nil
	case err != nil:
		return "", err
	case !d.Approved:
		return "rejected by " + d.By, nil
	}
	return workflow.Step(ctx, "pay", func(context.Context) (string, error) {
		return fmt.Sprintf("paid %.2f for %s, approved by %s", e.Amount, e.ID, d.By), nil
	})
}

// SumOfSquares fans out one Square child run per number and fans in their
// results. The parent holds no worker slot while its children run; the last
// child to finish wakes it.
func SumOfSquares(ctx workflow.Context, nums []int) (int, error) {
	fs := make([]*workflow.ChildFuture[int], len(nums))
	for i, n := range nums {
		fs[i] = workflow.StartChild[int](ctx, fmt.Sprintf("square-%d", i), "Square", n)
	}
	squares, err := workflow.ChildAll(ctx, fs)
	if err != nil {
		return 0, err
	}
	sum := 0
	for _, s := range squares {
		sum += s
	}
	return sum, nil
}

// Square is SumOfSquares' child workflow.
func Square(ctx workflow.Context, n int) (int, error) {
	return workflow.Step(ctx, "square", func(context.Context) (int, error) { return n * n, nil })
}

// Quote is the output of PriceQuote.
type Quote struct {
	Base     float64 `json:"base"`
	Shipping float64 `json:"shipping"`
	Tax      float64 `json:"tax"`
	Total    float64 `json:"total"`
}

// PriceQuote asks three (simulated) services at once with parallel steps,
// each memoized on its own: a crash after two of them answered re-asks only
// the third.
func PriceQuote(ctx workflow.Context, sku string) (Quote, error) {
	var q Quote
	ask := func(id string, v float64, dst *float64) func(workflow.Context) error {
		return func(ctx workflow.Context) error {
			got, err := workflow.Step(ctx, id, func(context.Context) (float64, error) {
				time.Sleep(10 * time.Millisecond) // the service's latency
				return v, nil
			})
			*dst = got
			return err
		}
	}
	err := workflow.Parallel(ctx, workflow.FailFast,
		ask("base-price", 100, &q.Base), ask("shipping", 7.5, &q.Shipping), ask("tax", 21, &q.Tax))
	if err != nil {
		return Quote{}, err
	}
	q.Total = q.Base + q.Shipping + q.Tax
	return q, nil
}

// Charge is the input of ChargeCard.
type Charge struct {
	Card   string  `json:"card"`
	Amount float64 `json:"amount"`
	// FailTimes makes the (simulated) gateway fail that many attempts first.
	FailTimes int `json:"fail_times"`
	// BackoffMS, when set, is the wait after the first failure in place of
	// the policy's 200 ms: a long one leaves the run backing off, to be
	// retried now (`kagzi run retry-step`).
	BackoffMS int64 `json:"backoff_ms,omitempty"`
}

// CardDeclined is a permanent failure: retrying cannot help.
type CardDeclined struct{ Card string }

func (e *CardDeclined) Error() string { return "card " + e.Card + " declined" }

// ChargeCard charges through a flaky gateway with a per-step retry policy:
// transient failures are retried with backoff (short ones in the worker,
// longer ones with the run suspended); a declined card is not retried (its
// error type is listed as non-retryable) and fails the run at once.
func ChargeCard(ctx workflow.Context, c Charge) (string, error) {
	policy := retry.Policy{MaxAttempts: 6, InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
		MaxInterval: 5 * time.Second, NonRetryable: []string{"CardDeclined"}}
	if c.BackoffMS > 0 {
		policy.InitialInterval = time.Duration(c.BackoffMS) * time.Millisecond
		policy.MaxInterval = max(policy.MaxInterval, policy.InitialInterval)
	}
	return workflow.Step(ctx, "charge", func(sctx context.Context) (string, error) {
		info, _ := workflow.StepInfoFrom(sctx)
		if c.Card == "0000" {
			return "", &CardDeclined{Card: c.Card}
		}
		if info.Attempt <= c.FailTimes {
			return "", fmt.Errorf("gateway timeout (attempt %d)", info.Attempt)
		}
		return fmt.Sprintf("charged %.2f to %s on attempt %d", c.Amount, c.Card, info.Attempt), nil
	}, workflow.WithRetry(policy))
}

// ExportInput is the input of Export.
type ExportInput struct {
	Rows int `json:"rows"`
	// RowMS is how long each row takes.
	RowMS int `json:"row_ms"`
}

// Export is a long step that honours cancellation and timeouts: each attempt
// is bounded by a step timeout, and its context ends at once when the run is
// cancelled (`kagzi run cancel`) or passes its deadline (start it with
// --deadline), so the work stops instead of running on.
func Export(ctx workflow.Context, in ExportInput) (int, error) {
	return workflow.Step(ctx, "export", func(sctx context.Context) (int, error) {
		for i := 0; i < in.Rows; i++ {
			select {
			case <-sctx.Done():
				return i, sctx.Err()
			case <-time.After(time.Duration(in.RowMS) * time.Millisecond):
			}
		}
		return in.Rows, nil
	}, workflow.WithStepTimeout(10*time.Minute), workflow.WithRetry(retry.Policy{MaxAttempts: 3}))
}

// BatchInput is the input of Batch.
type BatchInput struct {
	// WindowSec is how long the batch stays open after its first item
	// (default 10 s).
	WindowSec int `json:"window_sec"`
}

// Batch gathers the "item" events sent to it into one batch — start and
// feed it with signal-with-start, so that the items of one key share a run:
//
//	kagzi event send-with-start --type Batch --id batch-7 --event item --payload '"a"'
//
// It waits for the first item, sleeps for the window, then takes every
// item that came with workflow.DrainEvents and returns them all. An item
// sent while the run ends is not lost: the engine refuses the end and runs
// it again, and the drain, last in the history, takes the item too.
func Batch(ctx workflow.Context, in BatchInput) ([]string, error) {
	window := time.Duration(in.WindowSec) * time.Second
	if window <= 0 {
		window = 10 * time.Second
	}
	first, err := workflow.WaitForEvent[string](ctx, "item", 0)
	if err != nil {
		return nil, err
	}
	if err := workflow.Sleep(ctx, "window", window); err != nil {
		return nil, err
	}
	rest, err := workflow.DrainEvents[string](ctx, "item")
	if err != nil {
		return nil, err
	}
	return append([]string{first}, rest...), nil
}
