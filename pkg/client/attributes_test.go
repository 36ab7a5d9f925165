package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/client"
)

func TestAttributesStartListCount(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	if err := f.cl.DeclareAttribute(ctx, "customer", client.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	if err := f.cl.DeclareAttribute(ctx, "amount", client.AttributeInt); err != nil {
		t.Fatal(err)
	}
	if attrs, err := f.cl.ListAttributes(ctx); err != nil || len(attrs) != 2 || attrs[0].Name != "amount" {
		t.Fatalf("list attributes: %v %v", attrs, err)
	}
	h, err := f.cl.Start(ctx, "T", nil, client.StartOptions{Attributes: map[string]any{"customer": "42", "amount": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cl.Start(ctx, "T", nil, client.StartOptions{Attributes: map[string]any{"customer": "7"}}); err != nil {
		t.Fatal(err)
	}
	_, err = f.cl.Start(ctx, "T", nil, client.StartOptions{Attributes: map[string]any{"amount": "five"}})
	if !errors.Is(err, client.ErrAttribute) || !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), `"amount"`) {
		t.Errorf("a string for an int: %v", err)
	}
	runs, _, err := f.cl.List(ctx, client.ListOptions{Query: `customer = "42" AND amount < 10`, Type: "T"})
	if err != nil || len(runs) != 1 || runs[0].ID != h.RunID {
		t.Fatalf("list: %v %v", runs, err)
	}
	if got, err := f.cl.RunAttributes(ctx, h.RunID); err != nil || got["customer"] != "42" {
		t.Errorf("run attributes: %v %v", got, err)
	}
	res, err := f.cl.Count(ctx, client.CountOptions{GroupBy: "customer"})
	if err != nil || res.Total != 2 || len(res.Groups) != 2 {
		t.Fatalf("count: %+v %v", res, err)
	}
	if _, err := f.cl.Count(ctx, client.CountOptions{Query: "amount = 'x'"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a malformed count: %v", err)
	}
}
