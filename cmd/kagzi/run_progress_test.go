package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestRunStateAndStream(t *testing.T) {
	t.Parallel()
	c, natsURL := waitEnv(t)
	st := c.store()
	ctx := context.Background()
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "Gen"})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Gen", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v %v", runs, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: runs[0].LeaseToken}
	record := func(id, out string) {
		t.Helper()
		if err := st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: id, Attempt: 1, Kind: store.StepFunction,
			Status: store.StepCompleted, Output: []byte(out)}); err != nil {
			t.Fatal(err)
		}
	}
	id := run.ID.String()

	out := c.ok("run", "state", id)
	mustContain(t, "run state before any Set", out, "has set no state")
	record(protocol.StateStepID("progress", 1), `{"pct": 10}`)
	record(protocol.StateStepID("progress", 2), `{"pct": 50}`)
	record(protocol.StateStepID("phase", 1), `"train"`)
	out = c.ok("run", "state", id)
	mustContain(t, "run state", out, "KEY", "phase", `"train"`, "progress", `{"pct":50}`)
	if out := c.ok("run", "state", id, "progress"); strings.TrimSpace(out) != `{"pct":50}` {
		t.Fatalf("run state KEY: %q", out)
	}
	var states []stateJSON
	c.okJSON(&states, "run", "state", id)
	if len(states) != 2 || states[1].Key != "progress" || states[1].Version != 2 {
		t.Fatalf("run state --json: %+v", states)
	}
	c.fails(exitFailed, "run", "state", id, "never")
	c.fails(exitUsage, "run", "state", id, "bad#key")
	c.fails(exitFailed, "run", "state", uuid.NewString())

	// --follow prints the entries as they come, then exits at the run's end.
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := c.run("--nats-url", natsURL, "run", "stream", id, "tokens", "--follow")
		done <- result{out, errOut, code}
	}()
	for i := 1; i <= 11; i++ {
		record(protocol.StreamStepID("tokens", i), `"t`+strings.Repeat("x", i)+`"`)
	}
	if err := st.RunsComplete(ctx, l, []byte(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("run stream --follow: exit %d\n%s", r.code, r.errOut)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 11 || lines[0] != `"tx"` || lines[9] != `"t`+strings.Repeat("x", 10)+`"` {
		t.Fatalf("run stream --follow printed %q", lines)
	}

	out = c.ok("--json", "run", "stream", id, "tokens", "--from", "10")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var e streamEntryJSON
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &e) != nil || e.Index != 10 || e.RecordedAt == nil {
		t.Fatalf("run stream --json --from 10: %q", out)
	}
	if out := c.ok("run", "stream", id, "none"); out != "" {
		t.Fatalf("a stream never written: %q", out)
	}
	c.fails(exitUsage, "run", "stream", id, "tokens", "--from", "-1")
}
