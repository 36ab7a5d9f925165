package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/workflow"
)

type Item struct {
	SKU   string
	Price int
}

var AddItem = workflow.NewUpdate[Item, int]("AddItem", func(it Item) error {
	if it.Price < 0 {
		return errors.New("negative price") // refused before anything is recorded
	}
	return nil
})

func reserve(context.Context) (bool, error) { return true, nil }

// cart handles three additions, or stops after a day without one, and
// returns the total.
func cart(ctx workflow.Context, _ struct{}) (int, error) {
	total := 0
	for range 3 {
		err := AddItem.Handle(ctx, 24*time.Hour, func(ctx workflow.Context, it Item) (int, error) {
			if _, err := workflow.Step(ctx, "reserve-"+it.SKU, reserve); err != nil {
				return 0, err // the caller's error; the run goes on
			}
			total += it.Price
			return total, nil
		})
		if errors.Is(err, workflow.ErrUpdateTimeout) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}

func ExampleUpdate() {
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
	var runID uuid.UUID // a run of the cart workflow
	total, err := client.Update(ctx, cl, runID, AddItem, Item{SKU: "A-1", Price: 10})
	var failed *client.UpdateFailedError
	switch {
	case errors.Is(err, client.ErrUpdateRejected):
		fmt.Println("refused:", err)
	case errors.As(err, &failed):
		fmt.Println("the cart said no:", failed.Message)
	case errors.Is(err, client.ErrRunFinished):
		fmt.Println("the cart is closed")
	case err == nil:
		fmt.Println("total:", total)
	}
}

var _ = cart
