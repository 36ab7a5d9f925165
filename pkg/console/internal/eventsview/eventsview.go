// Package eventsview is the console's view of event triggers
// (docs/triggers.md): the namespace's triggers and its recently published
// events, each fanned out or pending, with the runs it started. Package
// console mounts it (events.go) on the page /triggers and the routes GET
// /api/v1/triggers and GET /api/v1/events; this package reads the store
// and shapes the answers, the console renders and serves them.
package eventsview

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// Store is what the view reads: the methods of *store.Store it calls.
type Store interface {
	TriggersList(ctx context.Context, ns string) ([]store.Trigger, error)
	PublishedEventsList(ctx context.Context, p store.PublishedEventsListParams) ([]store.PublishedEvent, *store.Cursor, error)
}

// PageEvents is how many events the page shows at a time.
const PageEvents = 50

// Trigger is a trigger as the console shows it, named as `kagzi --json
// trigger list` names its fields.
type Trigger struct {
	ID        uuid.UUID `json:"trigger_id"`
	Name      string    `json:"name"`
	Event     string    `json:"event"`
	Type      string    `json:"type"`
	Queue     string    `json:"queue"`
	InputPath string    `json:"input_path,omitempty"`
	Filter    string    `json:"filter,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Event is a published event: "fanned_out", "pending" or "failed" (given
// up after its fan-out failed store.MaxFanOutAttempts times, Error the
// last failure), and the runs its triggers started.
type Event struct {
	ID          uuid.UUID  `json:"event_id"`
	Name        string     `json:"name"`
	PublishedAt time.Time  `json:"published_at"`
	State       string     `json:"state"`
	FannedOutAt *time.Time `json:"fanned_out_at"`
	Error       string     `json:"error,omitempty"`
	Runs        []Firing   `json:"runs"`
}

// Firing is a run a trigger started for an event.
type Firing struct {
	// Trigger is empty once the trigger is deleted.
	Trigger string    `json:"trigger"`
	RunID   uuid.UUID `json:"run_id"`
	FiredAt time.Time `json:"fired_at"`
}

// Triggers is the answer of GET /api/v1/triggers.
type Triggers struct {
	Triggers []Trigger `json:"triggers"`
}

// Events is the answer of GET /api/v1/events: a page, newest first, and
// the cursor of the next (empty after the last).
type Events struct {
	Events []Event `json:"events"`
	Next   string  `json:"next,omitempty"`
}

// Page is what the page /triggers shows.
type Page struct {
	Triggers
	Events
}

// ListTriggers returns the namespace's triggers by name.
func ListTriggers(ctx context.Context, st Store, ns string) (Triggers, error) {
	ts, err := st.TriggersList(ctx, ns)
	if err != nil {
		return Triggers{}, err
	}
	out := Triggers{Triggers: make([]Trigger, len(ts))}
	for i, t := range ts {
		out.Triggers[i] = Trigger{ID: t.ID, Name: t.Name, Event: t.Pattern, Type: t.Type, Queue: t.Queue,
			InputPath: t.InputPath, Filter: t.Filter, CreatedAt: t.CreatedAt.UTC()}
	}
	return out, nil
}

// ListEvents returns a page of the namespace's events, newest first: q's
// limit (1 to store.MaxPageSize, default def) and cursor (a previous
// page's next). A bad limit or cursor is store.ErrInvalidArgument.
func ListEvents(ctx context.Context, st Store, ns string, q url.Values, def int) (Events, error) {
	p := store.PublishedEventsListParams{Namespace: ns, Limit: def}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return Events{}, fmt.Errorf("%w: limit %q: give 1 to %d", store.ErrInvalidArgument, l, store.MaxPageSize)
		}
		p.Limit = n
	}
	if cur := q.Get("cursor"); cur != "" {
		c, err := store.ParseCursor(cur)
		if err != nil {
			return Events{}, err
		}
		p.After = &c
	}
	evs, next, err := st.PublishedEventsList(ctx, p)
	if err != nil {
		return Events{}, err
	}
	out := Events{Events: make([]Event, len(evs))}
	for i, e := range evs {
		v := Event{ID: e.ID, Name: e.Name, PublishedAt: e.PublishedAt.UTC(), State: "pending", Runs: []Firing{}}
		if e.FannedOutAt != nil {
			t := e.FannedOutAt.UTC()
			v.State, v.FannedOutAt = "fanned_out", &t
		}
		if e.FailedAt != nil {
			v.State, v.Error = "failed", e.FanOutError
		}
		for _, f := range e.Firings {
			v.Runs = append(v.Runs, Firing{Trigger: f.Trigger, RunID: f.RunID, FiredAt: f.FiredAt.UTC()})
		}
		out.Events[i] = v
	}
	if next != nil {
		out.Next = next.String()
	}
	return out, nil
}

// PageData is the page's data: every trigger, and a page of events.
func PageData(ctx context.Context, st Store, ns string, q url.Values) (Page, error) {
	ts, err := ListTriggers(ctx, st, ns)
	if err != nil {
		return Page{}, err
	}
	evs, err := ListEvents(ctx, st, ns, q, PageEvents)
	if err != nil {
		return Page{}, err
	}
	return Page{Triggers: ts, Events: evs}, nil
}
