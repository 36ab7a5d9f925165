package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// apiEnv is a system with a Greet and a Hold workflow and a console (with
// NATS, which waits for results need) serving the HTTP API.
type apiEnv struct {
	*env
	console string
}

func startAPI(t *testing.T, readOnly bool) *apiEnv {
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		if err := worker.Register(w, "Greet", func(ctx workflow.Context, in struct {
			Name string `json:"name"`
		}) (string, error) {
			return "hello " + in.Name, nil
		}); err != nil {
			return err
		}
		return worker.Register(w, "Hold", func(ctx workflow.Context, _ json.RawMessage) (string, error) {
			return workflow.WaitForEvent[string](ctx, "go", 0)
		})
	}})
	c, err := console.New(console.Options{Pool: e.srv.Pool, NATS: e.nc, BasicAuth: "admin:secret", ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &apiEnv{env: e, console: srv.URL}
}

// token makes a token of namespace default and returns its secret.
func (e *apiEnv) token(t *testing.T, name string, rate int, scopes ...string) string {
	t.Helper()
	_, secret, err := e.srv.Store.APITokensCreate(context.Background(), store.APITokenParams{Namespace: "default", Name: name, Scopes: scopes, Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// call sends body (nil: none) to the API with the bearer secret ("": no
// header); it returns the status, the body and the headers.
func (e *apiEnv) call(t *testing.T, method, path, secret string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.console+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (e *apiEnv) want(t *testing.T, method, path, secret string, body []byte, code int, v any) {
	t.Helper()
	got, b, _ := e.call(t, method, path, secret, body)
	if got != code {
		t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, code)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// runsStored counts the runs of namespace default.
func (e *apiEnv) runsStored(t *testing.T) int {
	t.Helper()
	runs, _, err := e.cl.List(context.Background(), client.ListOptions{Limit: client.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// A run started over HTTP is executed by the worker and its result comes
// back to a waiting request, woken by the run's end; the run is read and
// listed by a query; an event sent over HTTP wakes a waiting run and a
// cancel ends one; a published event is stored once per event id.
func TestHTTPAPIStartWaitResult(t *testing.T) {
	t.Parallel()
	e := startAPI(t, false)
	tok := e.token(t, "ci", 0, store.APIScopes...)
	var started struct {
		RunID   string `json:"run_id"`
		Created bool   `json:"created"`
	}
	e.want(t, "POST", "/v1/runs", tok, []byte(`{"type": "Greet", "input": {"name": "ada"}}`), http.StatusCreated, &started)
	if !started.Created {
		t.Fatalf("start: %+v", started)
	}
	var res struct {
		Done bool `json:"done"`
		Run  struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		} `json:"run"`
	}
	e.want(t, "GET", "/v1/runs/"+started.RunID+"/result?timeout=60s", tok, nil, http.StatusOK, &res)
	if !res.Done || res.Run.Status != "COMPLETED" || string(res.Run.Output) != `"hello ada"` {
		t.Fatalf("result: %+v %s", res, res.Run.Output)
	}
	var page struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
	}
	e.want(t, "GET", "/v1/runs?query="+strings.ReplaceAll("type = 'Greet' AND status = 'COMPLETED'", " ", "%20"), tok, nil, http.StatusOK, &page)
	if len(page.Runs) != 1 || page.Runs[0].RunID != started.RunID {
		t.Fatalf("list: %+v", page)
	}
	e.want(t, "GET", "/v1/runs?query=nosuchfield%20=%201", tok, nil, http.StatusBadRequest, nil)
	e.want(t, "GET", "/v1/runs?limit=100000", tok, nil, http.StatusBadRequest, nil)

	// A wait that times out says so, with the run as it is.
	var hold struct {
		RunID string `json:"run_id"`
	}
	e.want(t, "POST", "/v1/runs", tok, []byte(`{"type": "Hold", "external_id": "hold-1"}`), http.StatusCreated, &hold)
	// The same external id returns the live run, 200.
	e.want(t, "POST", "/v1/runs", tok, []byte(`{"type": "Hold", "external_id": "hold-1"}`), http.StatusOK, nil)
	e.want(t, "GET", "/v1/runs/"+hold.RunID+"/result?timeout=100ms", tok, nil, http.StatusOK, &res)
	if res.Done || res.Run.Status == "COMPLETED" {
		t.Fatalf("a held run's wait: %+v", res)
	}
	e.want(t, "GET", "/v1/runs/"+hold.RunID+"/result?timeout=61s", tok, nil, http.StatusBadRequest, nil)
	e.want(t, "POST", "/v1/runs/"+hold.RunID+"/events", tok, []byte(`{"name": "go", "payload": "now"}`), http.StatusOK, nil)
	e.want(t, "GET", "/v1/runs/"+hold.RunID+"/result?timeout=60s", tok, nil, http.StatusOK, &res)
	if !res.Done || string(res.Run.Output) != `"now"` {
		t.Fatalf("the woken run: %+v %s", res, res.Run.Output)
	}
	e.want(t, "POST", "/v1/runs/"+hold.RunID+"/cancel", tok, nil, http.StatusConflict, nil)
	e.want(t, "POST", "/v1/runs", tok, []byte(`{"type": "Hold"}`), http.StatusCreated, &hold)
	e.want(t, "POST", "/v1/runs/"+hold.RunID+"/cancel", tok, nil, http.StatusOK, nil)
	e.want(t, "GET", "/v1/runs/"+hold.RunID+"/result", tok, nil, http.StatusOK, &res)
	if !res.Done || res.Run.Status != "CANCELLED" {
		t.Fatalf("the cancelled run: %+v", res)
	}
	e.want(t, "GET", "/v1/runs/0196b7d8-0000-7000-8000-000000000000", tok, nil, http.StatusNotFound, nil)

	const ev = `{"name": "order.created", "payload": {"id": 1}, "event_id": "0196b7d8-0000-7000-8000-000000000001"}`
	e.want(t, "POST", "/v1/events", tok, []byte(ev), http.StatusCreated, nil)
	e.want(t, "POST", "/v1/events", tok, []byte(ev), http.StatusOK, nil)
}

// Refusals store nothing: no token, an unknown or revoked token, a token
// without the scope or of another namespace, a malformed, unknown-field
// or oversized body; a token over its rate gets 429 with Retry-After; a
// read-only console refuses writes.
func TestHTTPAPIRefusals(t *testing.T) {
	t.Parallel()
	e := startAPI(t, false)
	start := []byte(`{"type": "Greet", "input": {"name": "ada"}}`)
	reader := e.token(t, "reader", 0, store.ScopeRunsRead)
	starter := e.token(t, "starter", 0, store.ScopeRunsStart)
	for _, c := range []struct {
		name, secret, path string
		body               []byte
		code               int
		says               string
	}{
		{"no token", "", "/v1/runs", start, http.StatusUnauthorized, "missing bearer token"},
		{"unknown token", "kzt_nosuchsecret", "/v1/runs", start, http.StatusUnauthorized, "unknown bearer token"},
		{"no scope", reader, "/v1/runs", start, http.StatusForbidden, "lacks the scope runs:start"},
		{"other namespace", starter, "/v1/runs?ns=other", start, http.StatusForbidden, `not "other"`},
		{"malformed", starter, "/v1/runs", []byte(`{"type": "Greet",`), http.StatusBadRequest, "not the JSON object"},
		{"unknown field", starter, "/v1/runs", []byte(`{"type": "Greet", "inptu": 1}`), http.StatusBadRequest, "unknown field"},
		{"no type", starter, "/v1/runs", []byte(`{"input": 1}`), http.StatusBadRequest, "workflow type is required"},
		{"bad input", starter, "/v1/runs", []byte(`{"type": "Greet", "input": "\xff"}`), http.StatusBadRequest, ""},
		{"oversized", starter, "/v1/runs", []byte(`{"type": "Greet", "input": "` + strings.Repeat("x", 5<<20) + `"}`), http.StatusRequestEntityTooLarge, "larger than 4194304 bytes"},
		{"over the payload limit", starter, "/v1/runs", []byte(`{"type": "Greet", "input": "` + strings.Repeat("x", 3<<20) + `"}`), http.StatusRequestEntityTooLarge, "payload"},
	} {
		code, body, h := e.call(t, "POST", c.path, c.secret, c.body)
		var eb struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &eb); err != nil || code != c.code || !strings.Contains(eb.Error, c.says) {
			t.Errorf("%s: %d %.200s, want %d saying %q", c.name, code, body, c.code, c.says)
		}
		if code == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
	if n := e.runsStored(t); n != 0 {
		t.Fatalf("%d runs stored by refused requests", n)
	}
	// Revoked, the token is refused.
	e.want(t, "GET", "/v1/runs", reader, nil, http.StatusOK, nil)
	if _, err := e.srv.Store.APITokensRevoke(context.Background(), "default", "reader"); err != nil {
		t.Fatal(err)
	}
	e.want(t, "GET", "/v1/runs", reader, nil, http.StatusUnauthorized, nil)

	// A token of rate 1 takes one request a second: of a quick burst, some
	// are refused with 429 and Retry-After.
	slow := e.token(t, "slow", 1, store.ScopeRunsRead)
	var limited int
	for range 20 {
		code, _, h := e.call(t, "GET", "/v1/runs", slow, nil)
		if code == http.StatusTooManyRequests {
			limited++
			if h.Get("Retry-After") != "1" {
				t.Fatalf("429 with Retry-After %q", h.Get("Retry-After"))
			}
		}
	}
	if limited == 0 {
		t.Fatal("no request of 20 at rate 1 was limited")
	}
	code, _, _ := e.call(t, "POST", "/v1/runs", starter, start)
	if code != http.StatusCreated || e.runsStored(t) != 1 {
		t.Fatalf("the first accepted start: %d, %d runs", code, e.runsStored(t))
	}
}

// A read-only console refuses the API's writes and serves its reads.
func TestHTTPAPIReadOnly(t *testing.T) {
	t.Parallel()
	e := startAPI(t, true)
	tok := e.token(t, "all", 0, store.APIScopes...)
	e.want(t, "POST", "/v1/runs", tok, []byte(`{"type": "Greet"}`), http.StatusForbidden, nil)
	e.want(t, "POST", "/v1/events", tok, []byte(`{"name": "a.b"}`), http.StatusForbidden, nil)
	e.want(t, "GET", "/v1/runs", tok, nil, http.StatusOK, nil)
	if n := e.runsStored(t); n != 0 {
		t.Fatalf("%d runs stored by a read-only console", n)
	}
}
