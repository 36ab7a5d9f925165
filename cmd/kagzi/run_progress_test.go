package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
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
	c.fails(cliutil.ExitFailed, "run", "state", id, "never")
	c.fails(cliutil.ExitUsage, "run", "state", id, "bad#key")
	c.fails(cliutil.ExitFailed, "run", "state", uuid.NewString())

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
	c.fails(cliutil.ExitUsage, "run", "stream", id, "tokens", "--from", "-1")
}

// A stream the run never wrote to: --follow waits, saying so on stderr
// with the streams the run did write (a mistyped name is seen at once);
// without --follow, nothing is printed on stdout and stderr says why.
func TestRunStreamNeverWritten(t *testing.T) {
	t.Parallel()
	c, natsURL := waitEnv(t)
	st := c.store()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	if err := st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: protocol.StreamStepID("tokens", 1), Attempt: 1,
		Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte(`"a"`)}); err != nil {
		t.Fatal(err)
	}
	id := run.ID.String()

	out, errOut, code := c.run("run", "stream", id, "tokenz")
	if code != 0 || out != "" || !strings.Contains(errOut, `has written nothing to stream "tokenz" (its streams: "tokens")`) {
		t.Errorf("run stream of a stream never written: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	var so, se strings.Builder
	stderr := &lockedBuilder{b: &se}
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"--database-url", c.url, "--nats-url", natsURL, "run", "stream", id, "tokenz", "--follow"},
			strings.NewReader(""), &lockedBuilder{b: &so}, stderr)
	}()
	want := `Waiting for stream "tokenz" of run ` + id + `, which nothing has written to yet (its streams: "tokens")`
	for !strings.Contains(stderr.String(), want) {
		select {
		case code := <-done:
			t.Fatalf("run stream --follow exited %d before the run ended; stderr %q", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("run stream --follow says nothing while it waits; stderr %q", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := st.RunsComplete(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("run stream --follow at the run's end: exit %d; stderr %q", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("run stream --follow did not end with the run")
	}
	// The run ended: a follow ends at once, saying the stream was never written.
	_, errOut, code = c.run("--nats-url", natsURL, "run", "stream", id, "tokenz", "--follow")
	if code != 0 || !strings.Contains(errOut, "ended COMPLETED without writing to stream \"tokenz\"") {
		t.Errorf("run stream --follow of an ended run: exit %d, stderr %q", code, errOut)
	}
}
