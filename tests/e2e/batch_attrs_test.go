package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Attribute and delete batches through the services: a set-attributes
// batch re-tags live and finished runs alike (a value replaces the run's
// values of that name), a remove-attributes batch removes a name, and a
// delete batch deletes finished runs with their attributes. Each batch
// records one outcome per run; of two delete batches of one run, one
// deletes it and the other finds it gone (skipped).
func TestBatchAttributesAndDelete(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, wait: time.Minute, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "BAWait", func(ctx workflow.Context, _ int) (string, error) {
				return workflow.WaitForEvent[string](ctx, "go", time.Hour)
			}),
			worker.Register(w, "BADone", func(_ workflow.Context, n int) (int, error) { return n, nil }),
		)
	}})
	ctx := context.Background()
	for n, k := range map[string]client.AttributeKind{"incident": client.AttributeKeyword, "customer": client.AttributeInt} {
		if err := e.cl.DeclareAttribute(ctx, n, k); err != nil {
			t.Fatal(err)
		}
	}
	// run completes a batch and checks each of its runs has one outcome,
	// want.
	run := func(t *testing.T, o client.BatchOptions, want string, ids ...uuid.UUID) client.Batch {
		t.Helper()
		b, err := e.cl.StartBatch(ctx, o)
		if err != nil || b.Total != len(ids) {
			t.Fatalf("start %s batch: %+v %v", o.Action, b, err)
		}
		return completed(t, e, b, want, ids...)
	}
	startRun := func(typ string, attrs map[string]any) uuid.UUID {
		t.Helper()
		h, err := e.cl.Start(ctx, typ, 1, client.StartOptions{Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		if typ == "BADone" {
			if r, err := e.cl.Wait(ctx, h.RunID); err != nil || r.Status != client.StatusCompleted {
				t.Fatalf("run: %+v %v", r, err)
			}
		}
		return h.RunID
	}
	live := startRun("BAWait", map[string]any{"incident": []string{"a", "b"}, "customer": 1})
	done1 := startRun("BADone", map[string]any{"customer": 2})
	done2 := startRun("BADone", nil)

	if _, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchSetAttributes, Query: "type = 'BADone'",
		Attributes: map[string]any{"customer": "x"}}); !errors.Is(err, client.ErrAttribute) {
		t.Fatalf("a value of another kind: %v, want ErrAttribute", err)
	}
	if _, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchDelete, RunIDs: []uuid.UUID{done1, live}}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a delete batch of a live run: %v, want ErrConflict", err)
	}

	run(t, client.BatchOptions{Action: client.BatchSetAttributes, Query: "type IN ('BAWait', 'BADone')",
		Attributes: map[string]any{"incident": "INC-7"}}, "done", live, done1, done2)
	for id, want := range map[uuid.UUID]map[string]any{
		live:  {"incident": "INC-7", "customer": int64(1)},
		done1: {"incident": "INC-7", "customer": int64(2)},
		done2: {"incident": "INC-7"},
	} {
		if got, err := e.cl.RunAttributes(ctx, id); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("attributes of %s after the set batch: %v %v, want %v", id, got, err, want)
		}
	}
	if n, err := e.cl.Count(ctx, client.CountOptions{Query: "incident = 'INC-7'"}); err != nil || n.Total != 3 {
		t.Fatalf("runs found by the new tag: %+v %v", n, err)
	}
	// Counts of every run by an attribute (the maintained counts) follow
	// each batch.
	counted := func(when, name, want string) {
		t.Helper()
		res, err := e.cl.Count(ctx, client.CountOptions{GroupBy: name})
		got := ""
		for _, g := range res.Groups {
			got += fmt.Sprintf("%s=%d ", *g.Value, g.Count)
		}
		if err != nil || got != want {
			t.Fatalf("%s: count by %s: %q %v, want %q", when, name, got, err, want)
		}
	}
	counted("after the set batch", "incident", "INC-7=3 ")
	run(t, client.BatchOptions{Action: client.BatchRemoveAttributes, RunIDs: []uuid.UUID{live, done1},
		AttributeNames: []string{"customer"}}, "done", live, done1)
	for _, id := range []uuid.UUID{live, done1} {
		if got, err := e.cl.RunAttributes(ctx, id); err != nil || !reflect.DeepEqual(got, map[string]any{"incident": "INC-7"}) {
			t.Fatalf("attributes of %s after the remove batch: %v %v", id, got, err)
		}
	}
	counted("after the remove batch", "customer", "")

	run(t, client.BatchOptions{Action: client.BatchDelete, Query: "incident = 'INC-7'"}, "done", done1, done2)
	for _, id := range []uuid.UUID{done1, done2} {
		if _, err := e.cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("deleted run %s: %v", id, err)
		}
	}
	if r, err := e.cl.Get(ctx, live); err != nil || r.Status.Terminal() {
		t.Fatalf("the live run: %+v %v", r, err)
	}
	counted("after the delete batch", "incident", "INC-7=1 ")

	// Two delete batches of one run, both created before the reaper acts
	// on either (else the second is refused, ErrNotFound, and it is tried
	// again with another run): one deletes it, the other skips it.
	for try := 0; ; try++ {
		id := startRun("BADone", nil)
		first, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchDelete, RunIDs: []uuid.UUID{id}})
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchDelete, RunIDs: []uuid.UUID{id}})
		if errors.Is(err, client.ErrNotFound) && try < 5 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		a, b := completed(t, e, first, "", id), completed(t, e, second, "", id)
		if a.Done+b.Done != 1 || a.Skipped+b.Skipped != 1 {
			t.Fatalf("two delete batches of one run: %+v, %+v", a, b)
		}
		break
	}
}

// completed waits for batch b to complete and checks each of ids has one
// outcome, want ("" for any).
func completed(t *testing.T, e *env, b client.Batch, want string, ids ...uuid.UUID) client.Batch {
	t.Helper()
	ctx := context.Background()
	var got client.Batch
	var err error
	waitUntil(t, 30*time.Second, string(b.Action)+" batch completes", func() bool {
		got, err = e.cl.GetBatch(ctx, b.ID)
		return err == nil && got.State == client.BatchCompleted
	})
	runs, err := e.cl.BatchRuns(ctx, b.ID, "", uuid.Nil, 100)
	if err != nil || len(runs) != len(ids) || got.Done+got.Failed+got.Skipped != len(ids) {
		t.Fatalf("%s batch: %+v, runs %+v %v", b.Action, got, runs, err)
	}
	seen := map[uuid.UUID]bool{}
	for _, r := range runs {
		if seen[r.RunID] || (want != "" && r.Outcome != want) || r.ActedAt == nil {
			t.Fatalf("%s batch run %+v, want one outcome %s", b.Action, r, want)
		}
		seen[r.RunID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("%s batch: run %s has no outcome", b.Action, id)
		}
	}
	return got
}
