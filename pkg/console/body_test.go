package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/console"
)

// A write whose body is larger than the console takes is 413 saying so,
// as JSON or as a form, not a JSON syntax error about the cut body.
func TestOversizedBodyIs413(t *testing.T) {
	e := start(t, console.Options{})
	big := strings.Repeat("x", 20<<20)
	code, body := e.do(http.MethodPost, "/api/v1/runs?ns=default", map[string]any{"type": "Echo", "input": `"` + big + `"`})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "larger than") ||
		strings.Contains(string(body), "unexpected end of JSON input") {
		t.Errorf("20 MB JSON start: %d %.300s, want 413", code, body)
	}
	form := url.Values{"type": {"Echo"}, "input": {`"` + big + `"`}}.Encode()
	req, err := http.NewRequest(http.MethodPost, e.http.URL+"/api/v1/runs?ns=default", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", e.csrf)
	resp, err := e.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("20 MB form start: %d, want 413", resp.StatusCode)
	}
	// Below the bound, a start works.
	if code, body := e.do(http.MethodPost, "/api/v1/runs?ns=default", map[string]any{"type": "Echo", "input": `"small"`}); code != http.StatusOK {
		t.Errorf("small start: %d %s", code, body)
	}
}
