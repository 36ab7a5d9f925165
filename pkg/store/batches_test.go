package store_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// A batch by query takes the live runs the query matches when it is
// created; a list of ids must name live runs of the namespace. Bad input
// is a typed error and creates nothing.
func TestBatchesCreateResolvesItsRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(store.RunsCreateParams{Type: "A"})
	b := e.create(store.RunsCreateParams{Type: "A"})
	e.create(store.RunsCreateParams{Type: "B"})
	done := e.finished(store.RunsCreateParams{Type: "A"}, store.StatusCompleted, 0)

	bt, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchCancel, Query: "type = 'A'"})
	if err != nil || bt.Total != 2 || bt.State != store.BatchRunning || bt.Rate != store.DefaultBatchRate || bt.Pending() != 2 {
		t.Fatalf("create by query: %+v %v", bt, err)
	}
	runs, err := e.s.BatchRunsList(e.ctx, bt.ID, "pending", uuid.Nil, 10)
	if err != nil || len(runs) != 2 || !hasRun(runs, a.ID) || !hasRun(runs, b.ID) {
		t.Fatalf("batch runs: %+v %v", runs, err)
	}

	for name, c := range map[string]struct {
		p    store.BatchCreateParams
		want error
	}{
		"bad query":      {store.BatchCreateParams{Action: store.BatchCancel, Query: "type = "}, store.ErrInvalidArgument},
		"unknown field":  {store.BatchCreateParams{Action: store.BatchCancel, Query: "customr = 'x'"}, store.ErrInvalidArgument},
		"no match":       {store.BatchCreateParams{Action: store.BatchCancel, Query: "type = 'Z'"}, store.ErrNotFound},
		"unknown action": {store.BatchCreateParams{Action: "explode", Query: "type = 'A'"}, store.ErrInvalidArgument},
		"both":           {store.BatchCreateParams{Action: store.BatchCancel, Query: "type = 'A'", RunIDs: []uuid.UUID{a.ID}}, store.ErrInvalidArgument},
		"neither":        {store.BatchCreateParams{Action: store.BatchCancel}, store.ErrInvalidArgument},
		"rate":           {store.BatchCreateParams{Action: store.BatchCancel, Query: "type = 'A'", Rate: store.MaxBatchRate + 1}, store.ErrInvalidArgument},
		"unknown run":    {store.BatchCreateParams{Action: store.BatchCancel, RunIDs: []uuid.UUID{a.ID, uuid.New()}}, store.ErrNotFound},
		"finished run":   {store.BatchCreateParams{Action: store.BatchCancel, RunIDs: []uuid.UUID{a.ID, done.ID}}, store.ErrConflict},
		"retry a live":   {store.BatchCreateParams{Action: store.BatchRetry, RunIDs: []uuid.UUID{a.ID}}, store.ErrConflict},
		"signal no name": {store.BatchCreateParams{Action: store.BatchSignal, RunIDs: []uuid.UUID{a.ID}}, store.ErrInvalidArgument},
		"payload not json": {store.BatchCreateParams{Action: store.BatchSignal, EventName: "go", Payload: []byte("{"), RunIDs: []uuid.UUID{a.ID}},
			store.ErrInvalidArgument},
		"reason escapes": {store.BatchCreateParams{Action: store.BatchTerminate, Reason: "\x1b[2J", RunIDs: []uuid.UUID{a.ID}}, store.ErrInvalidArgument},
	} {
		c.p.Namespace = "ns"
		if _, err := e.s.BatchesCreate(e.ctx, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if bs, err := e.s.BatchesList(e.ctx, "ns", 0); err != nil || len(bs) != 1 {
		t.Fatalf("a refused batch was created: %d %v", len(bs), err)
	}
	byID, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchTerminate, Reason: "r", RunIDs: []uuid.UUID{a.ID, a.ID}, Rate: 5})
	if err != nil || byID.Total != 1 || byID.Query != "" || byID.Reason != "r" || byID.Rate != 5 {
		t.Fatalf("create by ids: %+v %v", byID, err)
	}
}

func hasRun(runs []store.BatchRun, id uuid.UUID) bool {
	for _, r := range runs {
		if r.RunID == id {
			return true
		}
	}
	return false
}

// Transactions that take runs of one batch at once take each run once;
// the batch completes with its last outcome; a paused batch gives none.
func TestBatchRunsTakeEachRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 40
	for range n {
		e.create(store.RunsCreateParams{Type: "A"})
	}
	bt, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchCancel, Query: "type = 'A'"})
	if err != nil {
		t.Fatal(err)
	}
	if _, moved, err := e.s.BatchesSetState(e.ctx, "ns", bt.ID, store.BatchPaused, store.BatchRunning); err != nil || !moved {
		t.Fatalf("pause: %v %v", moved, err)
	}
	if ids, err := e.s.BatchRunsTake(e.ctx, bt.ID, 10); err != nil || len(ids) != 0 {
		t.Fatalf("a paused batch gave %d runs (%v)", len(ids), err)
	}
	if _, moved, err := e.s.BatchesSetState(e.ctx, "ns", bt.ID, store.BatchRunning, store.BatchPaused); err != nil || !moved {
		t.Fatalf("resume: %v %v", moved, err)
	}
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				var took int
				err := e.s.InTx(e.ctx, func(tx *store.Store) error {
					ids, err := tx.BatchRunsTake(e.ctx, bt.ID, 3)
					if err != nil {
						return err
					}
					took = len(ids)
					outs := make([]store.BatchOutcome, len(ids))
					for i, id := range ids {
						outs[i] = store.BatchOutcome{RunID: id, Outcome: "done"}
					}
					if len(outs) > 0 {
						_, err = tx.BatchRunsSettle(e.ctx, bt.ID, outs)
					}
					mu.Lock()
					for _, id := range ids {
						seen[id]++
					}
					mu.Unlock()
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if took == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d runs taken, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("run %s taken %d times", id, k)
		}
	}
	got, err := e.s.BatchesGet(e.ctx, "ns", bt.ID)
	if err != nil || got.State != store.BatchCompleted || got.Done != n || got.FinishedAt == nil {
		t.Fatalf("after: %+v %v", got, err)
	}
	if was, moved, err := e.s.BatchesSetState(e.ctx, "ns", bt.ID, store.BatchCancelled, store.BatchRunning, store.BatchPaused); err != nil || moved || was != store.BatchCompleted {
		t.Fatalf("cancel a completed batch: %v %v %v", was, moved, err)
	}
}
