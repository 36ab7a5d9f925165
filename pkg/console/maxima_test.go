package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/console"
)

// The console API refuses what the client refuses, with the client's
// words: a value above its maximum is a 400 saying so, not a format error.
func TestAPIMaxima(t *testing.T) {
	e := start(t, console.Options{})
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/retention?ns=default", map[string]any{"failed": "1000000d"}},
		{"/api/v1/retention?ns=default", map[string]any{"completed": "36501d"}},
		{"/api/v1/schedules?ns=default", map[string]any{"type": "Echo", "cron": "@hourly", "jitter": "9999999999h"}},
		{"/api/v1/schedules?ns=default", map[string]any{"type": "Echo", "cron": "@hourly", "jitter": "8d"}},
	} {
		code, body := e.do(http.MethodPost, tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), "above the maximum") {
			t.Errorf("POST %s %v: %d %s, want 400 saying \"above the maximum\"", tc.path, tc.body, code, body)
		}
	}
	if code, body := e.do(http.MethodGet, "/api/v1/runs?ns=default&limit=-1", nil); code != http.StatusBadRequest {
		t.Errorf("GET runs with limit -1: %d %s, want 400", code, body)
	}
}
