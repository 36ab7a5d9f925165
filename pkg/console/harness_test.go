package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/console/internal/consoletest"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/devserver"
)

// hostile is a payload and error text, hostileType a type name (which may
// not hold '>'), that would run script if rendered unescaped.
const (
	hostile     = `<script>alert(1)</script>`
	hostileType = `<img/src/onerror=alert(1)`
)

// register adds the test workflows: Echo returns its input, Fail fails
// for good with a hostile error, Wait waits for the event "go", and the
// hostile type name echoes its input; Flaky's step fails once.
func register(w *worker.Worker) error {
	echo := func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		return workflow.Step(ctx, "echo", func(context.Context) (json.RawMessage, error) { return in, nil })
	}
	if err := worker.Register(w, "Echo", echo); err != nil {
		return err
	}
	if err := worker.Register(w, hostileType, echo); err != nil {
		return err
	}
	if err := worker.Register(w, "Fail", func(ctx workflow.Context, in json.RawMessage) (int, error) {
		return workflow.Step(ctx, "boom", func(context.Context) (int, error) {
			return 0, workflow.NonRetryable(errors.New("order 42 failed: " + hostile))
		})
	}); err != nil {
		return err
	}
	// Flaky's step fails its first attempt and backs off an hour.
	if err := worker.Register(w, "Flaky", func(ctx workflow.Context, in json.RawMessage) (int, error) {
		return workflow.Step(ctx, "call", func(ctx context.Context) (int, error) {
			if info, _ := workflow.StepInfoFrom(ctx); info.Attempt == 1 {
				return 0, errors.New("vendor down")
			}
			return 7, nil
		}, workflow.WithRetry(retry.Policy{MaxAttempts: 2, InitialInterval: time.Hour}))
	}); err != nil {
		return err
	}
	return worker.Register(w, "Wait", func(ctx workflow.Context, in json.RawMessage) (string, error) {
		v, err := workflow.WaitForEvent[string](ctx, "go", 0)
		return "got " + v, err
	})
}

type env struct {
	t     *testing.T
	srv   *devserver.Server
	cl    *client.Client
	con   *console.Console
	http  *httptest.Server
	stmts *stmtcount.Counter
	nc    *nats.Conn // the console's connection
	web   *http.Client
	csrf  string
}

// start runs the engine (dispatcher with relay, scheduler, reaper, one
// worker) on a database and NATS server of the test's own, and a console
// in front of it; its statements are counted apart.
func start(t *testing.T, opts console.Options) *env { return startWith(t, opts, nil) }

// startWith is start; with natsErrs set, NATS authorization is on (the
// users and permissions of `kagzi nats-config`), every process connects
// as its role, and the console's NATS errors (permission violations) go
// to natsErrs.
func startWith(t *testing.T, opts console.Options, natsErrs chan error) *env {
	t.Helper()
	if opts.TraceURL == "" {
		opts.TraceURL = "http://jaeger.test/trace/{trace_id}"
	}
	c := consoletest.Start(t, opts, register, natsErrs)
	e := &env{t: t, srv: c.Srv, cl: c.Cl, con: c.Con, http: c.HTTP, stmts: c.Stmts, nc: c.NC}
	jar, _ := cookiejar.New(nil)
	e.web = &http.Client{Jar: jar, Timeout: 30 * time.Second}
	if opts.BasicAuth == "" && opts.AuthHeader == "" {
		var tok struct{ Token string }
		e.getJSON("/api/v1/csrf", &tok)
		e.csrf = tok.Token
	}
	return e
}

func (e *env) do(method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.csrf != "" {
		req.Header.Set("X-CSRF-Token", e.csrf)
	}
	resp, err := e.web.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// getJSON GETs path, wants 200 and decodes the JSON into v.
func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	code, data := e.do(http.MethodGet, path, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, data)
	}
}

// post POSTs a JSON body, wants want and decodes the answer into v (if set).
func (e *env) post(path string, body any, want int, v any) {
	e.t.Helper()
	code, data := e.do(http.MethodPost, path, body)
	if code != want {
		e.t.Fatalf("POST %s: %d %s, want %d", path, code, data, want)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			e.t.Fatalf("POST %s: %v in %s", path, err, data)
		}
	}
}

// sse is one open event stream.
type sse struct {
	events chan sseEvent
	cancel context.CancelFunc
}

type sseEvent struct {
	id, name string
	data     []byte
}

func (e *env) stream(lastID string) *sse {
	e.t.Helper()
	h := http.Header{}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	return e.openSSE("/api/v1/stream?ns=default", h)
}

// openSSE opens the event stream at path with the header h and reads its
// events until the test ends.
func (e *env) openSSE(path string, h http.Header) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Jar: e.web.Jar}).Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		e.t.Fatalf("stream %s: %d", path, resp.StatusCode)
	}
	s := &sse{events: make(chan sseEvent, 1024), cancel: cancel}
	e.t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = []byte(line[6:])
			}
		}
	}()
	return s
}

// next returns the first event for which match is true, failing after
// within.
func (s *sse) next(t *testing.T, within time.Duration, what string, match func(sseEvent) bool) sseEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream closed while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within %s", what, within)
		}
	}
}

func runEvent(id fmt.Stringer, status string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		if ev.name != "run" {
			return false
		}
		var r console.RunView
		return json.Unmarshal(ev.data, &r) == nil && r.ID.String() == id.String() && (status == "" || r.Status == status)
	}
}

// wait waits by push (client.Wait) until the run is finished.
func (e *env) wait(id uuid.UUID) *client.Run {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := e.cl.Wait(ctx, id)
	if err != nil {
		e.t.Fatalf("wait %s: %v", id, err)
	}
	return r
}

func httptestDo(h http.Handler, path string, headers map[string]string) int {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}
