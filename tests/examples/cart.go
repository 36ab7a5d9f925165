package examples

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/workflow"
)

// CartInput is the input of Cart.
type CartInput struct {
	// Items is how many additions close the cart (default 3).
	Items int `json:"items"`
	// IdleSec closes the cart after this long without an addition (default
	// 1 hour).
	IdleSec int `json:"idle_sec"`
}

// CartItem is the request of the AddToCart update.
type CartItem struct {
	SKU   string `json:"sku"`
	Price int    `json:"price"`
}

// CartTotal is the answer to AddToCart and the result of Cart.
type CartTotal struct {
	Items int `json:"items"`
	Total int `json:"total"`
}

// AddToCart adds an item to a Cart run and answers with the new total:
//
//	kagzi run update RUN_ID AddToCart --payload '{"sku": "A-1", "price": 10}'
var AddToCart = workflow.NewUpdate[CartItem, CartTotal]("AddToCart", func(it CartItem) error {
	switch {
	case it.SKU == "":
		return errors.New("an item needs a sku")
	case it.Price <= 0:
		return fmt.Errorf("price %d must be positive", it.Price)
	}
	return nil
})

// CartState is a Cart run's contents so far, readable while it runs:
//
//	kagzi run state RUN_ID cart
var CartState = workflow.NewState[CartTotal]("cart")

// CartItems streams the items a Cart run took, in order, closed when the
// cart closes:
//
//	kagzi run stream RUN_ID items --follow
var CartItems = workflow.NewStream[CartItem]("items")

// Cart answers AddToCart updates, reserving each item in a step, until it
// holds Items items or none came for IdleSec, and returns the total. An
// item already in the cart is refused to its caller; the cart goes on.
// Each item taken is also written to CartItems and the new contents set as
// CartState, so the state and stream commands have something to read.
func Cart(ctx workflow.Context, in CartInput) (CartTotal, error) {
	if in.Items <= 0 {
		in.Items = 3
	}
	idle := time.Duration(in.IdleSec) * time.Second
	if idle <= 0 {
		idle = time.Hour
	}
	var cart CartTotal
	seen := map[string]bool{}
	for cart.Items < in.Items {
		err := AddToCart.Handle(ctx, idle, func(ctx workflow.Context, it CartItem) (CartTotal, error) {
			if seen[it.SKU] {
				return CartTotal{}, fmt.Errorf("%s is already in the cart", it.SKU)
			}
			if _, err := workflow.Step(ctx, "reserve-"+it.SKU, func(context.Context) (string, error) {
				return "reserved " + it.SKU, nil
			}); err != nil {
				return CartTotal{}, err
			}
			seen[it.SKU] = true
			cart.Items++
			cart.Total += it.Price
			if err := CartState.Set(ctx, cart); err != nil {
				return CartTotal{}, err
			}
			if err := CartItems.Write(ctx, it); err != nil {
				return CartTotal{}, err
			}
			return cart, nil
		})
		if errors.Is(err, workflow.ErrUpdateTimeout) {
			break
		}
		if err != nil {
			return CartTotal{}, err
		}
	}
	if err := CartItems.Close(ctx); err != nil {
		return CartTotal{}, err
	}
	return cart, nil
}
