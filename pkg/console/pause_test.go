package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/console"
)

// The run page pauses and resumes a run: the pause shows who and why,
// an event sent meanwhile waits, and the resumed run completes.
func TestRunPauseAndResume(t *testing.T) {
	e := start(t, console.Options{})
	id := e.start("Wait", `{}`)
	e.post("/api/v1/runs/"+id.String()+"/pause?ns=default", map[string]any{"reason": "checking the vendor"}, http.StatusOK, nil)
	var d console.RunDetail
	e.getJSON("/api/v1/runs/"+id.String()+"?ns=default", &d)
	if d.Paused == nil || d.Paused.By != "console" || d.Paused.Reason != "checking the vendor" {
		t.Fatalf("paused run detail: %+v", d.Paused)
	}
	_, page := e.do(http.MethodGet, "/runs/"+id.String()+"?ns=default", nil)
	if !strings.Contains(string(page), `id="btn-resume"`) || !strings.Contains(string(page), "checking the vendor") || strings.Contains(string(page), `id="btn-pause"`) {
		t.Fatalf("the run page of a paused run shows no resume button or no reason")
	}
	// The runs view marks it, in its rows and its JSON.
	var listed console.RunsPage
	e.getJSON("/api/v1/runs?ns=default", &listed)
	if len(listed.Runs) != 1 || !listed.Runs[0].Paused {
		t.Fatalf("runs listing of a paused run: %+v", listed.Runs)
	}
	if _, html := e.do(http.MethodGet, "/runs?ns=default", nil); !strings.Contains(string(html), `data-field="paused"`) {
		t.Fatal("the runs view shows no paused badge")
	}
	e.post("/api/v1/runs/"+id.String()+"/events?ns=default", map[string]any{"name": "go", "payload": `"later"`}, http.StatusOK, nil)
	e.getJSON("/api/v1/runs/"+id.String()+"?ns=default", &d)
	if d.Run.Status == "COMPLETED" || d.Paused == nil {
		t.Fatalf("a paused run went on: %s", d.Run.Status)
	}
	e.post("/api/v1/runs/"+id.String()+"/resume?ns=default", nil, http.StatusOK, nil)
	if r := e.wait(id); r.Status != "COMPLETED" || !strings.Contains(string(r.Output), "got later") {
		t.Fatalf("resumed run: %s %s", r.Status, r.Output)
	}
	var after console.RunsPage
	e.getJSON("/api/v1/runs?ns=default", &after)
	if len(after.Runs) != 1 || after.Runs[0].Paused {
		t.Fatalf("runs listing of a resumed run: %+v", after.Runs)
	}
	e.post("/api/v1/runs/"+id.String()+"/pause?ns=default", nil, http.StatusConflict, nil)
}

// The retry-step route tries a backing-off step now, with new retry
// options when given; options out of range are a 400, a run backing off
// before no step a 409.
func TestRunRetryStep(t *testing.T) {
	e := start(t, console.Options{})
	s := e.stream("")
	s.next(t, 30*time.Second, "the stream's first counts", func(ev sseEvent) bool { return ev.name == "counts" })
	id := e.start("Flaky", `{}`)
	s.next(t, 30*time.Second, "the run backing off", runEvent(id, "SLEEPING"))
	path := "/api/v1/runs/" + id.String() + "/retry-step?ns=default"
	for _, bad := range []map[string]any{
		{"max_attempts": 0},
		{"max_attempts": 10001},
		{"max_attempts": "many"},
		{"initial_interval": "soon"},
		{"max_interval": "721h"},
		{"backoff": 0.5},
	} {
		e.post(path, bad, http.StatusBadRequest, nil)
	}
	var got struct {
		Steps []string `json:"steps"`
	}
	e.post(path, map[string]any{"max_attempts": 3, "initial_interval": "10ms", "max_interval": "1s", "backoff": 1.5}, http.StatusOK, &got)
	if len(got.Steps) != 1 || got.Steps[0] != "call" {
		t.Fatalf("retry-step: %+v", got)
	}
	if r := e.wait(id); r.Status != "COMPLETED" {
		t.Fatalf("run retried now: %s", r.Status)
	}
	e.post(path, nil, http.StatusConflict, nil)
}
