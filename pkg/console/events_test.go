package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
)

// The triggers page and GET /api/v1/triggers list a created trigger with
// its filter (escaped on the page); GET /api/v1/events lists published
// events newest first, fanned out or pending, each with the run its
// trigger started (linked from the page), and pages by cursor; a bad
// limit or cursor is 400.
func TestTriggersAndEventsListed(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()
	st := e.srv.Store
	const filterText = `amount > 100 AND NOT note = '` + hostile + `'`
	if _, err := st.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "big", Pattern: "order.*", Type: "Echo",
		Queue: "default", InputPath: "order", Filter: filterText}); err != nil {
		t.Fatal(err)
	}
	publish := func(payload map[string]any) uuid.UUID {
		t.Helper()
		p, err := e.cl.Publish(ctx, "order.created", payload, client.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The reaper fans the event out; this call does it now, or waits
		// on the reaper's fan-out and finds it done.
		if _, err := st.PublishedEventsFanOut(ctx, p.EventID); err != nil {
			t.Fatal(err)
		}
		return p.EventID
	}
	small := publish(map[string]any{"amount": 5, "order": "s"})
	big := publish(map[string]any{"amount": 500, "order": "b"})

	var ts struct {
		Triggers []struct {
			Name, Event, Type, Queue, Filter string
			InputPath                        string `json:"input_path"`
		}
	}
	e.getJSON("/api/v1/triggers?ns=default", &ts)
	if len(ts.Triggers) != 1 || ts.Triggers[0].Name != "big" || ts.Triggers[0].Event != "order.*" || ts.Triggers[0].Type != "Echo" ||
		ts.Triggers[0].Filter != filterText || ts.Triggers[0].InputPath != "order" {
		t.Fatalf("triggers: %+v", ts)
	}

	type eventsAnswer struct {
		Events []struct {
			EventID uuid.UUID `json:"event_id"`
			Name    string
			State   string
			Runs    []struct {
				Trigger string
				RunID   uuid.UUID `json:"run_id"`
			}
		}
		Next string
	}
	var evs eventsAnswer
	e.getJSON("/api/v1/events?ns=default", &evs)
	if len(evs.Events) != 2 || evs.Events[0].EventID != big || evs.Events[1].EventID != small || evs.Next != "" {
		t.Fatalf("events: %+v, want %s then %s", evs, big, small)
	}
	if ev := evs.Events[1]; ev.State != "fanned_out" || len(ev.Runs) != 0 {
		t.Fatalf("the event the filter refused: %+v", ev)
	}
	ev := evs.Events[0]
	if ev.State != "fanned_out" || ev.Name != "order.created" || len(ev.Runs) != 1 || ev.Runs[0].Trigger != "big" {
		t.Fatalf("the event the filter took: %+v", ev)
	}
	run := ev.Runs[0].RunID
	if r := e.wait(run); r.ExternalID != store.TriggerExternalID("big", big) || string(r.Output) != `"b"` {
		t.Fatalf("its run: %+v, output %s", r, r.Output)
	}

	var page1, page2 eventsAnswer
	e.getJSON("/api/v1/events?ns=default&limit=1", &page1)
	if len(page1.Events) != 1 || page1.Events[0].EventID != big || page1.Next == "" {
		t.Fatalf("first page of 1: %+v", page1)
	}
	e.getJSON("/api/v1/events?ns=default&limit=1&cursor="+page1.Next, &page2)
	if len(page2.Events) != 1 || page2.Events[0].EventID != small || page2.Next != "" {
		t.Fatalf("second page of 1: %+v", page2)
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=1001", "cursor=nope"} {
		if code, body := e.do(http.MethodGet, "/api/v1/events?ns=default&"+q, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}

	code, body := e.do(http.MethodGet, "/triggers?ns=default", nil)
	page := string(body)
	if code != http.StatusOK {
		t.Fatalf("page: %d %s", code, page)
	}
	for _, want := range []string{`data-trigger="big"`, "order.*", `data-event-id="` + big.String() + `"`,
		`data-event-id="` + small.String() + `"`, "/runs/" + run.String() + "?ns=default", "fanned out", "&lt;script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, hostile) {
		t.Error("the page holds the filter's script unescaped")
	}
	if !strings.Contains(page, `href="/triggers?ns=default" class="on"`) {
		t.Error("the nav does not mark the triggers page")
	}
}
