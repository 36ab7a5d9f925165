package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// A filter that does not parse or check is refused with ErrTriggerFilter,
// storing nothing; at fan-out, a trigger whose filter the payload does not
// match starts no run, and the event is fanned out all the same.
func TestTriggersFilter(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()

	for _, f := range []string{`amount >`, `a STARTS_WITH 1`, `vip < true`, `a = 1e999`,
		"a = '" + strings.Repeat("x", filter.MaxLength) + "'", "a = '\x1b[2J'", "a = '\x00'", "a = '\xff'"} {
		_, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: "t", Pattern: "order.*", Type: "T", Queue: "q", Filter: f})
		if !errors.Is(err, store.ErrTriggerFilter) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("filter %.30q: want ErrTriggerFilter, got %v", f, err)
		}
	}
	if ts, err := s.TriggersList(ctx, "ns"); err != nil || len(ts) != 0 {
		t.Fatalf("refused triggers stored: %v %v", ts, err)
	}

	filters := map[string]string{
		"big-usd": `amount > 100 AND currency = 'usd'`,
		"eu":      `order.region IN ('eu', 'uk')`,
		"no-note": `note IS NULL`,
		"str":     `amount = '150'`, // a string, never the number 150
		"all":     ``,
		"blank":   "  \n ",
	}
	for name, f := range filters {
		tr, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: name, Pattern: "order.*", Type: "T", Queue: "q", Filter: f})
		if err != nil || tr.Filter != strings.TrimSpace(f) {
			t.Fatalf("create %s: %+v %v", name, tr, err)
		}
	}
	ts, err := s.TriggersList(ctx, "ns")
	if err != nil || len(ts) != len(filters) {
		t.Fatalf("list: %v %v", ts, err)
	}
	for _, tr := range ts {
		if tr.Filter != strings.TrimSpace(filters[tr.Name]) {
			t.Errorf("trigger %s: filter %q, want %q", tr.Name, tr.Filter, filters[tr.Name])
		}
	}

	fired := func(payload string) []string {
		t.Helper()
		pub, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: "order.created", Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.PublishedEventsFanOut(ctx, pub.ID)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := s.PublishedEventsGet(ctx, "ns", pub.ID)
		if err != nil || ev.FannedOutAt == nil {
			t.Fatalf("event %s not fanned out: %+v %v", payload, ev, err)
		}
		var names []string
		for _, f := range out.Started {
			names = append(names, f.Trigger)
		}
		return names
	}
	for payload, want := range map[string]string{
		`{"amount": 150, "currency": "usd", "order": {"region": "eu"}}`:   "all big-usd blank eu no-note",
		`{"amount": 150, "currency": "eur", "note": "x"}`:                 "all blank",
		`{"amount": "150", "currency": "usd", "order": {"region": "us"}}`: "all blank no-note str",
		`[1, 2]`:   "all blank no-note",
		`"a text"`: "all blank no-note",
	} {
		if got := strings.Join(fired(payload), " "); got != want {
			t.Errorf("%s fired %q, want %q", payload, got, want)
		}
	}
}

// PublishedEventsList pages a namespace's events newest first, each with
// the runs it started; a bad limit or cursor is refused.
func TestPublishedEventsList(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	if _, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: "big", Pattern: "job.*", Type: "T", Queue: "q", Filter: `n > 1`}); err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for i := range 5 {
		pub, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: "job.done", Payload: []byte(`{"n": ` + string(rune('0'+i)) + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pub.ID)
	}
	if _, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "other", Name: "job.done"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:4] { // the last stays pending
		if _, err := s.PublishedEventsFanOut(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var got []store.PublishedEvent
	var after *store.Cursor
	for pages := 0; ; pages++ {
		page, next, err := s.PublishedEventsList(ctx, store.PublishedEventsListParams{Namespace: "ns", Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == nil {
			if pages != 2 {
				t.Errorf("%d pages after the first, want 2", pages)
			}
			break
		}
		after = next
	}
	if len(got) != 5 {
		t.Fatalf("listed %d events, want 5", len(got))
	}
	for i, e := range got {
		want := ids[len(ids)-1-i]
		if e.ID != want {
			t.Fatalf("event %d: %s, want %s (newest first)", i, e.ID, want)
		}
		n := len(ids) - 1 - i
		switch {
		case n == 4 && e.FannedOutAt != nil:
			t.Errorf("event %d: fanned out, want pending", n)
		case n < 4 && e.FannedOutAt == nil:
			t.Errorf("event %d: pending, want fanned out", n)
		}
		wantFirings := 0
		if n >= 2 && n < 4 {
			wantFirings = 1
		}
		if len(e.Firings) != wantFirings {
			t.Errorf("event %d: %d firings, want %d", n, len(e.Firings), wantFirings)
		} else if wantFirings == 1 && (e.Firings[0].Trigger != "big" || e.Firings[0].RunID == uuid.Nil) {
			t.Errorf("event %d: firing %+v", n, e.Firings[0])
		}
	}
	if _, _, err := s.PublishedEventsList(ctx, store.PublishedEventsListParams{Namespace: "ns", Limit: store.MaxPageSize + 1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("limit above the maximum: want ErrInvalidArgument, got %v", err)
	}
}
