package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// batchRuns reads the runs of typ and their inputs, each a list of items.
func batchRuns(t *testing.T, s *store.Store, typ string) map[uuid.UUID][]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "default", Type: typ, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID][]json.RawMessage{}
	for _, r := range runs {
		full, err := s.RunsGet(ctx, "default", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(full.Input, &items); err != nil {
			t.Fatalf("run %s input %s: %v", r.ID, full.Input, err)
		}
		out[r.ID] = items
	}
	return out
}

// A bad batch option is refused with ErrStartBatch and stores nothing.
func TestStartBatchesRefuseBadOptions(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	for _, b := range []store.StartBatch{
		{Key: "k", MaxSize: 0, MaxWait: time.Second},
		{Key: "k", MaxSize: store.MaxStartBatchSize + 1, MaxWait: time.Second},
		{Key: "k", MaxSize: 10, MaxWait: 0},
		{Key: "k", MaxSize: 10, MaxWait: store.MaxStartBatchWait + time.Second},
		{Key: strings.Repeat("k", store.MaxStartBatchKeyLen+1), MaxSize: 10, MaxWait: time.Second},
		{Key: "a\x00b", MaxSize: 10, MaxWait: time.Second},
	} {
		_, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "T", Batch: b})
		if !errors.Is(err, store.ErrStartBatch) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%+v: want ErrStartBatch, got %v", b, err)
		}
		if _, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "t", Pattern: "a", Type: "T", Queue: "default",
			Batch: &b}); !errors.Is(err, store.ErrStartBatch) {
			t.Errorf("trigger %+v: want ErrStartBatch, got %v", b, err)
		}
	}
	_, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "T",
		Batch: store.StartBatch{MaxSize: 2, MaxWait: time.Second}, Payload: []byte("{")})
	if !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("bad JSON: want ErrInvalidArgument, got %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM kagzi.start_batches) + (SELECT count(*) FROM kagzi.start_batch_items) + (SELECT count(*) FROM kagzi.triggers)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("refusals stored %d rows", n)
	}
}

// Many goroutines add to one key while a flusher closes due batches:
// every item ends in exactly one run, in the order of its batch, no run
// holds more than MaxSize items, and each item's run is the one whose
// input holds it.
func TestStartBatchesConcurrentAddsAndFlush(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	const writers, each, maxSize = 12, 40, 7
	spec := store.StartBatch{Key: "k", MaxSize: maxSize, MaxWait: time.Hour}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		added   = map[string]uuid.UUID{} // item payload -> item id
		errs    = make(chan error, writers+1)
		stop    = make(chan struct{})
		flushed int
	)
	go func() { // closes whatever is open, as a leader past the deadline would
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			runs, err := s.StartBatchesFlushDue(ctx, time.Now().Add(2*time.Hour))
			if err != nil {
				errs <- err
				return
			}
			flushed += len(runs)
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				p := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				a, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "Agg",
					Batch: spec, Payload: []byte(p)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				added[p] = a.ItemID
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := s.StartBatchesFlushDue(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if flushed == 0 {
		t.Log("the flusher closed no batch while the writers added")
	}
	runs := batchRuns(t, s, "Agg")
	seen := map[string]uuid.UUID{}
	for id, items := range runs {
		if len(items) == 0 || len(items) > maxSize {
			t.Errorf("run %s has %d items, want 1 to %d", id, len(items), maxSize)
		}
		last := map[float64]float64{}
		for _, raw := range items {
			k := string(raw)
			if prev, ok := seen[k]; ok {
				t.Errorf("item %s is in runs %s and %s", k, prev, id)
			}
			seen[k] = id
			var v struct{ W, I float64 }
			_ = json.Unmarshal(raw, &v)
			if l, ok := last[v.W]; ok && v.I <= l {
				t.Errorf("run %s: writer %v's items out of order", id, v.W)
			}
			last[v.W] = v.I
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("%d items in runs, want %d", len(seen), writers*each)
	}
	for p, item := range added {
		it, err := s.StartBatchItemsGet(ctx, "default", item)
		if err != nil {
			t.Fatal(err)
		}
		if it.RunID == nil || *it.RunID != seen[p] {
			t.Fatalf("item %s: run %v, its input is in %s", p, it.RunID, seen[p])
		}
	}
	if open, _ := s.StartBatchesList(ctx, "default", true, 10); len(open) != 0 {
		t.Errorf("%d batches still open", len(open))
	}
}

// A batch closes at MaxSize in the add that fills it, or at its deadline
// by a flush; a flush before the deadline closes nothing.
func TestStartBatchesSizeAndWait(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	add := func(key string, i int, size int) store.StartBatchAdded {
		a, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "W",
			Batch: store.StartBatch{Key: key, MaxSize: size, MaxWait: time.Minute}, Payload: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for i := 0; i < 2; i++ {
		if a := add("full", i, 3); a.RunID != uuid.Nil || a.Seq != i {
			t.Fatalf("add %d: %+v, want seq %d and no run", i, a, i)
		}
	}
	full := add("full", 2, 3)
	if full.RunID == uuid.Nil {
		t.Fatal("the third item did not close a batch of 3")
	}
	a0 := add("slow", 10, 100)
	add("slow", 11, 100)
	due, err := s.StartBatchesNextDue(ctx)
	if err != nil || due == nil {
		t.Fatalf("next due: %v %v", due, err)
	}
	if runs, err := s.StartBatchesFlushDue(ctx, due.Add(-time.Second)); err != nil || len(runs) != 0 {
		t.Fatalf("flush before the deadline: %v %v", runs, err)
	}
	runs, err := s.StartBatchesFlushDue(ctx, *due)
	if err != nil || len(runs) != 1 {
		t.Fatalf("flush at the deadline: %v %v", runs, err)
	}
	got := batchRuns(t, s, "W")
	if b, _ := json.Marshal(got[runs[0]]); string(b) != "[10,11]" {
		t.Errorf("flushed run input %s, want [10,11]", b)
	}
	if b, _ := json.Marshal(got[full.RunID]); string(b) != "[0,1,2]" {
		t.Errorf("full run input %s, want [0,1,2]", b)
	}
	if it, _ := s.StartBatchItemsGet(ctx, "default", a0.ItemID); it.RunID == nil || *it.RunID != runs[0] {
		t.Errorf("item's run %v, want %s", it.RunID, runs[0])
	}
	if due, err := s.StartBatchesNextDue(ctx); err != nil || due != nil {
		t.Errorf("next due after the flush: %v %v", due, err)
	}
	// A next item opens a new batch.
	if a := add("slow", 12, 100); a.Seq != 0 || a.BatchID == a0.BatchID {
		t.Errorf("an add after the close: %+v", a)
	}
}

// A batched trigger makes each matching event an item; a second fan-out
// of an event adds nothing.
func TestStartBatchesTrigger(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	tr, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "agg", Pattern: "order.*", Type: "Orders",
		Queue: "default", InputPath: "id", Batch: &store.StartBatch{Key: "orders", MaxSize: 2, MaxWait: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := s.TriggersList(ctx, "default")
	if err != nil || len(ts) != 1 || ts[0].Batch == nil || *ts[0].Batch != *tr.Batch {
		t.Fatalf("listed %+v, %v", ts, err)
	}
	for i := 0; i < 3; i++ {
		p, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "default", Name: "order.created",
			Payload: []byte(fmt.Sprintf(`{"id":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 2; k++ {
			if _, err := s.PublishedEventsFanOut(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs := batchRuns(t, s, "Orders")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	for _, items := range runs {
		if b, _ := json.Marshal(items); string(b) != "[0,1]" {
			t.Errorf("input %s, want [0,1]", b)
		}
	}
	if open, _ := s.StartBatchesList(ctx, "default", true, 10); len(open) != 1 || open[0].Size != 1 {
		t.Errorf("open batches %+v, want one of 1 item", open)
	}
}

// A batch whose next item would take its input over the payload limit
// becomes a run without it; an item whose list alone would be over it is
// refused.
func TestStartBatchesClosesAtThePayloadLimit(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	if _, err := s.SettingsSet(ctx, store.Settings{PayloadWarnBytes: 1000, PayloadMaxBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	item := []byte(`"` + strings.Repeat("x", 298) + `"`) // 300 bytes: three make a list of 904
	spec := store.StartBatch{Key: "big", MaxSize: 100, MaxWait: time.Hour}
	var runs []uuid.UUID
	for range 7 {
		a, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "Big", Batch: spec, Payload: item})
		if err != nil {
			t.Fatal(err)
		}
		if a.RunID != uuid.Nil {
			t.Fatalf("an add under MaxSize returned its run %s", a.RunID)
		}
	}
	got := batchRuns(t, s, "Big")
	for id, items := range got {
		runs = append(runs, id)
		if len(items) != 3 {
			t.Errorf("run %s holds %d items, want 3", id, len(items))
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2 (the seventh item waits)", len(runs))
	}
	_, err := s.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "default", Type: "Big", Batch: spec,
		Payload: []byte(`"` + strings.Repeat("x", 997) + `"`)})
	if !errors.Is(err, store.ErrPayloadTooLarge) {
		t.Fatalf("an item of 999 bytes: %v, want ErrPayloadTooLarge", err)
	}
}
