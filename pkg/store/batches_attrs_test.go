package store_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// A set-attributes or remove-attributes batch checks its attributes
// against the namespace's declarations when it is created, and takes any
// run, live or finished; a delete batch takes finished runs only. A
// refused batch creates nothing.
func TestBatchesCreateAttributesAndDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeInt)
	e.declare("tier", store.AttributeKeyword)
	live := e.create(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"tier": []string{"x", "y"}}})
	done := e.finished(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"tier": "old", "customer": 1}}, store.StatusCompleted, 1)
	ids := []uuid.UUID{live.ID, done.ID}

	for name, c := range map[string]struct {
		p    store.BatchCreateParams
		want error
	}{
		"undeclared":         {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids, Attributes: map[string]any{"region": "eu"}}, store.ErrAttribute},
		"wrong kind":         {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids, Attributes: map[string]any{"customer": "42"}}, store.ErrAttribute},
		"fraction for int":   {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids, Attributes: map[string]any{"customer": 4.5}}, store.ErrAttribute},
		"null value":         {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids, Attributes: map[string]any{"tier": nil}}, store.ErrAttribute},
		"remove undeclared":  {store.BatchCreateParams{Action: store.BatchRemoveAttributes, RunIDs: ids, AttributeNames: []string{"region"}}, store.ErrAttribute},
		"set nothing":        {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids}, store.ErrInvalidArgument},
		"remove nothing":     {store.BatchCreateParams{Action: store.BatchRemoveAttributes, RunIDs: ids}, store.ErrInvalidArgument},
		"attributes, cancel": {store.BatchCreateParams{Action: store.BatchCancel, RunIDs: ids[:1], Attributes: map[string]any{"tier": "x"}}, store.ErrInvalidArgument},
		"names, set":         {store.BatchCreateParams{Action: store.BatchSetAttributes, RunIDs: ids, Attributes: map[string]any{"tier": "x"}, AttributeNames: []string{"tier"}}, store.ErrInvalidArgument},
		"delete a live run":  {store.BatchCreateParams{Action: store.BatchDelete, RunIDs: ids}, store.ErrConflict},
		"delete no match":    {store.BatchCreateParams{Action: store.BatchDelete, Query: "status = 'PENDING'"}, store.ErrNotFound},
	} {
		c.p.Namespace = "ns"
		if _, err := e.s.BatchesCreate(e.ctx, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if bs, err := e.s.BatchesList(e.ctx, "ns", 0); err != nil || len(bs) != 0 {
		t.Fatalf("a refused batch was created: %d %v", len(bs), err)
	}

	set, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchSetAttributes, Query: "type = 'A'",
		Attributes: map[string]any{"tier": "gold", "customer": 7}})
	if err != nil || set.Total != 2 {
		t.Fatalf("set-attributes of a live and a finished run: %+v %v", set, err)
	}
	var payload map[string]any
	if err := json.Unmarshal(set.Payload, &payload); err != nil || !reflect.DeepEqual(payload, map[string]any{"tier": "gold", "customer": 7.0}) {
		t.Fatalf("payload %s: %v", set.Payload, err)
	}
	rm, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchRemoveAttributes, RunIDs: ids,
		AttributeNames: []string{"tier"}})
	if err != nil || rm.Total != 2 || string(rm.Payload) != `{"tier": null}` {
		t.Fatalf("remove-attributes: %+v (%s) %v", rm, rm.Payload, err)
	}
	del, err := e.s.BatchesCreate(e.ctx, store.BatchCreateParams{Namespace: "ns", Action: store.BatchDelete, Query: "type = 'A'"})
	if err != nil || del.Total != 1 {
		t.Fatalf("delete by query takes the finished run only: %+v %v", del, err)
	}
}

// A batch's attribute change replaces every value of a name it sets and
// keeps the others; a removal removes the name. A delete deletes a
// finished run with what hangs off it, and refuses a live one.
func TestRunsAttributesChangeAndDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeInt)
	e.declare("tier", store.AttributeKeyword)
	live := e.create(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"tier": []string{"x", "y"}, "customer": 1}})
	done := e.finished(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"tier": "old"}}, store.StatusFailed, 2)

	if err := e.s.RunsAttributesChange(e.ctx, "ns", live.ID, []byte(`{"tier": "gold"}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", live.ID); err != nil || !reflect.DeepEqual(got, map[string]any{"tier": "gold", "customer": int64(1)}) {
		t.Fatalf("after set: %v %v", got, err)
	}
	if err := e.s.RunsAttributesChange(e.ctx, "ns", live.ID, []byte(`{"customer": null}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", live.ID); err != nil || !reflect.DeepEqual(got, map[string]any{"tier": "gold"}) {
		t.Fatalf("after remove: %v %v", got, err)
	}
	if err := e.s.RunsAttributesChange(e.ctx, "ns", done.ID, []byte(`{"region": "eu"}`)); !errors.Is(err, store.ErrAttribute) {
		t.Fatalf("an undeclared name: %v", err)
	}
	if err := e.s.RunsAttributesChange(e.ctx, "ns", uuid.New(), []byte(`{"tier": "gold"}`)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such run: %v", err)
	}

	if err := e.s.RunsDelete(e.ctx, "ns", live.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete a live run: %v", err)
	}
	if err := e.s.RunsDelete(e.ctx, "other", done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete another namespace's run: %v", err)
	}
	if err := e.s.RunsDelete(e.ctx, "ns", done.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RunsGet(e.ctx, "ns", done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted run: %v", err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", done.ID); err != nil || len(got) != 0 {
		t.Fatalf("the deleted run's attributes: %v %v", got, err)
	}
	if o, err := e.s.RunsOrphans(e.ctx); err != nil || o != (store.Orphans{}) {
		t.Fatalf("orphans: %+v %v", o, err)
	}
	if err := e.s.RunsDelete(e.ctx, "ns", done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a deleted run: %v", err)
	}
	if _, err := e.s.RunsGet(e.ctx, "ns", live.ID); err != nil {
		t.Fatalf("the live run: %v", err)
	}
}
