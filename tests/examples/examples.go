// Package examples holds the example workflows the reference worker binary
// registers (and `kagzi dev` runs): an order-processing workflow of several
// steps, one workflow per durable-execution feature (durable sleep, events,
// batches of events gathered by signal-with-start, child workflows, parallel steps, retries, timeouts and cancellation). The workflows only Kagzi's test
// harnesses drive are in tests/testflows.
package examples

import (
	"context"
	"errors"
	"fmt"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Order is the input of ProcessOrder.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Items    int     `json:"items"`
}

// Receipt is the output of ProcessOrder.
type Receipt struct {
	OrderID       string `json:"order_id"`
	Reservation   string `json:"reservation"`
	PaymentID     string `json:"payment_id"`
	TrackingCode  string `json:"tracking_code"`
	Notifications int    `json:"notifications"`
}

// ProcessOrder reserves stock, charges the customer, ships and notifies:
// four memoized steps. A crash between steps resumes after the last
// completed one; none runs twice to completion.
func ProcessOrder(ctx workflow.Context, o Order) (Receipt, error) {
	if o.ID == "" || o.Items <= 0 || o.Amount <= 0 {
		return Receipt{}, workflow.NonRetryable(errors.New("order needs an id, items and a positive amount"))
	}
	res, err := workflow.Step(ctx, "reserve-inventory", func(context.Context) (string, error) {
		return "rsv-" + o.ID, nil
	})
	if err != nil {
		return Receipt{}, err
	}
	pay, err := workflow.Step(ctx, "charge-payment", func(context.Context) (string, error) {
		return fmt.Sprintf("pay-%s-%.2f", o.ID, o.Amount), nil
	})
	if err != nil {
		return Receipt{}, err
	}
	track, err := workflow.Step(ctx, "ship", func(context.Context) (string, error) {
		return "trk-" + o.ID, nil
	})
	if err != nil {
		return Receipt{}, err
	}
	sent, err := workflow.Step(ctx, "notify-customer", func(context.Context) (int, error) {
		return 1, nil
	})
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{OrderID: o.ID, Reservation: res, PaymentID: pay, TrackingCode: track, Notifications: sent}, nil
}

// Register registers every example workflow on w.
func Register(w *worker.Worker) error {
	return errors.Join(
		worker.Register(w, "ProcessOrder", ProcessOrder, worker.WithVersion("v1")),
		worker.Register(w, "Reminder", Reminder),
		worker.Register(w, "ApproveExpense", ApproveExpense),
		worker.Register(w, "SumOfSquares", SumOfSquares),
		worker.Register(w, "Square", Square),
		worker.Register(w, "PriceQuote", PriceQuote),
		worker.Register(w, "ChargeCard", ChargeCard),
		worker.Register(w, "Export", Export),
		worker.Register(w, "Cart", Cart),
		worker.Register(w, "Batch", Batch),
	)
}
