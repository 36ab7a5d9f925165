package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
)

type startAnswer struct {
	RunID uuid.UUID `json:"run_id"`
}

func (e *env) start(typ, input string) uuid.UUID {
	e.t.Helper()
	var a startAnswer
	e.post("/api/v1/runs?ns=default", map[string]any{"type": typ, "input": input}, http.StatusOK, &a)
	return a.RunID
}

// TestEndpoints exercises every JSON endpoint and page against the live
// engine.
func TestEndpoints(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()

	// Start, list, filter, detail.
	echo := e.start("Echo", `{"customer":"ada","amount":12}`)
	other := e.start("Echo", `{"customer":"bob","amount":3}`)
	if r := e.wait(echo); r.Status != "COMPLETED" {
		t.Fatalf("echo run: %s", r.Status)
	}
	e.wait(other)
	var page console.RunsPage
	e.getJSON("/api/v1/runs?ns=default&type=Echo", &page)
	if len(page.Runs) != 2 {
		t.Fatalf("runs: %d, want 2", len(page.Runs))
	}
	e.getJSON("/api/v1/runs?ns=default&input="+urlq(`$.customer == "ada"`), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != echo || page.Runs[0].RunID != echo {
		t.Fatalf("input filter: %+v", page.Runs)
	}
	e.getJSON("/api/v1/runs?ns=default&output="+urlq(`$.amount < 10`), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != other {
		t.Fatalf("output filter: %+v", page.Runs)
	}
	e.getJSON("/api/v1/runs?ns=default&query="+urlq(`type = 'Echo' AND external_id IS NULL AND status = 'completed'`), &page)
	if len(page.Runs) != 2 {
		t.Fatalf("query filter: %+v", page.Runs)
	}
	e.getJSON("/api/v1/runs?ns=default&query="+urlq(`type = "Nope"`), &page)
	if len(page.Runs) != 0 {
		t.Fatalf("query filter matching nothing: %+v", page.Runs)
	}
	e.getJSON("/api/v1/runs?ns=default&status=COMPLETED&limit=1", &page)
	if len(page.Runs) != 1 || page.Next == "" {
		t.Fatalf("page 1: %d runs, next %q", len(page.Runs), page.Next)
	}
	first := page.Runs[0].ID
	e.getJSON("/api/v1/runs?ns=default&status=COMPLETED&limit=1&cursor="+page.Next, &page)
	if len(page.Runs) != 1 || page.Runs[0].ID == first {
		t.Fatalf("page 2: %+v", page.Runs)
	}
	if page.Counts["COMPLETED"] != 2 {
		t.Fatalf("counts: %v", page.Counts)
	}
	var d console.RunDetail
	e.getJSON("/api/v1/runs/"+echo.String()+"?ns=default", &d)
	if d.Run.Status != "COMPLETED" || !strings.Contains(d.Output, "ada") || len(d.Attempts) != 1 || d.Attempts[0].Steps[0].StepID != "echo" {
		t.Fatalf("detail: %+v", d)
	}
	if d.TraceID != "" && !strings.HasPrefix(d.TraceURL, "http://jaeger.test/trace/"+d.TraceID) {
		t.Fatalf("trace url %q for %q", d.TraceURL, d.TraceID)
	}
	if code, _ := e.do(http.MethodGet, "/api/v1/runs/"+uuid.NewString()+"?ns=default", nil); code != http.StatusNotFound {
		t.Fatalf("missing run: %d", code)
	}

	// Send event, cancel, terminate.
	wait := e.start("Wait", `{}`)
	e.post("/api/v1/runs/"+wait.String()+"/events?ns=default", map[string]any{"name": "go", "payload": `"now"`}, http.StatusOK, nil)
	if r := e.wait(wait); r.Status != "COMPLETED" || !strings.Contains(string(r.Output), "got now") {
		t.Fatalf("event run: %s %s", r.Status, r.Output)
	}
	cancelled := e.start("Wait", `{}`)
	e.post("/api/v1/runs/"+cancelled.String()+"/cancel?ns=default", nil, http.StatusOK, nil)
	if r := e.wait(cancelled); r.Status != "CANCELLED" {
		t.Fatalf("cancelled run: %s", r.Status)
	}
	e.post("/api/v1/runs/"+cancelled.String()+"/cancel?ns=default", nil, http.StatusConflict, nil)
	term := e.start("Wait", `{}`)
	e.post("/api/v1/runs/"+term.String()+"/terminate?ns=default", map[string]any{"reason": "test"}, http.StatusOK, nil)
	if r := e.wait(term); r.Status != "CANCELLED" {
		t.Fatalf("terminated run: %s", r.Status)
	}

	// Dead letters: group, dry run, retry.
	var failed []uuid.UUID
	for range 3 {
		failed = append(failed, e.start("Fail", `{}`))
	}
	for _, id := range failed {
		if r := e.wait(id); r.Status != "FAILED" {
			t.Fatalf("fail run: %s", r.Status)
		}
	}
	var dl struct {
		Groups []console.DeadLetterView `json:"groups"`
	}
	e.getJSON("/api/v1/dead-letters?ns=default", &dl)
	if len(dl.Groups) != 1 || dl.Groups[0].Count != 3 || dl.Groups[0].Type != "Fail" || !strings.Contains(dl.Groups[0].Fingerprint, "<n>") {
		t.Fatalf("dead letters: %+v", dl.Groups)
	}
	var dry struct{ Matched int }
	e.post("/api/v1/dead-letters/retry?ns=default", map[string]any{"type": "Fail", "fingerprint": dl.Groups[0].Fingerprint, "dry_run": "true"}, http.StatusOK, &dry)
	if dry.Matched != 3 {
		t.Fatalf("dry run matched %d", dry.Matched)
	}
	var bulk struct {
		Retried int
		Results []console.RetryResult
	}
	e.post("/api/v1/dead-letters/retry?ns=default", map[string]any{"type": "Fail", "fingerprint": dl.Groups[0].Fingerprint, "limit": "2"}, http.StatusOK, &bulk)
	if bulk.Retried != 2 || len(bulk.Results) != 2 || !bulk.Results[0].OK {
		t.Fatalf("bulk retry: %+v", bulk)
	}
	left := map[uuid.UUID]bool{}
	for _, id := range failed {
		left[id] = true
	}
	for _, r := range bulk.Results {
		delete(left, r.RunID)
	}
	for id := range left {
		e.post("/api/v1/runs/"+id.String()+"/retry?ns=default", nil, http.StatusOK, nil)
	}

	// Schedules.
	var sc struct{ ID uuid.UUID }
	e.post("/api/v1/schedules?ns=default", map[string]any{"type": "Echo", "cron": "0 9 * * *", "timezone": "Asia/Kolkata", "input": `{}`,
		"overlap": "buffer-one", "jitter": "90s"}, http.StatusOK, &sc)
	var scs struct {
		Schedules []console.ScheduleView `json:"schedules"`
	}
	e.getJSON("/api/v1/schedules?ns=default", &scs)
	if len(scs.Schedules) != 1 || len(scs.Schedules[0].NextFires) != 5 || !strings.Contains(scs.Schedules[0].NextFires[0], "09:00:00 IST") ||
		scs.Schedules[0].Overlap != "buffer-one" || scs.Schedules[0].Jitter != "1m30s" {
		t.Fatalf("schedules: %+v", scs.Schedules)
	}
	e.post("/api/v1/schedules/"+sc.ID.String()+"/pause?ns=default", nil, http.StatusOK, nil)
	e.post("/api/v1/schedules/"+sc.ID.String()+"/resume?ns=default", nil, http.StatusOK, nil)
	var trig struct {
		RunID uuid.UUID `json:"run_id"`
	}
	e.post("/api/v1/schedules/"+sc.ID.String()+"/trigger?ns=default", nil, http.StatusOK, &trig)
	e.wait(trig.RunID)
	if code, body := e.do(http.MethodDelete, "/api/v1/schedules/"+sc.ID.String()+"?ns=default", nil); code != http.StatusOK {
		t.Fatalf("delete schedule: %d %s", code, body)
	}

	// Workers, queues, limits, namespaces.
	var ws struct {
		Workers []console.WorkerView `json:"workers"`
	}
	e.getJSON("/api/v1/workers?ns=default", &ws)
	if len(ws.Workers) != 1 || len(ws.Workers[0].Types) != 5 {
		t.Fatalf("workers: %+v", ws.Workers)
	}
	e.post("/api/v1/limits?ns=default", map[string]any{"queue": "default", "type": "Echo", "max": "5"}, http.StatusOK, nil)
	var qs struct {
		Limits []console.LimitView `json:"limits"`
		Queues []console.QueueView `json:"queues"`
	}
	e.getJSON("/api/v1/queues?ns=default", &qs)
	if len(qs.Limits) != 1 || qs.Limits[0].Max != 5 {
		t.Fatalf("limits: %+v", qs.Limits)
	}
	if code, body := e.do(http.MethodDelete, "/api/v1/limits?ns=default&queue=default&type=Echo", nil); code != http.StatusOK {
		t.Fatalf("delete limit: %d %s", code, body)
	}
	var drained struct{ Status string }
	e.post("/api/v1/workers/"+ws.Workers[0].ID.String()+"/drain?ns=default", nil, http.StatusOK, &drained)
	if drained.Status != "DRAINING" {
		t.Fatalf("drained worker: %q", drained.Status)
	}
	var nss struct{ Namespaces []string }
	e.getJSON("/api/v1/namespaces", &nss)
	if len(nss.Namespaces) != 1 || nss.Namespaces[0] != "default" {
		t.Fatalf("namespaces: %v", nss.Namespaces)
	}

	// Every page renders.
	for _, p := range []string{"/runs", "/runs/" + echo.String(), "/dead-letters", "/schedules", "/workers", "/queues", "/start",
		"/runs?status=FAILED&type=Fail", "/static/htmx.min.js"} {
		if code, body := e.do(http.MethodGet, p, nil); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
	}
	_ = ctx
}

func urlq(s string) string {
	r := strings.NewReplacer(" ", "%20", `"`, "%22", "$", "%24", "=", "%3D", "<", "%3C", ">", "%3E")
	return r.Replace(s)
}

// TestReadOnly: every write answers 403, reads still work.
func TestReadOnly(t *testing.T) {
	e := start(t, console.Options{ReadOnly: true})
	id := e.start2(t)
	writes := []struct{ method, path string }{
		{"POST", "/api/v1/runs"}, {"POST", "/api/v1/runs/" + id + "/cancel"}, {"POST", "/api/v1/runs/" + id + "/terminate"},
		{"POST", "/api/v1/runs/" + id + "/retry"}, {"POST", "/api/v1/runs/" + id + "/events"}, {"POST", "/api/v1/dead-letters/retry"},
		{"POST", "/api/v1/schedules"}, {"POST", "/api/v1/schedules/" + id + "/pause"}, {"POST", "/api/v1/schedules/" + id + "/trigger"},
		{"DELETE", "/api/v1/schedules/" + id}, {"POST", "/api/v1/workers/" + id + "/drain"}, {"POST", "/api/v1/limits"},
		{"DELETE", "/api/v1/limits"}, {"PUT", "/api/v1/runs"},
		{"POST", "/api/v1/runs/" + id + "/fork"}, {"POST", "/api/v1/dead-letters/fork"},
		{"POST", "/api/v1/runs/" + id + "/pause"}, {"POST", "/api/v1/runs/" + id + "/resume"},
	}
	for _, w := range writes {
		if code, body := e.do(w.method, w.path+"?ns=default", map[string]any{"type": "Echo"}); code != http.StatusForbidden {
			t.Errorf("%s %s: %d %s, want 403", w.method, w.path, code, body)
		}
	}
	// A callback, outside the guard, is a write too.
	if code, body := e.do("POST", "/callbacks/x", nil); code != http.StatusForbidden || !strings.Contains(string(body), "read-only") {
		t.Errorf("POST /callbacks/x: %d %s, want 403 read-only", code, body)
	}
	if code, body := e.do("POST", "/webhooks/x", nil); code != http.StatusForbidden || !strings.Contains(string(body), "read-only") {
		t.Errorf("POST /webhooks/x: %d %s, want 403 read-only", code, body)
	}
	var page console.RunsPage
	e.getJSON("/api/v1/runs?ns=default", &page)
	if len(page.Runs) != 1 {
		t.Fatalf("read-only list: %d runs", len(page.Runs))
	}
	_, body := e.do(http.MethodGet, "/runs/"+id, nil)
	if strings.Contains(string(body), "btn-cancel") || strings.Contains(string(body), "btn-fork") {
		t.Fatal("read-only page shows actions")
	}
}

// start2 starts an Echo run through pkg/client (the console may be read-only).
func (e *env) start2(t *testing.T) string {
	h, err := e.cl.Start(context.Background(), "Echo", map[string]int{"n": 1}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(h.RunID)
	return h.RunID.String()
}

// TestCSRF: a write without the browser's token, or from another site, is
// refused.
func TestCSRF(t *testing.T) {
	e := start(t, console.Options{})
	tok := e.csrf
	e.csrf = ""
	if code, _ := e.do(http.MethodPost, "/api/v1/runs?ns=default", map[string]any{"type": "Echo"}); code != http.StatusForbidden {
		t.Fatalf("no token: %d", code)
	}
	e.csrf = "0123456789abcdef0123456789abcdef"
	if code, _ := e.do(http.MethodPost, "/api/v1/runs?ns=default", map[string]any{"type": "Echo"}); code != http.StatusForbidden {
		t.Fatalf("wrong token: %d", code)
	}
	e.csrf = tok
	req, _ := http.NewRequest(http.MethodPost, e.http.URL+"/api/v1/runs?ns=default", strings.NewReader(`{"type":"Echo"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", tok)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := e.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Refused for where it comes from, and told so: its token is right.
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "another site") || strings.Contains(string(body), "CSRF token") {
		t.Fatalf("cross-site: %d %s", resp.StatusCode, body)
	}
	e.post("/api/v1/runs?ns=default", map[string]any{"type": "Echo"}, http.StatusOK, nil)
}

// TestAuth: basic auth and the trusted proxy header.
func TestAuth(t *testing.T) {
	e := start(t, console.Options{BasicAuth: "ops:s3cret"})
	if code, _ := e.do(http.MethodGet, "/api/v1/runs", nil); code != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, e.http.URL+"/api/v1/runs", nil)
	req.SetBasicAuth("ops", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("basic auth: %d", resp.StatusCode)
	}

	con, err := console.New(console.Options{Pool: e.srv.Pool, AuthHeader: "X-Forwarded-User"})
	if err != nil {
		t.Fatal(err)
	}
	h := con.Handler()
	rec := httptestDo(h, "/api/v1/namespaces", nil)
	if rec != http.StatusUnauthorized {
		t.Fatalf("no proxy header: %d", rec)
	}
	if rec := httptestDo(h, "/api/v1/namespaces", map[string]string{"X-Forwarded-User": "ada@example.com"}); rec != http.StatusOK {
		t.Fatalf("proxy header: %d", rec)
	}
}

// TestEscaping: a hostile input, output, error text and type name are
// shown as text, never as markup.
func TestEscaping(t *testing.T) {
	e := start(t, console.Options{})
	payload, _ := json.Marshal(map[string]string{"note": hostile})
	typed := e.start(hostileType, string(payload))
	failed := e.start("Fail", string(payload))
	e.wait(typed)
	e.wait(failed)
	for _, p := range []string{"/runs", "/runs/" + typed.String(), "/runs/" + failed.String(), "/dead-letters", "/queues",
		"/runs?type=" + urlq(hostileType)} {
		code, body := e.do(http.MethodGet, p+"?ns=default", nil)
		if strings.Contains(p, "?") {
			code, body = e.do(http.MethodGet, p+"&ns=default", nil)
		}
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		if strings.Contains(string(body), "<script>alert") || strings.Contains(string(body), "<img/src") {
			t.Fatalf("GET %s renders the payload unescaped", p)
		}
		if p != "/queues" && p != "/runs/"+typed.String() && !strings.HasPrefix(p, "/runs?") && !strings.Contains(string(body), "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("GET %s does not show the payload escaped", p)
		}
		if (p == "/runs" || p == "/runs/"+typed.String() || strings.HasPrefix(p, "/runs?")) && !strings.Contains(string(body), "&lt;img/src/onerror=alert(1)") {
			t.Fatalf("GET %s does not show the type escaped", p)
		}
	}
}

// TestLive: a run started elsewhere reaches an open stream within 500 ms;
// its completion updates the row and the counts; a reconnect with
// Last-Event-ID resumes without loss.
func TestLive(t *testing.T) {
	e := start(t, console.Options{})
	s := e.stream("")
	first := s.next(t, 5*time.Second, "initial counts", func(ev sseEvent) bool { return ev.name == "counts" })
	var c0 map[string]int64
	_ = json.Unmarshal(first.data, &c0)

	began := time.Now()
	h, err := e.cl.Start(context.Background(), "Wait", map[string]int{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.next(t, 5*time.Second, "started run", runEvent(h.RunID, ""))
	if d := time.Since(began); d > 500*time.Millisecond {
		t.Errorf("a started run reached the browser after %s, want within 500ms", d)
	}
	if _, err := e.cl.SendEvent(context.Background(), h.RunID, "go", "x"); err != nil {
		t.Fatal(err)
	}
	done := s.next(t, 10*time.Second, "completed run", runEvent(h.RunID, "COMPLETED"))
	s.next(t, 5*time.Second, "counts with the completion", func(ev sseEvent) bool {
		var c map[string]int64
		return ev.name == "counts" && json.Unmarshal(ev.data, &c) == nil && c["COMPLETED"] == c0["COMPLETED"]+1 && c["RUNNING"] == 0 && c["PENDING"] == 0
	})
	var page console.RunsPage
	e.getJSON("/api/v1/runs?ns=default", &page)
	if page.Counts["COMPLETED"] != c0["COMPLETED"]+1 {
		t.Fatalf("counts in the API: %v", page.Counts)
	}

	// Resume: events after `done` are replayed to a reconnecting browser.
	s.cancel()
	h2, err := e.cl.Start(context.Background(), "Echo", map[string]int{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(h2.RunID)
	s2 := e.stream(done.id)
	s2.next(t, 5*time.Second, "missed run after reconnect", runEvent(h2.RunID, ""))
	s3 := e.stream("999999")
	s3.next(t, 5*time.Second, "resync for an unknown event id", func(ev sseEvent) bool { return ev.name == "resync" })
}

// TestIdle: an open page costs Postgres nothing while nothing changes.
func TestIdle(t *testing.T) {
	e := start(t, console.Options{})
	s := e.stream("")
	s.next(t, 5*time.Second, "initial counts", func(ev sseEvent) bool { return ev.name == "counts" })
	// A relay that takes the lead after the page opened announces itself,
	// and the console rightly re-reads its counts then (notifications may
	// have been missed): such a window is not idle and is observed again.
	ups := make(chan struct{}, 16)
	sub, err := e.nc.Subscribe(protocol.SubjectRelayUp, func(*nats.Msg) {
		select {
		case ups <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		for len(ups) > 0 {
			<-ups
		}
		before, flushes := e.stmts.Load(), e.con.Flushes()
		time.Sleep(3 * time.Second) // the observation window itself, not a synchronisation
		if len(ups) > 0 && try < 5 {
			continue
		}
		if n := e.stmts.Load() - before; n != 0 {
			// A resync (a relay or reconnect announced before this test
			// listened) re-reads the baseline and then tells the page so:
			// such a window is observed again too.
			if try < 5 && resynced(s, time.Second) {
				continue
			}
			t.Fatalf("%d statements in 3 idle seconds with a page open", n)
		}
		if f := e.con.Flushes() - flushes; f != 0 {
			t.Fatalf("%d hub reads while idle", f)
		}
		return
	}
}

// resynced reports whether the stream carries a resync event within d.
func resynced(s *sse, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return false
			}
			if ev.name == "resync" {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestLiveWithNATSAuth: with NATS authorization on, the console, as its
// role, still sees runs start and finish, and may ask a worker to drain;
// it breaks no permission.
func TestLiveWithNATSAuth(t *testing.T) {
	errs := make(chan error, 16)
	e := startWith(t, console.Options{}, errs)
	s := e.stream("")
	s.next(t, 5*time.Second, "initial counts", func(ev sseEvent) bool { return ev.name == "counts" })
	h, err := e.cl.Start(context.Background(), "Echo", map[string]int{"n": 1}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.next(t, 10*time.Second, "completed run", runEvent(h.RunID, "COMPLETED"))
	var ws struct {
		Workers []console.WorkerView `json:"workers"`
	}
	e.getJSON("/api/v1/workers?ns=default", &ws)
	if len(ws.Workers) != 1 {
		t.Fatalf("workers: %+v", ws.Workers)
	}
	e.post("/api/v1/workers/"+ws.Workers[0].ID.String()+"/drain?ns=default", nil, http.StatusOK, nil)
	select {
	case err := <-errs:
		t.Fatalf("the console broke a NATS permission: %v", err)
	default:
	}
}

// TestForks: forking a run from a step and from the start, its links on
// both pages, and forking a dead-letter group, each once.
func TestForks(t *testing.T) {
	e := start(t, console.Options{})
	var failed []uuid.UUID
	for range 3 {
		failed = append(failed, e.start("Fail", `{}`))
	}
	for _, id := range failed {
		if r := e.wait(id); r.Status != "FAILED" {
			t.Fatalf("fail run: %s", r.Status)
		}
	}
	until := time.Now().UTC().Format(time.RFC3339Nano)
	old := failed[0]

	var f, again console.ForkAnswer
	e.post("/api/v1/runs/"+old.String()+"/fork?ns=default", map[string]any{"step": "boom"}, http.StatusOK, &f)
	if !f.Created || f.ForkedFrom != old || f.Step != "boom" || f.RunID == old {
		t.Fatalf("fork: %+v", f)
	}
	e.post("/api/v1/runs/"+old.String()+"/fork?ns=default", map[string]any{"step": "boom"}, http.StatusOK, &again)
	if again.Created || again.RunID != f.RunID {
		t.Fatalf("fork again: %+v", again)
	}
	var start console.ForkAnswer
	e.post("/api/v1/runs/"+old.String()+"/fork?ns=default", nil, http.StatusOK, &start)
	if !start.Created || start.Step != "" {
		t.Fatalf("fork from start: %+v", start)
	}
	e.post("/api/v1/runs/"+old.String()+"/fork?ns=default", map[string]any{"step": "nope"}, http.StatusBadRequest, nil)
	e.post("/api/v1/runs/"+uuid.NewString()+"/fork?ns=default", nil, http.StatusNotFound, nil)

	var d console.RunDetail
	e.getJSON("/api/v1/runs/"+f.RunID.String()+"?ns=default", &d)
	if d.ForkedFrom == nil || *d.ForkedFrom != old || d.ForkedAtStep != "boom" {
		t.Fatalf("fork detail: %+v", d)
	}
	d = console.RunDetail{}
	e.getJSON("/api/v1/runs/"+old.String()+"?ns=default", &d)
	if d.ForkedFrom != nil || len(d.Forks) != 2 || d.Forks[0].RunID != f.RunID || d.Forks[1].Step != "" || d.Run.Status != "FAILED" {
		t.Fatalf("old detail: %+v", d)
	}
	_, page := e.do(http.MethodGet, "/runs/"+old.String()+"?ns=default", nil)
	for _, want := range []string{`class="btn-fork"`, `name="step" value="boom"`, "btn-fork-start", `id="forks"`, f.RunID.String()} {
		if !strings.Contains(string(page), want) {
			t.Errorf("old run page lacks %q", want)
		}
	}
	_, page = e.do(http.MethodGet, "/runs/"+f.RunID.String()+"?ns=default", nil)
	if !strings.Contains(string(page), `id="forked-from"`) || !strings.Contains(string(page), "at step boom") {
		t.Errorf("fork page lacks its origin:\n%s", page)
	}
	_, page = e.do(http.MethodGet, "/dead-letters?ns=default", nil)
	if !strings.Contains(string(page), "/api/v1/dead-letters/fork") {
		t.Error("dead-letters page has no fork action")
	}

	// The group, twice: the runs that finished before until are forked
	// once each (the first was forked from its failed step above).
	var dl struct {
		Groups []console.DeadLetterView `json:"groups"`
	}
	e.getJSON("/api/v1/dead-letters?ns=default", &dl)
	if len(dl.Groups) == 0 {
		t.Fatal("no dead-letter group")
	}
	type bulk struct {
		Matched       int                  `json:"matched"`
		Forked        int                  `json:"forked"`
		AlreadyForked int                  `json:"already_forked"`
		Forks         []console.ForkAnswer `json:"forks"`
	}
	body := map[string]any{"type": "Fail", "fingerprint": dl.Groups[0].Fingerprint, "until": until}
	var b bulk
	e.post("/api/v1/dead-letters/fork?ns=default", body, http.StatusOK, &b)
	if b.Matched != 3 || b.Forked != 2 || b.AlreadyForked != 1 || len(b.Forks) != 3 {
		t.Fatalf("bulk fork: %+v", b)
	}
	for _, fk := range b.Forks {
		if fk.Step != "boom" {
			t.Fatalf("bulk fork %+v", fk)
		}
	}
	e.post("/api/v1/dead-letters/fork?ns=default", body, http.StatusOK, &b)
	if b.Matched != 3 || b.Forked != 0 || b.AlreadyForked != 3 {
		t.Fatalf("bulk fork again: %+v", b)
	}
	e.post("/api/v1/dead-letters/fork?ns=default", map[string]any{"limit": "0"}, http.StatusBadRequest, nil)
}

// TestUnreceivedEvents: the run page and its API mark an event the run
// ended without receiving, and show a received one with its step.
func TestUnreceivedEvents(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Wait", map[string]int{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "note", "ignored"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "go", "now"); err != nil {
		t.Fatal(err)
	}
	e.wait(h.RunID)
	var d console.RunDetail
	e.getJSON("/api/v1/runs/"+h.RunID.String()+"?ns=default", &d)
	got := map[string]console.EventView{}
	for _, ev := range d.Events {
		got[ev.Name] = ev
	}
	if ev := got["note"]; !ev.Unreceived || ev.ConsumedAt != nil {
		t.Fatalf("ignored event: %+v", ev)
	}
	if ev := got["go"]; ev.Unreceived || ev.ConsumedBy != "event:go" {
		t.Fatalf("received event: %+v", ev)
	}
	code, body := e.do(http.MethodGet, "/runs/"+h.RunID.String()+"?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(body), ">unreceived</span>") || !strings.Contains(string(body), "by event:go") {
		t.Fatalf("run page: %d, unreceived shown %v", code, strings.Contains(string(body), "unreceived"))
	}
}
