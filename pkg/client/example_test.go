package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The examples of the README and of docs/ are these, verbatim
// (TestReadmeExamplesCompile checks it): they compile here, against the public packages only.

type Order struct {
	ID       string
	Customer string
	Amount   int
}

type Receipt struct {
	Reservation string
	Payment     string
}

type stubInventory struct{}

func (stubInventory) Reserve(context.Context, string) (string, error) { return "res-1", nil }

type stubPayments struct{}

func (stubPayments) Charge(context.Context, string, int) (string, error) { return "pay-1", nil }

var (
	inventory   stubInventory
	payments    stubPayments
	databaseURL = "postgres://localhost:5432/app"
)

// README: declare
var ProcessOrder = workflow.New[Order, Receipt]("ProcessOrder")

func processOrder(ctx workflow.Context, o Order) (Receipt, error) {
	res, err := workflow.Step(ctx, "reserve-inventory", func(ctx context.Context) (string, error) {
		return inventory.Reserve(ctx, o.ID)
	})
	if err != nil {
		return Receipt{}, err
	}
	if err := workflow.Sleep(ctx, "cool-off", time.Hour); err != nil {
		return Receipt{}, err
	}
	pay, err := workflow.Step(ctx, "charge-payment", func(ctx context.Context) (string, error) {
		return payments.Charge(ctx, o.Customer, o.Amount)
	})
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{Reservation: res, Payment: pay}, nil
}

// README: end

// A worker serves the workflow: it needs NATS only.
func Example_worker() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	// README: worker
	w, err := worker.New(worker.Config{Queue: "orders", MaxConcurrency: 50}, nc)
	if err != nil {
		return
	}
	if err := worker.Implement(w, ProcessOrder, processOrder, worker.WithVersion("v1")); err != nil {
		return
	}
	err = w.Run(ctx) // until ctx ends, then drains
	// README: end
	_ = err
}

// An application starts a run and waits for its typed result; it needs
// the database and NATS, and imports no part of the engine's internals.
func Example() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	order := Order{ID: "o-1", Customer: "c-1", Amount: 42}
	// README: client
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{Queue: "orders"})
	if err != nil {
		return
	}
	defer cl.Close()
	h, err := client.StartWorkflow(ctx, cl, ProcessOrder, order, client.StartOptions{ExternalID: order.ID})
	if err != nil {
		return
	}
	receipt, err := h.Result(ctx) // a Receipt
	if errors.Is(err, client.ErrRunFailed) {
		return
	}
	// README: end
	fmt.Println(receipt.Payment)
}

// Remote drain of a worker, and the operator's default version of a type.
func ExampleClient_DrainWorker() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	workers, err := cl.Workers(ctx)
	if err != nil {
		return
	}
	for _, w := range workers {
		if w.Status == client.WorkerOnline {
			_, _ = cl.DrainWorker(ctx, w.ID)
		}
	}
	// Runs started without a version from now on run as v2.
	_ = cl.SetDefaultVersion(ctx, ProcessOrder.Name(), "v2")
}

// Starts of one debounce key within the window make one run; starts with
// an id reuse policy decide what an ended run of their id means.
func ExampleDebounce() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	order := Order{ID: "o-1", Customer: "c-1", Amount: 42}
	// README: debounce
	h, err := client.StartWorkflow(ctx, cl, ProcessOrder, order, client.StartOptions{
		Debounce: &client.Debounce{Key: "customer-" + order.Customer, Window: 5 * time.Second, MaxWait: time.Minute},
	})
	if err != nil {
		return
	}
	fmt.Println(h.RunID, h.Created) // Created is false for a start merged into the open run
	// README: end
	// README: idreuse
	h, err = client.StartWorkflow(ctx, cl, ProcessOrder, order, client.StartOptions{
		ExternalID: "order-" + order.ID, IDReusePolicy: client.AllowDuplicateFailedOnly,
	})
	var reused *client.IDReuseError
	if errors.As(err, &reused) { // the order's last run COMPLETED: not again
		fmt.Println("already done by run", reused.ExistingRunID)
		return
	}
	// README: end
	_ = h
}

// Runs started with search attributes are listed and counted by them.
func ExampleClient_Count() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	order := Order{ID: "o-1", Customer: "42", Amount: 42}
	// README: attributes
	if err := cl.DeclareAttribute(ctx, "customer", client.AttributeKeyword); err != nil {
		return
	}
	if err := cl.DeclareAttribute(ctx, "amount", client.AttributeInt); err != nil {
		return
	}
	_, err = client.StartWorkflow(ctx, cl, ProcessOrder, order, client.StartOptions{
		Attributes: map[string]any{"customer": order.Customer, "amount": order.Amount},
	})
	if errors.Is(err, client.ErrAttribute) { // undeclared, or a value of another kind
		return
	}
	failed, next, err := cl.List(ctx, client.ListOptions{
		Query: `customer = '42' AND status = 'FAILED' AND finished_at > '2025-06-01T00:00:00Z'`,
	})
	if err != nil {
		return
	}
	fmt.Println(len(failed), next)
	byStatus, err := cl.Count(ctx, client.CountOptions{Query: `amount >= 100`, GroupBy: "status"})
	if err != nil {
		return
	}
	for _, g := range byStatus.Groups {
		fmt.Println(*g.Value, g.Count)
	}
	// README: end
}

// A batch acts on every run a query matches, at a capped rate.
func ExampleClient_StartBatch() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	// README: fleet
	res, err := cl.Count(ctx, client.CountOptions{Query: "type = 'Cart' AND status = 'FAILED'", GroupBy: "error_type"})
	if err != nil {
		return
	}
	_, _, err = cl.PauseQueue(ctx, "default", client.PauseOptions{Reason: "vendor outage"})
	if err != nil {
		return
	}
	b, err := cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchRetry, Query: "type = 'Cart'", Rate: 20})
	if err != nil {
		return
	}
	// README: end
	fmt.Println(res.Total, b.Total)
	var id1, id2 uuid.UUID
	// README: batches
	b, err = cl.StartBatch(ctx, client.BatchOptions{
		Action: client.BatchCancel,
		Query:  "type = 'ProcessOrder' AND customer = '42' AND created_at > '2026-11-01T00:00:00Z'",
		Rate:   100, // runs per second; 0 is client.DefaultBatchRate (50)
	})
	if err != nil {
		return // ErrInvalidArgument (a bad query, too many runs), ErrNotFound (none)
	}
	// b.Total runs were resolved; the reaper acts on them from now on.
	b, err = cl.StartBatch(ctx, client.BatchOptions{
		Action: client.BatchSignal, RunIDs: []uuid.UUID{id1, id2},
		EventName: "approve", Payload: map[string]bool{"ok": true},
	})
	if err != nil {
		return // ErrNotFound, ErrConflict (a listed run is finished)
	}
	b, err = cl.GetBatch(ctx, b.ID) // b.State, b.Done, b.Failed, b.Skipped, b.Pending()
	if err != nil {
		return
	}
	failed, err := cl.BatchRuns(ctx, b.ID, "failed", uuid.Nil, 100) // each with its error
	if err != nil {
		return
	}
	err = cl.PauseBatch(ctx, b.ID) // and ResumeBatch, CancelBatch
	// README: end
	fmt.Println(len(failed), err)
}

// tagOrder sets search attributes from inside a workflow, once the values
// are known: durable and memoized, so a replay sets nothing again.
func tagOrder(ctx workflow.Context, o Order) error {
	// README: setattributes
	if err := workflow.SetAttributes(ctx, map[string]any{"customer": o.Customer, "amount": o.Amount}); err != nil {
		return err // errors.Is(err, workflow.ErrAttributesRefused): undeclared, or of another kind
	}
	// ... later, a nil value removes an attribute:
	return workflow.SetAttributes(ctx, map[string]any{"amount": nil})
	// README: end
}

var _ = tagOrder

// A step backing off before its next attempt is tried now, with new retry
// options.
func ExampleClient_RetryStepNow() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	runID := uuid.Must(uuid.NewV7())
	// README: retrystep
	// Up to 10 attempts in all; waits from 30 s, doubling with each attempt made, at most 10 min.
	steps, err := cl.RetryStepNow(ctx, runID, client.RetryStepNowOptions{
		MaxAttempts: 10, InitialInterval: 30 * time.Second, MaxInterval: 10 * time.Minute,
	})
	// README: end
	fmt.Println(steps, err)
}

// An event published once, in the application's own transaction, starts
// a run per matching trigger.
func ExampleClient_PublishTx() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	cl, err := client.Connect(ctx, databaseURL, nc, client.Options{})
	if err != nil {
		return
	}
	defer cl.Close()
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return
	}
	defer pool.Close()
	order := Order{ID: "o-1", Customer: "c-1", Amount: 42}
	orderEventID := uuid.Must(uuid.NewV7()) // stored with the order, reused on a retry
	// README: publish
	tx, err := pool.Begin(ctx)
	if err != nil {
		return
	}
	defer tx.Rollback(ctx)
	// ... the application's own writes in tx ...
	p, err := cl.PublishTx(ctx, tx, "order.created", map[string]any{"order": order},
		client.PublishOptions{EventID: orderEventID}) // optional: your idempotency key
	if err != nil {
		return
	}
	if err := tx.Commit(ctx); err != nil { // the event, and so its runs, exist only now
		return
	}
	// p.Created is false when orderEventID was published before: nothing was added.
	// README: end
	fmt.Println(p.EventID == orderEventID)
}

// batchOrders starts one run of ShipOrders per 100 orders (or per second
// of orders, if fewer come); TestBatchingExample runs it.
func batchOrders(ctx context.Context, cl *client.Client, orders []Order) (items []uuid.UUID, runs []uuid.UUID, err error) {
	// README: batching
	for _, o := range orders {
		h, err := cl.Start(ctx, "ShipOrders", o, client.StartOptions{
			Batch: &client.Batching{Key: "warehouse-1", MaxSize: 100, MaxWait: time.Second},
		})
		if err != nil {
			return nil, nil, err
		}
		items = append(items, h.Item.ID) // h.Item.ID: this order's item
		if h.Created {                   // this order filled the batch: h.RunID's input is its 100 orders
			runs = append(runs, h.RunID)
		}
	}
	// README: end
	return items, runs, nil
}
