package examples_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/pkg/workflowtest"
	"github.com/kagzi/kagzi/tests/examples"
)

func TestCart(t *testing.T) {
	env := workflowtest.New()
	if err := workflowtest.SendUpdate(env, examples.AddToCart, examples.CartItem{SKU: "A-1", Price: -1}); err == nil {
		t.Fatal("the validator took a negative price")
	}
	for i, it := range []examples.CartItem{{SKU: "A-1", Price: 10}, {SKU: "A-1", Price: 10}, {SKU: "B-2", Price: 20}} {
		if err := workflowtest.SendUpdateAfter(env, time.Duration(i)*time.Minute, examples.AddToCart, it); err != nil {
			t.Fatal(err)
		}
	}
	got, err := workflowtest.Run(env, workflow.New[examples.CartInput, examples.CartTotal]("Cart"), examples.Cart, examples.CartInput{IdleSec: 3600})
	if err != nil || got != (examples.CartTotal{Items: 2, Total: 30}) {
		t.Fatalf("cart closed after the idle time: %+v %v", got, err)
	}
	if v, err := workflowtest.UpdateResult(env, examples.AddToCart, 1); err != nil || v.Total != 10 {
		t.Fatalf("first answer: %+v %v", v, err)
	}
	var ue *workflowtest.UpdateError
	if _, err := workflowtest.UpdateResult(env, examples.AddToCart, 2); !errors.As(err, &ue) || ue.Message != "A-1 is already in the cart" {
		t.Fatalf("a second A-1: %v", err)
	}
	if v, err := workflowtest.UpdateResult(env, examples.AddToCart, 3); err != nil || v.Total != 30 {
		t.Fatalf("third answer: %+v %v", v, err)
	}
	if v, n, err := workflowtest.State(env, examples.CartState); err != nil || n != 2 || v.Total != 30 {
		t.Fatalf("state: %+v after %d sets, %v", v, n, err)
	}
	items, closed, err := workflowtest.StreamEntries(env, examples.CartItems)
	if err != nil || !closed || len(items) != 2 || items[0].SKU != "A-1" || items[1].SKU != "B-2" {
		t.Fatalf("stream: %+v closed %v, %v", items, closed, err)
	}
}

func TestBatch(t *testing.T) {
	env := workflowtest.New()
	env.SendEventAfter(time.Second, "item", "a")
	env.SendEventAfter(3*time.Second, "item", "b")
	env.SendEventAfter(5*time.Second, "item", "c")
	env.SendEventAfter(time.Minute, "item", "too late")
	got, err := workflowtest.Run(env, workflow.New[examples.BatchInput, []string]("Batch"), examples.Batch, examples.BatchInput{WindowSec: 10})
	if err != nil || len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("batch: %q %v", got, err)
	}
}
