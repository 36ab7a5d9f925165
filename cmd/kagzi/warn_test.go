package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// A start or a schedule of a type no live worker serves is accepted with
// a warning on stderr (and in --json); once a worker serves it, none.
func TestStartOfUnservedTypeWarns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, errOut, code := c.run("run", "start", "ProcesOrder", "--queue", "orders")
	if code != 0 {
		t.Fatalf("start: exit %d: %s", code, errOut)
	}
	mustContain(t, "start's stdout", out, "Started run")
	mustContain(t, "start's stderr", errOut, "Warning: no live worker serves ProcesOrder on queue orders")
	// run show says why the run waits.
	id := uuidRE.FindString(out)
	shown := c.ok("run", "show", id)
	mustContain(t, "run show", shown, "Waiting:", "no live worker serves ProcesOrder on queue orders")
	var sj runShowJSON
	c.okJSON(&sj, "run", "show", id)
	if sj.Waiting == nil || sj.Waiting.Reason != string(store.WaitNoWorker) {
		t.Fatalf("run show --json: waiting %+v", sj.Waiting)
	}
	var s startJSON
	c.okJSON(&s, "run", "start", "ProcesOrder", "--queue", "orders")
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "no live worker serves ProcesOrder") {
		t.Fatalf("--json warnings: %q", s.Warnings)
	}
	_, errOut, code = c.run("schedule", "create", "NoSuchType", "--cron", "@daily")
	if code != 0 {
		t.Fatalf("schedule create: exit %d: %s", code, errOut)
	}
	mustContain(t, "schedule create's stderr", errOut, "Warning: no live worker serves NoSuchType on queue default")

	if _, err := c.store().WorkersRegister(context.Background(), store.WorkersRegisterParams{WorkerID: uuid.New(),
		Namespace: "default", Queue: "orders", Types: []store.TypeVersion{{Type: "ProcessOrder"}}, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = c.run("run", "start", "ProcessOrder", "--queue", "orders")
	if code != 0 || strings.Contains(errOut, "Warning") {
		t.Fatalf("start of a served type: exit %d, stderr %q", code, errOut)
	}
}

// `run start --wait` says what it waits for while it waits.
func TestWaitSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	c, natsURL := waitEnv(t)
	_, errOut, code := c.run("--nats-url", natsURL, "run", "start", "ProcesOrder", "--wait", "--wait-progress", "100ms", "--timeout", "1s")
	if code == 0 {
		t.Fatal("the wait for a run nobody serves ended with exit 0")
	}
	mustContain(t, "stderr", errOut, "Waiting for run", "PENDING; no live worker serves ProcesOrder on queue default", "timed out after 1s")
}
