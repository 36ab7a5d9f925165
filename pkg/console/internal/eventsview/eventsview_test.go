package eventsview

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// fakeStore answers with fixed events and records the parameters it got.
type fakeStore struct {
	evs  []store.PublishedEvent
	next *store.Cursor
	got  store.PublishedEventsListParams
}

func (f *fakeStore) TriggersList(context.Context, string) ([]store.Trigger, error) { return nil, nil }

func (f *fakeStore) PublishedEventsList(_ context.Context, p store.PublishedEventsListParams) ([]store.PublishedEvent, *store.Cursor, error) {
	f.got = p
	return f.evs, f.next, nil
}

// An event not fanned out is "pending" with no runs (an empty list, not
// null); a fanned-out one carries its runs; limit and cursor reach the
// store, and bad ones are ErrInvalidArgument.
func TestListEvents(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.FixedZone("x", 3600))
	run, ev1, ev2 := uuid.New(), uuid.New(), uuid.New()
	next := &store.Cursor{CreatedAt: at, ID: ev2}
	f := &fakeStore{next: next, evs: []store.PublishedEvent{
		{ID: ev1, Name: "a.b", PublishedAt: at},
		{ID: ev2, Name: "a.c", PublishedAt: at, FannedOutAt: &at, Firings: []store.TriggerFiring{{Trigger: "t", RunID: run, FiredAt: at}}},
	}}
	out, err := ListEvents(context.Background(), f, "ns", url.Values{"limit": {"7"}, "cursor": {next.String()}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.got.Namespace != "ns" || f.got.Limit != 7 || f.got.After == nil || f.got.After.String() != next.String() {
		t.Errorf("store got %+v", f.got)
	}
	if out.Next != next.String() || len(out.Events) != 2 {
		t.Fatalf("answer %+v", out)
	}
	if e := out.Events[0]; e.State != "pending" || e.FannedOutAt != nil || e.Runs == nil || len(e.Runs) != 0 {
		t.Errorf("pending event: %+v", e)
	}
	if e := out.Events[1]; e.State != "fanned_out" || e.FannedOutAt == nil || e.FannedOutAt.Location() != time.UTC ||
		len(e.Runs) != 1 || e.Runs[0].RunID != run || e.Runs[0].Trigger != "t" {
		t.Errorf("fanned-out event: %+v", e)
	}
	if _, err := ListEvents(context.Background(), f, "ns", url.Values{}, PageEvents); err != nil || f.got.Limit != PageEvents || f.got.After != nil {
		t.Errorf("defaults: %+v %v", f.got, err)
	}
	for _, q := range []url.Values{{"limit": {"0"}}, {"limit": {"-1"}}, {"limit": {"x"}}, {"cursor": {"!"}}} {
		if _, err := ListEvents(context.Background(), f, "ns", q, 0); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%v: want ErrInvalidArgument, got %v", q, err)
		}
	}
}
