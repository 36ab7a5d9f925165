package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The README's batching example: 250 orders make two full runs of 100,
// in order, and the 50 left wait in the open batch, whose items have no
// run yet; a flush at the deadline (the reaper's leader's) makes the
// third run.
func TestBatchingExample(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	cl, err := client.NewFromStore(st, nil, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var orders []Order
	for i := range 250 {
		orders = append(orders, Order{ID: fmt.Sprint(i)})
	}
	items, runs, err := batchOrders(ctx, cl, orders)
	if err != nil || len(items) != 250 || len(runs) != 2 {
		t.Fatalf("%d items, runs %v, %v", len(items), runs, err)
	}
	for k, id := range runs {
		r, err := cl.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var in []Order
		if err := json.Unmarshal(r.Input, &in); err != nil || len(in) != 100 || in[0].ID != fmt.Sprint(100*k) || in[99].ID != fmt.Sprint(100*k+99) {
			t.Fatalf("run %d input: %d orders, %v", k, len(in), err)
		}
	}
	if h, ok, err := cl.BatchItemRun(ctx, items[0]); err != nil || !ok || h.RunID != runs[0] {
		t.Fatalf("first item's run: %v %v %v", h, ok, err)
	}
	if _, ok, err := cl.BatchItemRun(ctx, items[249]); err != nil || ok {
		t.Fatalf("last item: ok %v %v, want an open batch", ok, err)
	}
	flushed, err := st.StartBatchesFlushDue(ctx, time.Now().Add(time.Minute))
	if err != nil || len(flushed) != 1 {
		t.Fatalf("flush: %v %v", flushed, err)
	}
	if h, ok, err := cl.BatchItemRun(ctx, items[249]); err != nil || !ok || h.RunID != flushed[0] {
		t.Fatalf("last item's run: %v %v %v", h, ok, err)
	}
	if _, _, err := cl.BatchItemRun(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown item: %v", err)
	}
}

// A batched start with another run option, a bad Batching, or a batch in
// StartMany is ErrStartBatch and stores nothing.
func TestBatchingRefusals(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	cl, err := client.NewFromStore(st, nil, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := &client.Batching{Key: "k", MaxSize: 2, MaxWait: time.Second}
	for _, o := range []client.StartOptions{
		{Batch: b, ExternalID: "x"},
		{Batch: b, Priority: 1},
		{Batch: &client.Batching{MaxSize: 0, MaxWait: time.Second}},
		{Batch: &client.Batching{MaxSize: 1, MaxWait: 25 * time.Hour}},
	} {
		if _, err := cl.Start(ctx, "T", 1, o); !errors.Is(err, client.ErrStartBatch) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrStartBatch", o, err)
		}
	}
	if _, err := cl.StartMany(ctx, []client.StartRequest{{Type: "T", Options: client.StartOptions{Batch: b}}}); !errors.Is(err, client.ErrStartBatch) {
		t.Errorf("StartMany: %v, want ErrStartBatch", err)
	}
	if bs, err := st.StartBatchesList(ctx, "default", false, 10); err != nil || len(bs) != 0 {
		t.Fatalf("refusals stored batches %+v (%v)", bs, err)
	}
	if runs, _, err := st.RunsList(ctx, store.RunsListParams{Namespace: "default", Limit: 10}); err != nil || len(runs) != 0 {
		t.Fatalf("refusals stored runs %+v (%v)", runs, err)
	}
}
