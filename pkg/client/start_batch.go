package client

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Batching collects starts into one run (docs/batching.md): the starts of
// one workflow type on one queue with one Key are items of one open
// batch, which becomes a single run, whose input is the JSON list of the
// items' inputs in the order they were added, when it holds MaxSize items
// or MaxWait after its first item, whichever is first. The batch lives in
// the database: a process killed or frozen after its start returned
// loses nothing, and an item is in exactly one run. The open batch keeps
// the MaxSize and MaxWait of the start that opened it.
//
// Key is at most store.MaxStartBatchKeyLen bytes (empty is a key too),
// MaxSize 1 to store.MaxStartBatchSize, MaxWait 1ms to
// store.MaxStartBatchWait; else the start is ErrStartBatch and stores
// nothing. A batched start takes Queue and no other option (the run is
// shared by many starts): another is ErrStartBatch too.
type Batching struct {
	Key     string
	MaxSize int
	MaxWait time.Duration
}

// ErrStartBatch is a malformed Batching, or a batched start with an
// option it cannot take; it is an ErrInvalidArgument.
var ErrStartBatch = store.ErrStartBatch

// BatchItem is what a batched start added.
type BatchItem struct {
	// ID is the item's, BatchID its batch's; Seq is its place in the
	// batch's list, from 0.
	ID, BatchID uuid.UUID
	Seq         int
}

// startBatched adds the start to its batch. The Handle's RunID is the
// batch's run when this start filled it (Created true), else zero: the
// run starts later (BatchItemRun tells which it is).
func (c *Client) startBatched(ctx context.Context, st *store.Store, typ string, input any, o StartOptions) (*Handle, error) {
	q, b := o.Queue, *o.Batch
	if q == "" {
		q = c.queue
	}
	o.Queue, o.Batch = "", nil
	if !reflect.ValueOf(o).IsZero() {
		return nil, fmt.Errorf("start %s: %w: a batched start takes Queue and Batch only", protocol.Echo(typ), ErrStartBatch)
	}
	raw, err := encodeInput(input)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", protocol.Echo(typ), err)
	}
	a, err := st.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: c.ns, Queue: q, Type: typ,
		Batch: store.StartBatch(b), Payload: raw})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", protocol.Echo(typ), err)
	}
	return &Handle{c: c, RunID: a.RunID, Created: a.RunID != uuid.Nil, Item: &BatchItem{ID: a.ItemID, BatchID: a.BatchID, Seq: a.Seq}}, nil
}

// BatchItemRun returns the run of a batched start's item (Handle.Item.ID)
// once its batch closed, with ok true; ok is false while it is open.
// An item of another namespace, or none, is ErrNotFound.
func (c *Client) BatchItemRun(ctx context.Context, item uuid.UUID) (h *Handle, ok bool, err error) {
	it, err := c.st.StartBatchItemsGet(ctx, c.ns, item)
	if err != nil || it.RunID == nil {
		return nil, false, err
	}
	return c.Handle(*it.RunID), true, nil
}
