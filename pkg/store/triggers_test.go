package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

func TestPatternMatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"order.created", "order.created", true},
		{"order.created", "order.paid", false},
		{"order.*", "order.created", true},
		{"order.*", "order", false},
		{"order.*", "order.created.eu", false},
		{"*.created", "order.created", true},
		{"order.>", "order.created", true},
		{"order.>", "order.created.eu", true},
		{"order.>", "order", false},
		{">", "anything.at.all", true},
		{"*.*.eu", "order.created.eu", true},
		{"order.created", "order.created.eu", false},
	}
	for _, c := range cases {
		if got := store.PatternMatches(c.pattern, c.name); got != c.want {
			t.Errorf("PatternMatches(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	for _, bad := range []string{"", "order..created", "order.>.eu", "or der", "a.b*", strings.Repeat("a", store.MaxEventPatternLen+1)} {
		if err := store.CheckEventPattern(bad); !errors.Is(err, store.ErrEventPattern) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("pattern %q: want ErrEventPattern, got %v", bad, err)
		}
	}
	for _, bad := range []string{"order.*", "order.>", "", "a..b"} {
		if err := store.CheckPublishedEventName(bad); !errors.Is(err, store.ErrEventPattern) {
			t.Errorf("event name %q: want ErrEventPattern, got %v", bad, err)
		}
	}
}

// Refused triggers and events store nothing; an event published twice
// with one id is stored once; a fan-out starts one run per matching
// trigger, with the trigger's input, and a second fan-out starts none.
func TestTriggersPublishAndFanOut(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	count := func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM kagzi."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	bad := []store.Trigger{
		{Namespace: "ns", Name: "t", Pattern: "order.>.x", Type: "T", Queue: "q"},
		{Namespace: "ns", Name: "t", Pattern: "", Type: "T", Queue: "q"},
		{Namespace: "ns", Name: "t.x", Pattern: "order.*", Type: "T", Queue: "q"},
		{Namespace: "ns", Name: strings.Repeat("n", store.MaxTriggerNameLen+1), Pattern: "order.*", Type: "T", Queue: "q"},
		{Namespace: "ns", Name: "t", Pattern: "order.*", Type: "", Queue: "q"},
		{Namespace: "ns", Name: "t", Pattern: "order.*", Type: "T", Queue: "q", InputPath: "a.b"},
	}
	for _, b := range bad {
		if _, err := s.TriggersCreate(ctx, b); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("trigger %+v: want ErrInvalidArgument, got %v", b, err)
		}
	}
	for _, tr := range []store.Trigger{
		{Namespace: "ns", Name: "all-orders", Pattern: "order.>", Type: "Audit", Queue: "q"},
		{Namespace: "ns", Name: "created", Pattern: "*.created", Type: "Ship", Queue: "q", InputPath: "order"},
		{Namespace: "ns", Name: "paid", Pattern: "order.paid", Type: "Bill", Queue: "q"},
		{Namespace: "other", Name: "foreign", Pattern: ">", Type: "Other", Queue: "q"},
	} {
		if _, err := s.TriggersCreate(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: "paid", Pattern: "x", Type: "T", Queue: "q"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate name: want ErrConflict, got %v", err)
	}
	if n := count("triggers"); n != 4 {
		t.Fatalf("%d triggers stored, want 4", n)
	}

	for _, p := range []store.PublishParams{
		{Namespace: "ns", Name: "order.*", Payload: []byte(`{}`)},
		{Namespace: "ns", Name: "order.created", Payload: []byte(`{"order":`)},
		{Namespace: "bad.ns", Name: "order.created"},
	} {
		if _, err := s.PublishedEventsAdd(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("publish %+v: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if n := count("published_events"); n != 0 {
		t.Fatalf("refused publishes stored %d events", n)
	}

	id := uuid.Must(uuid.NewV7())
	p := store.PublishParams{Namespace: "ns", ID: id, Name: "order.created", Payload: []byte(`{"order":{"id":7},"by":"me"}`)}
	first, err := s.PublishedEventsAdd(ctx, p)
	if err != nil || !first.Created || first.ID != id {
		t.Fatalf("publish: %+v %v", first, err)
	}
	again, err := s.PublishedEventsAdd(ctx, p)
	if err != nil || again.Created || again.ID != id {
		t.Fatalf("publish again: %+v %v", again, err)
	}
	if _, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", ID: id, Name: "order.paid"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("id reused for another event: want ErrConflict, got %v", err)
	}
	if pend, err := s.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 1 || pend[0] != id {
		t.Fatalf("pending: %v %v", pend, err)
	}

	out, err := s.PublishedEventsFanOut(ctx, id)
	if err != nil || out.Done || len(out.Started) != 2 {
		t.Fatalf("fan out: %+v %v", out, err)
	}
	inputs := map[string]string{}
	for _, f := range out.Started {
		r, err := s.RunsGet(ctx, "ns", f.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ExternalID != store.TriggerExternalID(f.Trigger, id) {
			t.Errorf("run of %s: external id %q", f.Trigger, r.ExternalID)
		}
		inputs[f.Trigger+"/"+r.Type] = string(r.Input)
	}
	want := map[string]string{"all-orders/Audit": `{"by": "me", "order": {"id": 7}}`, "created/Ship": `{"id": 7}`}
	if len(inputs) != 2 || inputs["all-orders/Audit"] != want["all-orders/Audit"] || inputs["created/Ship"] != want["created/Ship"] {
		t.Fatalf("inputs %v, want %v", inputs, want)
	}
	if again, err := s.PublishedEventsFanOut(ctx, id); err != nil || !again.Done || len(again.Started) != 0 {
		t.Fatalf("second fan out: %+v %v", again, err)
	}
	if pend, err := s.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 0 {
		t.Fatalf("pending after fan-out: %v %v", pend, err)
	}
	ev, err := s.PublishedEventsGet(ctx, "ns", id)
	if err != nil || ev.FannedOutAt == nil || len(ev.Firings) != 2 || ev.Firings[0].Trigger != "all-orders" {
		t.Fatalf("event: %+v %v", ev, err)
	}
	if n := count("workflow_runs"); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	if err := s.TriggersDelete(ctx, "ns", "paid"); err != nil {
		t.Fatal(err)
	}
	if err := s.TriggersDelete(ctx, "ns", "paid"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: want ErrNotFound, got %v", err)
	}
}

// Fan-outs of one event that race start each trigger's run once.
func TestTriggersFanOutRace(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: name, Pattern: "job.*", Type: "T", Queue: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 5; round++ {
		pub, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: "job.done", Payload: []byte(`1`)})
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			started int
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := s.PublishedEventsFanOut(ctx, pub.ID)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				started += len(out.Started)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if started != 3 {
			t.Fatalf("round %d: %d runs started, want 3", round, started)
		}
	}
	var runs, firings int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM kagzi.workflow_runs), (SELECT count(*) FROM kagzi.trigger_firings)`).
		Scan(&runs, &firings); err != nil || runs != 15 || firings != 15 {
		t.Fatalf("%d runs, %d firings, want 15 each (%v)", runs, firings, err)
	}
}

// A publish notifies once (kind e, the event's id); publishing the id
// again notifies nothing.
func TestNotifyPublishedEvent(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	p := store.PublishParams{Namespace: "ns", Name: "order.created", Payload: []byte(`{}`)}
	first, err := s.PublishedEventsAdd(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	p.ID = first.ID
	if _, err := s.PublishedEventsAdd(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := untilMarker(t, s, ch)
	if len(got) != 1 || got[0].Kind != store.NotifyEvent || got[0].Namespace != "ns" || got[0].RunID != first.ID {
		t.Fatalf("notifications %+v, want one of event %s", got, first.ID)
	}
}
