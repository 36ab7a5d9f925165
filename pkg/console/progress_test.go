package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// progressStream opens a run's progress event stream.
func (e *env) progressStream(id uuid.UUID) *sse {
	e.t.Helper()
	return e.openSSE("/api/v1/runs/"+id.String()+"/progress?ns=default", http.Header{"Accept": {"text/event-stream"}})
}

func TestRunProgress(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()
	st := e.srv.Store
	// A run of a type no worker serves, which the test records for.
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "Gen"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Gen", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: claimed[0].LeaseToken}
	record := func(id, out string) {
		t.Helper()
		if err := st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: id, Attempt: 1, Kind: store.StepFunction,
			Status: store.StepCompleted, Output: []byte(out)}); err != nil {
			t.Fatal(err)
		}
	}
	record(protocol.StateStepID("progress", 1), `10`)
	record(protocol.StreamStepID("tokens", 1), `"<b>hi</b>"`)

	// The run page has the panel the browser fills.
	code, page := e.do(http.MethodGet, "/runs/"+run.ID.String()+"?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(page), `id="run-progress"`) ||
		!strings.Contains(string(page), "/api/v1/runs/"+run.ID.String()+"/progress") {
		t.Fatalf("run page: %d, no progress panel", code)
	}

	s := e.progressStream(run.ID)
	isEntry := func(stream string, index int, value string) func(sseEvent) bool {
		return func(ev sseEvent) bool {
			var en console.StreamEntryView
			return ev.name == "entry" && json.Unmarshal(ev.data, &en) == nil && en.Stream == stream && en.Index == index &&
				string(en.Value) == value
		}
	}
	ev := s.next(t, 10*time.Second, "the state", func(ev sseEvent) bool { return ev.name == "state" })
	var state []console.StateView
	if err := json.Unmarshal(ev.data, &state); err != nil || len(state) != 1 || state[0].Key != "progress" ||
		state[0].Version != 1 || string(state[0].Value) != "10" {
		t.Fatalf("state event: %s %v", ev.data, err)
	}
	s.next(t, 10*time.Second, "the first entry", isEntry("tokens", 1, `"\u003cb\u003ehi\u003c/b\u003e"`))

	// Written after the page follows the run: pushed.
	record(protocol.StreamStepID("tokens", 2), `"more"`)
	s.next(t, 10*time.Second, "an entry written later", isEntry("tokens", 2, `"more"`))
	record(protocol.StateStepID("progress", 2), `20`)
	ev = s.next(t, 10*time.Second, "the new state", func(ev sseEvent) bool { return ev.name == "state" })
	if err := json.Unmarshal(ev.data, &state); err != nil || state[0].Version != 2 {
		t.Fatalf("second state event: %s %v", ev.data, err)
	}
	record(protocol.StreamEndStepID("tokens"), `{}`)
	s.next(t, 10*time.Second, "the close", func(ev sseEvent) bool {
		return ev.name == "end" && strings.Contains(string(ev.data), `"tokens"`)
	})
	if err := st.RunsComplete(ctx, l, []byte(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	s.next(t, 10*time.Second, "the run's end", func(ev sseEvent) bool {
		return ev.name == "done" && strings.Contains(string(ev.data), "COMPLETED")
	})

	// Without an event stream: JSON.
	var pv console.ProgressView
	e.getJSON("/api/v1/runs/"+run.ID.String()+"/progress?ns=default", &pv)
	if pv.Status != "COMPLETED" || len(pv.State) != 1 || pv.State[0].Version != 2 || len(pv.Streams) != 1 ||
		pv.Streams[0] != (console.StreamView{Name: "tokens", Entries: 2, Last: 2, Closed: true}) {
		t.Fatalf("progress JSON: %+v", pv)
	}
	if code, _ := e.do(http.MethodGet, "/api/v1/runs/"+uuid.NewString()+"/progress?ns=default", nil); code != http.StatusNotFound {
		t.Fatalf("unknown run: %d", code)
	}
}
