package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// batchEvent matches the stream's batch event of the batch id in state
// (any state when "").
func batchEvent(id uuid.UUID, state string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		if ev.name != "batch" {
			return false
		}
		var b console.BatchEvent
		return json.Unmarshal(ev.data, &b) == nil && b.BatchID == id && (state == "" || b.State == state)
	}
}

// The batches API starts a batch by query, lists it, reads it with its
// runs, pauses, resumes and cancels it, and maps bad input as the other
// endpoints do; a batch's notices reach the event stream.
func TestBatchesAPIRoundTrip(t *testing.T) {
	e := start(t, console.Options{})
	s := e.stream("")
	s.next(t, 30*time.Second, "the stream's first counts", func(ev sseEvent) bool { return ev.name == "counts" })
	waits := []uuid.UUID{e.start("Wait", `{}`), e.start("Wait", `{}`), e.start("Wait", `{}`)}

	// Bad input.
	_, cerr := e.cl.StartBatch(context.Background(), client.BatchOptions{Action: client.BatchCancel, Query: "type = "})
	if cerr == nil {
		t.Fatal("the client started a batch with a bad query")
	}
	code, body := e.do(http.MethodPost, "/api/v1/batches?ns=default", map[string]any{"action": "cancel", "query": "type = "})
	var apiErr struct{ Error string }
	if err := json.Unmarshal(body, &apiErr); err != nil || code != http.StatusBadRequest || apiErr.Error != cerr.Error() {
		t.Fatalf("bad query: %d %s, want 400 with %q", code, body, cerr)
	}
	for name, c := range map[string]struct {
		body map[string]any
		want int
	}{
		"unknown action": {map[string]any{"action": "explode", "query": "type = 'Wait'"}, http.StatusBadRequest},
		"rate":           {map[string]any{"action": "cancel", "query": "type = 'Wait'", "rate": "fast"}, http.StatusBadRequest},
		"rate too high":  {map[string]any{"action": "cancel", "query": "type = 'Wait'", "rate": client.MaxBatchRate + 1}, http.StatusBadRequest},
		"both":           {map[string]any{"action": "cancel", "query": "type = 'Wait'", "run_ids": []string{waits[0].String()}}, http.StatusBadRequest},
		"bad run id":     {map[string]any{"action": "cancel", "run_ids": "nope"}, http.StatusBadRequest},
		"signal no name": {map[string]any{"action": "signal", "query": "type = 'Wait'"}, http.StatusBadRequest},
		"no match":       {map[string]any{"action": "cancel", "query": "type = 'NoSuchType'"}, http.StatusNotFound},
		"unknown run":    {map[string]any{"action": "cancel", "run_ids": []string{uuid.New().String()}}, http.StatusNotFound},
		"retry a live":   {map[string]any{"action": "retry", "run_ids": []string{waits[0].String()}}, http.StatusConflict},
	} {
		if code, body := e.do(http.MethodPost, "/api/v1/batches?ns=default", c.body); code != c.want || !strings.Contains(string(body), `"error"`) {
			t.Errorf("%s: %d %s, want %d", name, code, body, c.want)
		}
	}
	if code, _ := e.do(http.MethodGet, "/api/v1/batches/"+uuid.New().String()+"?ns=default", nil); code != http.StatusNotFound {
		t.Fatalf("unknown batch: %d, want 404", code)
	}
	if code, _ := e.do(http.MethodPost, "/api/v1/batches/"+uuid.New().String()+"/pause?ns=default", nil); code != http.StatusNotFound {
		t.Fatalf("pause of an unknown batch: %d, want 404", code)
	}
	if code, _ := e.do(http.MethodGet, "/api/v1/batches/nope?ns=default", nil); code != http.StatusBadRequest {
		t.Fatalf("a batch id that is not one: %d, want 400", code)
	}
	if bs, err := e.cl.ListBatches(context.Background(), 0); err != nil || len(bs) != 0 {
		t.Fatalf("refused batches were created: %v, %v", bs, err)
	}

	// By query, at one run a second: it is still acting when paused.
	var b console.BatchView
	e.post("/api/v1/batches?ns=default", map[string]any{"action": "pause", "query": "type = 'Wait'", "rate": 1, "reason": "vendor outage"},
		http.StatusOK, &b)
	if b.Action != "pause" || b.Total != 3 || b.Rate != 1 || b.Reason != "vendor outage" || b.CreatedBy != "console" || b.Query != "type = 'Wait'" {
		t.Fatalf("started batch: %+v", b)
	}
	s.next(t, 30*time.Second, "the new batch's notice", batchEvent(b.BatchID, "running"))
	e.post("/api/v1/batches/"+b.BatchID.String()+"/pause?ns=default", nil, http.StatusOK, &b)
	if b.State != "paused" {
		t.Fatalf("paused batch: %+v", b)
	}
	s.next(t, 30*time.Second, "the pause's notice", batchEvent(b.BatchID, "paused"))
	var got console.BatchView
	e.getJSON("/api/v1/batches/"+b.BatchID.String()+"?ns=default&runs=all", &got)
	if got.State != "paused" || len(got.Runs) != 3 || got.Done+got.Pending+got.Failed+got.Skipped != 3 {
		t.Fatalf("batch with all its runs: %+v", got)
	}
	for _, r := range got.Runs {
		if r.Outcome != "pending" && r.Outcome != "done" {
			t.Fatalf("run %s of the batch: outcome %q", r.RunID, r.Outcome)
		}
	}
	if code, _ := e.do(http.MethodGet, "/api/v1/batches/"+b.BatchID.String()+"?ns=default&runs=some", nil); code != http.StatusBadRequest {
		t.Fatalf("runs=some: %d, want 400", code)
	}
	e.post("/api/v1/batches/"+b.BatchID.String()+"/resume?ns=default", nil, http.StatusOK, &b)
	if b.State != "running" {
		t.Fatalf("resumed batch: %+v", b)
	}
	e.post("/api/v1/batches/"+b.BatchID.String()+"/cancel?ns=default", nil, http.StatusOK, &b)
	if b.State != "cancelled" {
		t.Fatalf("cancelled batch: %+v", b)
	}
	s.next(t, 30*time.Second, "the cancel's notice", batchEvent(b.BatchID, "cancelled"))
	// A cancelled batch cannot go on; cancelling it again changes nothing,
	// as with the client and `kagzi batch cancel`.
	e.post("/api/v1/batches/"+b.BatchID.String()+"/pause?ns=default", nil, http.StatusConflict, nil)
	e.post("/api/v1/batches/"+b.BatchID.String()+"/resume?ns=default", nil, http.StatusConflict, nil)
	e.post("/api/v1/batches/"+b.BatchID.String()+"/cancel?ns=default", nil, http.StatusOK, &b)
	if b.State != "cancelled" {
		t.Fatalf("cancelled batch, cancelled again: %+v", b)
	}

	// By ids, a resume: a run started after the pause batch is not paused
	// and is skipped, with the reason; waits[2] is resumed if the pause
	// batch reached it, else skipped too. The batch completes.
	fresh := e.start("Wait", `{}`)
	var sk console.BatchView
	e.post("/api/v1/batches?ns=default", map[string]any{"action": "resume", "run_ids": fresh.String() + ", " + waits[2].String(),
		"rate": "1000"}, http.StatusOK, &sk)
	if sk.Total != 2 || sk.Query != "" {
		t.Fatalf("batch by ids: %+v", sk)
	}
	s.next(t, 30*time.Second, "the batch's completion", batchEvent(sk.BatchID, "completed"))
	e.getJSON("/api/v1/batches/"+sk.BatchID.String()+"?ns=default&runs=skipped", &got)
	if got.State != "completed" || got.Pending != 0 || got.FinishedAt == nil || got.Done+got.Skipped != 2 || got.Skipped < 1 || len(got.Runs) != got.Skipped {
		t.Fatalf("completed batch: %+v", got)
	}
	for _, r := range got.Runs {
		if r.Outcome != "skipped" || r.Error == "" || r.ActedAt == nil {
			t.Fatalf("skipped run: %+v", r)
		}
	}
	for _, a := range []string{"pause", "resume", "cancel"} {
		e.post("/api/v1/batches/"+sk.BatchID.String()+"/"+a+"?ns=default", nil, http.StatusConflict, nil)
	}

	// The list, newest first.
	var list struct {
		Batches []console.BatchView `json:"batches"`
	}
	e.getJSON("/api/v1/batches?ns=default", &list)
	if len(list.Batches) != 2 || list.Batches[0].BatchID != sk.BatchID || list.Batches[1].BatchID != b.BatchID ||
		list.Batches[1].State != "cancelled" || list.Batches[0].State != "completed" {
		t.Fatalf("batches: %+v", list.Batches)
	}

	// The pages.
	code, page := e.do(http.MethodGet, "/batches?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(page), `data-batch-id="`+b.BatchID.String()+`"`) || !strings.Contains(string(page), `id="batch-form"`) ||
		!strings.Contains(string(page), `/batches?ns=default" class="on">Batches</a>`) {
		t.Fatalf("the batches page (%d) does not list the batches or the form", code)
	}
	code, page = e.do(http.MethodGet, "/batches/"+sk.BatchID.String()+"?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(page), `id="batch-live"`) || !strings.Contains(string(page), `id="btn-cancel" disabled`) {
		t.Fatalf("the batch page (%d) shows no progress or an enabled cancel of a completed batch", code)
	}
	if !regexp.MustCompile(`class="part skipped" style="width: (50|100)\.00%"`).Match(page) {
		t.Fatalf("the batch page's progress bar does not show %d of 2 skipped", got.Skipped)
	}
	if !strings.Contains(string(page), `href="/runs/`+got.Runs[0].RunID.String()+`?ns=default"`) || !strings.Contains(string(page), got.Runs[0].Error[:min(20, len(got.Runs[0].Error))]) {
		t.Fatalf("the batch page does not link its skipped run %s", got.Runs[0].RunID)
	}
	if code, _ := e.do(http.MethodGet, "/batches/"+uuid.New().String()+"?ns=default", nil); code != http.StatusNotFound {
		t.Fatalf("the page of an unknown batch: %d, want 404", code)
	}
}

// A batch's reason, query and errors are escaped on its pages.
func TestBatchPagesEscape(t *testing.T) {
	e := start(t, console.Options{})
	id := e.start("Wait", `{}`)
	var b console.BatchView
	e.post("/api/v1/batches?ns=default", map[string]any{"action": "terminate", "run_ids": []string{id.String()}, "reason": hostile, "rate": 1},
		http.StatusOK, &b)
	for _, path := range []string{"/batches?ns=default", "/batches/" + b.BatchID.String() + "?ns=default"} {
		code, page := e.do(http.MethodGet, path, nil)
		if code != http.StatusOK || strings.Contains(string(page), hostile) {
			t.Fatalf("%s (%d) renders the reason unescaped", path, code)
		}
	}
	code, page := e.do(http.MethodGet, "/batches/"+b.BatchID.String()+"?ns=default", nil)
	if code != http.StatusOK || !strings.Contains(string(page), "&lt;script&gt;") {
		t.Fatalf("the batch page (%d) does not show the escaped reason", code)
	}
}

// A BatchChanged on the bus reaches a browser of the namespace's event
// stream as a batch event; malformed ones are dropped.
func TestBatchChangedReachesStream(t *testing.T) {
	e := start(t, console.Options{})
	s := e.stream("")
	s.next(t, 30*time.Second, "the stream's first counts", func(ev sseEvent) bool { return ev.name == "counts" })
	subj := protocol.SubjectBatch("default")
	id := uuid.New()
	for _, bad := range [][]byte{[]byte("{"), []byte(`{"v":1,"ns":"default","state":"running"}`), []byte(`{"v":1,"ns":"default","batch_id":"` + id.String() + `","state":"running","extra":1}`)} {
		if err := e.nc.Publish(subj, bad); err != nil {
			t.Fatal(err)
		}
	}
	data, err := protocol.Encode(&protocol.BatchChanged{Namespace: "default", BatchID: id, State: "paused", Moved: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Publish(subj, data); err != nil {
		t.Fatal(err)
	}
	ev := s.next(t, 30*time.Second, "a batch event", func(ev sseEvent) bool { return ev.name == "batch" })
	var got console.BatchEvent
	if err := json.Unmarshal(ev.data, &got); err != nil || got.BatchID != id || got.State != "paused" || !got.Moved {
		t.Fatalf("first batch event: %s (%v), want the valid notice only", ev.data, err)
	}
	// Another namespace's notice goes to that namespace's browsers only.
	other, _ := protocol.Encode(&protocol.BatchChanged{Namespace: "other", BatchID: uuid.New(), State: "running"})
	_ = e.nc.Publish(protocol.SubjectBatch("other"), other)
	last, _ := protocol.Encode(&protocol.BatchChanged{Namespace: "default", BatchID: id, State: "completed"})
	_ = e.nc.Publish(subj, last)
	ev = s.next(t, 30*time.Second, "the next batch event", func(ev sseEvent) bool { return ev.name == "batch" })
	if err := json.Unmarshal(ev.data, &got); err != nil || got.BatchID != id || got.State != "completed" {
		t.Fatalf("next batch event: %s, want the default namespace's completion", ev.data)
	}
}

// The API starts set-attributes (attributes: a JSON object, or a string
// holding one, as a form sends it) and remove-attributes (attribute_names)
// batches, which the reaper applies; attributes the namespace does not
// declare are 400, a delete of a live run is 409.
func TestBatchesAPIAttributes(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()
	if err := e.cl.DeclareAttribute(ctx, "incident", client.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.DeclareAttribute(ctx, "customer", client.AttributeInt); err != nil {
		t.Fatal(err)
	}
	s := e.stream("")
	s.next(t, 30*time.Second, "the stream's first counts", func(ev sseEvent) bool { return ev.name == "counts" })
	id := e.start("Wait", `{}`)
	for name, c := range map[string]struct {
		body map[string]any
		want int
	}{
		"undeclared":     {map[string]any{"action": "set-attributes", "run_ids": id.String(), "attributes": `{"region": "eu"}`}, http.StatusBadRequest},
		"wrong kind":     {map[string]any{"action": "set-attributes", "run_ids": id.String(), "attributes": `{"customer": "x"}`}, http.StatusBadRequest},
		"not an object":  {map[string]any{"action": "set-attributes", "run_ids": id.String(), "attributes": `[1]`}, http.StatusBadRequest},
		"remove nothing": {map[string]any{"action": "remove-attributes", "run_ids": id.String()}, http.StatusBadRequest},
		"delete a live":  {map[string]any{"action": "delete", "run_ids": id.String()}, http.StatusConflict},
	} {
		if code, body := e.do(http.MethodPost, "/api/v1/batches?ns=default", c.body); code != c.want {
			t.Errorf("%s: %d %s, want %d", name, code, body, c.want)
		}
	}
	complete := func(body map[string]any) {
		t.Helper()
		var b console.BatchView
		e.post("/api/v1/batches?ns=default", body, http.StatusOK, &b)
		if b.Total != 1 || b.Action != body["action"] {
			t.Fatalf("started batch: %+v", b)
		}
		s.next(t, 30*time.Second, b.Action+" batch completes", batchEvent(b.BatchID, "completed"))
		var got console.BatchView
		e.getJSON("/api/v1/batches/"+b.BatchID.String()+"?ns=default", &got)
		if got.Done != 1 {
			t.Fatalf("%s batch: %+v", b.Action, got)
		}
	}
	complete(map[string]any{"action": "set-attributes", "run_ids": id.String(),
		"attributes": map[string]any{"incident": []string{"INC-7", "INC-8"}, "customer": 9007199254740993}})
	if got, err := e.cl.RunAttributes(ctx, id); err != nil || len(got) != 2 || got["customer"] == nil {
		t.Fatalf("attributes after the set batch: %v %v", got, err)
	}
	complete(map[string]any{"action": "set-attributes", "run_ids": id.String(), "attributes": `{"customer": 9007199254740993}`})
	if got, err := e.cl.RunAttributes(ctx, id); err != nil || got["customer"] != int64(9007199254740993) {
		t.Fatalf("a 64-bit int through a form's attributes: %v %v", got, err)
	}
	complete(map[string]any{"action": "remove-attributes", "run_ids": id.String(), "attribute_names": "incident, customer"})
	if got, err := e.cl.RunAttributes(ctx, id); err != nil || len(got) != 0 {
		t.Fatalf("attributes after the remove batch: %v %v", got, err)
	}
}
