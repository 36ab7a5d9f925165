package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestEventSendWithStart(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	// No live run: one starts, table output.
	out := c.ok("event", "send-with-start", "--type", "Cart", "--id", "cart-9", "--input", `{"user": 5}`,
		"--event", "add", "--payload", `{"sku": "A1"}`, "--queue", "carts")
	mustContain(t, "first send-with-start", out, "Started run", `"cart-9"`, `"add"`)
	run, err := c.store().RunsGetByExternalID(context.Background(), "default", "cart-9")
	if err == nil {
		run, err = c.store().RunsGet(context.Background(), "default", run.ID)
	}
	if err != nil || run.Type != "Cart" || run.Queue != "carts" || string(run.Input) != `{"user": 5}` {
		t.Fatalf("started run: %+v %v", run, err)
	}

	// A live run: the event goes to it, JSON output.
	var v sendWithStartJSON
	c.okJSON(&v, "event", "send-with-start", "--type", "Cart", "--id", "cart-9", "--event", "add", "--payload", `{"sku": "B2"}`)
	if v.Started || v.RunID != run.ID || v.EventID == uuid.Nil || v.Name != "add" || v.RunStatus != "PENDING" ||
		compactJSONT(t, v.Payload) != `{"sku":"B2"}` {
		t.Fatalf("second send-with-start --json: %+v", v)
	}
	evs, err := c.store().EventsList(context.Background(), "default", run.ID)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events of the run: %+v %v", evs, err)
	}

	// Another type holding the id: 1, nothing stored.
	_, errOut := c.fails(cliutil.ExitFailed, "event", "send-with-start", "--type", "Order", "--id", "cart-9", "--event", "add")
	mustContain(t, "stderr", errOut, "workflow type", `"Cart"`)

	// Once the run finished, a new one starts.
	c.ok("run", "cancel", run.ID.String())
	c.okJSON(&v, "event", "send-with-start", "--type", "Cart", "--id", "cart-9", "--event", "add")
	if !v.Started || v.RunID == run.ID || string(v.Payload) != "null" {
		t.Fatalf("after the run finished: %+v", v)
	}
}

// compactJSON is b without insignificant space (--json output is indented).
func compactJSONT(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

func TestEventSendWithStartUsage(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", unreachableDB, "event", "send-with-start"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "x", "--event", "e"}, `required flag(s) "type" not set`},
		{[]string{"--type", "T", "--event", "e"}, `required flag(s) "id" not set`},
		{[]string{"--type", "T", "--id", "x"}, `required flag(s) "event" not set`},
		{[]string{"--type", "T", "--id", "x", "--event", "e", "--payload", "{"}, "--payload is not valid JSON"},
		{[]string{"--type", "T", "--id", "x", "--event", "e", "--input", "[1,"}, "--input is not valid JSON"},
		{[]string{"--type", "T", "--id", "x", "--event", "e", "--input", "-", "--payload", "-"}, "both read standard input"},
		{[]string{"--type", "T", "--id", "x", "--event", "e", "--deadline", "-1m"}, "--deadline"},
		{[]string{"--type", "", "--id", "x", "--event", "e"}, "must not be empty"},
		{[]string{"extra", "--type", "T", "--id", "x", "--event", "e"}, "unknown command"},
	} {
		args := append(append([]string{}, db...), tc.args...)
		out, errOut, code := runCLI(t, args...)
		if code != cliutil.ExitUsage {
			t.Errorf("kagzi %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, cliutil.ExitUsage, out, errOut)
			continue
		}
		mustContain(t, "stderr of kagzi "+strings.Join(tc.args, " "), errOut, tc.want)
	}
}

// `run show` lists a run's events: received (by the step that took it),
// pending while the run is live, unreceived once it ended without them.
func TestRunShowEvents(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.store()
	ctx := context.Background()
	var v sendWithStartJSON
	c.okJSON(&v, "event", "send-with-start", "--type", "Cart", "--id", "cart-1", "--event", "add", "--payload", `{"sku": "A1"}`)
	c.ok("event", "send", v.RunID.String(), "note", "--data", `"ignored"`)
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Cart"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %d", err, len(claimed))
	}
	l := store.Lease{Namespace: "default", RunID: claimed[0].ID, Token: claimed[0].LeaseToken}
	if _, err := st.EventsConsume(ctx, l, "add", "event:add"); err != nil {
		t.Fatal(err)
	}
	out := c.ok("run", "show", v.RunID.String())
	mustContain(t, "run show of a live run", out, "EVENT", "NAME", "STATE", "RECEIVED BY", "add", "RECEIVED", "event:add",
		"note", "PENDING", `"ignored"`)
	if strings.Contains(out, "UNRECEIVED") {
		t.Fatalf("a live run's pending event shown unreceived:\n%s", out)
	}

	if err := st.RunsComplete(ctx, l, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	out = c.ok("run", "show", v.RunID.String())
	mustContain(t, "run show of a finished run", out, "Events:", "1 of 2 UNRECEIVED", "UNRECEIVED")
	var shown runShowJSON
	c.okJSON(&shown, "run", "show", v.RunID.String())
	if shown.Unreceived != 1 || len(shown.Events) != 2 {
		t.Fatalf("run show --json: %d unreceived, %+v", shown.Unreceived, shown.Events)
	}
	add, note := shown.Events[0], shown.Events[1]
	if add.Name != "add" || add.State != "RECEIVED" || add.ConsumedBy != "event:add" || add.ConsumedAt == nil ||
		compactJSONT(t, add.Payload) != `{"sku":"A1"}` {
		t.Fatalf("received event: %+v", add)
	}
	if note.Name != "note" || note.State != "UNRECEIVED" || note.ConsumedBy != "" || note.ConsumedAt != nil {
		t.Fatalf("unreceived event: %+v", note)
	}
}
