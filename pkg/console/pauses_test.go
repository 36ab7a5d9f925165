package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/console"
)

// The queues page pauses and resumes a queue or a workflow type, lists
// what is paused with who paused it and why, and refuses an unknown kind.
func TestQueuesPagePausesQueuesAndTypes(t *testing.T) {
	t.Parallel()
	e := start(t, console.Options{})
	type paused struct {
		Paused []console.PausedScopeView `json:"paused"`
	}
	var got struct {
		Paused        console.PausedScopeView `json:"paused"`
		AlreadyPaused bool                    `json:"already_paused"`
	}
	e.post("/api/v1/pauses?ns=default", map[string]any{"kind": "queue", "name": "default", "reason": "database maintenance"}, http.StatusOK, &got)
	if got.Paused.Kind != "queue" || got.Paused.Name != "default" || got.Paused.Reason != "database maintenance" || got.Paused.By == "" || got.AlreadyPaused {
		t.Fatalf("pause queue: %+v", got)
	}
	e.post("/api/v1/pauses?ns=default", map[string]any{"kind": "type", "name": "Echo"}, http.StatusOK, nil)
	e.post("/api/v1/pauses?ns=default", map[string]any{"kind": "type", "name": "Echo"}, http.StatusOK, &got)
	if !got.AlreadyPaused {
		t.Fatalf("a second pause of Echo: %+v, want already paused", got)
	}
	e.post("/api/v1/pauses?ns=default", map[string]any{"kind": "namespace", "name": "default"}, http.StatusBadRequest, nil)

	var qs paused
	e.getJSON("/api/v1/queues?ns=default", &qs)
	if len(qs.Paused) != 2 || qs.Paused[0].Kind != "queue" || qs.Paused[1].Kind != "type" || qs.Paused[1].Name != "Echo" {
		t.Fatalf("paused: %+v", qs.Paused)
	}
	code, body := e.do(http.MethodGet, "/queues?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `data-paused="queue/default"`) || !strings.Contains(string(body), "database maintenance") {
		t.Fatalf("the queues page does not list the paused queue (%d)", code)
	}
	// The client sees the same pauses.
	if ps, err := e.cl.ListPaused(context.Background()); err != nil || len(ps) != 2 {
		t.Fatalf("ListPaused: %v, %v", ps, err)
	}

	for _, q := range []string{"kind=queue&name=default", "kind=type&name=Echo"} {
		if code, body := e.do(http.MethodDelete, "/api/v1/pauses?ns=default&"+q, nil); code != http.StatusOK {
			t.Fatalf("resume %s: %d %s", q, code, body)
		}
	}
	if code, _ := e.do(http.MethodDelete, "/api/v1/pauses?ns=default&kind=queue&name=default", nil); code != http.StatusNotFound {
		t.Fatalf("resume of a queue not paused: %d, want 404", code)
	}
	e.getJSON("/api/v1/queues?ns=default", &qs)
	if len(qs.Paused) != 0 {
		t.Fatalf("paused after resuming both: %+v", qs.Paused)
	}
}
