package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

func TestSignalWithStart(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ref := workflow.New[int, string]("T")
	h, started, err := client.SignalWithStartWorkflow(ctx, f.cl, ref, "cart-1", 7, "add", map[string]int{"n": 1})
	if err != nil || !started || !h.Created {
		t.Fatalf("first: %v %v %v", h, started, err)
	}
	run, err := f.cl.Get(ctx, h.RunID)
	if err != nil || run.Type != "T" || run.ExternalID != "cart-1" || string(run.Input) != "7" {
		t.Fatalf("started run: %+v %v", run, err)
	}
	res, err := f.cl.SignalWithStart(ctx, client.SignalWithStartRequest{Type: "T", ExternalID: "cart-1", Input: 8,
		Event: "add", Payload: map[string]int{"n": 2}})
	if err != nil || res.Started || res.Handle.RunID != h.RunID || res.Event.RunID != h.RunID ||
		res.Event.RunStatus != client.StatusPending || string(res.Event.Payload) != `{"n":2}` {
		t.Fatalf("second: %+v %v", res, err)
	}
	// Another type holding the id refuses the event.
	_, _, err = client.SignalWithStartWorkflow(ctx, f.cl, workflow.New[int, string]("U"), "cart-1", 7, "add", nil)
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("other type: %v, want ErrConflict", err)
	}
	// Once the run finished, the id starts a new run; its typed result is
	// the new run's.
	f.finish(t, h.RunID, `"first"`)
	h2, started, err := client.SignalWithStartWorkflow(ctx, f.cl, ref, "cart-1", 9, "add", nil, client.StartOptions{Priority: 3})
	if err != nil || !started || h2.RunID == h.RunID {
		t.Fatalf("after finish: %v %v %v", h2, started, err)
	}
	f.finish(t, h2.RunID, `"second"`)
	if out, err := h2.Result(ctx); err != nil || out != "second" {
		t.Fatalf("result: %q %v", out, err)
	}

	for name, req := range map[string]client.SignalWithStartRequest{
		"no external id":  {Type: "T", Event: "add"},
		"no event":        {Type: "T", ExternalID: "x"},
		"other option id": {Type: "T", ExternalID: "x", Event: "add", Options: client.StartOptions{ExternalID: "y"}},
		"bad payload":     {Type: "T", ExternalID: "x", Event: "add", Payload: func() {}},
		"no type":         {ExternalID: "x", Event: "add"},
	} {
		if _, err := f.cl.SignalWithStart(ctx, req); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, _, err := client.SignalWithStartWorkflow(ctx, f.cl, ref, "x", 1, "add", nil, client.StartOptions{}, client.StartOptions{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("two options: %v", err)
	}
	if _, err := f.cl.GetByExternalID(ctx, "x"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("an invalid request started a run: %v", err)
	}
}

// Cart loops on workflow.WaitForEvent[Item](ctx, "add", 0).
var Cart = workflow.New[string, []Item]("Cart")

// Signal-with-start, as docs/workflows.md shows it: an item for the live cart
// cart-7, which is started first if there is none.
func ExampleSignalWithStartWorkflow() {
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
	h, started, err := client.SignalWithStartWorkflow(ctx, cl, Cart, "cart-7", "user-7",
		"add", Item{SKU: "A1"}, client.StartOptions{Queue: "carts"})
	if err != nil {
		return
	}
	fmt.Println(h.RunID, started)
	// Untyped, the same call:
	_, _ = cl.SignalWithStart(ctx, client.SignalWithStartRequest{Type: "Cart",
		ExternalID: "cart-7", Input: "user-7", Event: "add", Payload: Item{SKU: "A1"}})
}
