package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/console"
)

// The queues view shows the namespace's retention and sets it; a
// read-only console refuses the change.
func TestRetention(t *testing.T) {
	e := start(t, console.Options{})
	var ret console.RetentionView
	e.getJSON("/api/v1/retention?ns=default", &ret)
	if ret.Completed.Text != "7d" || ret.Failed.Text != "30d" || ret.DefaultFailed.Seconds != 30*86400 || len(ret.Types) != 0 {
		t.Fatalf("defaults: %+v", ret)
	}
	e.post("/api/v1/retention?ns=default", map[string]any{"completed": "3d"}, http.StatusOK, &ret)
	if ret.Completed.Text != "3d" || ret.Failed.Text != "30d" {
		t.Fatalf("namespace's completed period set: %+v", ret)
	}
	e.post("/api/v1/retention?ns=default", map[string]any{"type": "Echo", "failed": "forever"}, http.StatusOK, &ret)
	if len(ret.Types) != 1 || ret.Types[0].Type != "Echo" || ret.Types[0].Failed.Seconds != 0 || ret.Types[0].Completed.Text != "3d" {
		t.Fatalf("Echo's failed period set: %+v", ret)
	}
	e.post("/api/v1/retention?ns=default", map[string]any{"completed": "soon"}, http.StatusBadRequest, nil)
	e.post("/api/v1/retention?ns=default", map[string]any{"completed": "10s"}, http.StatusBadRequest, nil)
	var qs struct {
		Retention console.RetentionView `json:"retention"`
	}
	e.getJSON("/api/v1/queues?ns=default", &qs)
	if qs.Retention.Completed.Text != "3d" {
		t.Fatalf("queues view's retention: %+v", qs.Retention)
	}
	code, body := e.do(http.MethodGet, "/queues", nil)
	if code != http.StatusOK || !strings.Contains(string(body), "Retention") || !strings.Contains(string(body), "type Echo") ||
		!strings.Contains(string(body), "retention-form") {
		t.Fatalf("queues page: %d, retention not shown:\n%s", code, body)
	}

	ro := start(t, console.Options{ReadOnly: true})
	if code, body := ro.do(http.MethodPost, "/api/v1/retention?ns=default", map[string]any{"completed": "1d"}); code != http.StatusForbidden {
		t.Fatalf("read-only set: %d %s", code, body)
	}
	if _, body := ro.do(http.MethodGet, "/queues", nil); strings.Contains(string(body), "retention-form") {
		t.Fatal("read-only queues page offers to set retention")
	}
}
