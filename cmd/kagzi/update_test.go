package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// answerNext plays a worker's handler of update name: it receives the
// next request as the EVENT step eventStep and records answer as the
// answer step, and returns the request.
func answerNext(t *testing.T, st *store.Store, l store.Lease, eventStep, answerStep, answer string) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := st.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: eventStep, Attempt: 1, Name: "update.AddItem"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == store.EventReceived {
			if err := st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: answerStep, Attempt: 1, Kind: store.StepFunction,
				Status: store.StepCompleted, Output: []byte(answer)}); err != nil {
				t.Fatal(err)
			}
			return string(res.Payload)
		}
		if time.Now().After(deadline) {
			t.Fatal("no update came")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunUpdate(t *testing.T) {
	t.Parallel()
	c, natsURL := waitEnv(t)
	st := c.store()
	ctx := context.Background()
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "Cart"})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Cart", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %+v %v", runs, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: runs[0].LeaseToken}
	type result struct {
		out, errOut string
		code        int
	}
	update := func(args ...string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			out, errOut, code := c.run(append([]string{"--nats-url", natsURL, "run", "update", run.ID.String(), "AddItem"}, args...)...)
			ch <- result{out, errOut, code}
		}()
		return ch
	}

	// Answered: the result is printed, exit 0.
	done := update("--payload", `{"price": 10}`, "--timeout", "1m")
	if req := answerNext(t, st, l, "event:update.AddItem", "update:AddItem", `{"result":{"total":10}}`); req != `{"price": 10}` {
		t.Fatalf("request: %s", req)
	}
	r := <-done
	if r.code != 0 || strings.TrimSpace(r.out) != `{"total":10}` {
		t.Fatalf("answered update: exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
	// The handler's error: exit 1, with its message and type.
	done = update("--payload", `{"price": 20}`)
	answerNext(t, st, l, "event:update.AddItem#2", "update:AddItem#2", `{"error":"sold out","type":"OutOfStock"}`)
	r = <-done
	if r.code != 1 {
		t.Fatalf("failed update: exit %d, out %q", r.code, r.out)
	}
	mustContain(t, "failed update", r.errOut, "sold out", "OutOfStock", "the run goes on")
	// An error of errors.New has no type worth naming: Go's "errorString"
	// is left out.
	done = update("--payload", `{"price": 30}`)
	answerNext(t, st, l, "event:update.AddItem#3", "update:AddItem#3", `{"error":"price too high","type":"errorString"}`)
	r = <-done
	if r.code != 1 || strings.Contains(r.errOut, "errorString") || strings.Contains(r.errOut, "error type") {
		t.Fatalf("failed update with a plain error: exit %d, err %q", r.code, r.errOut)
	}
	mustContain(t, "failed update with a plain error", r.errOut, "price too high", "the run goes on")
	// Nobody answers within the timeout: exit 1, the update stays queued.
	r = <-update("--timeout", "200ms")
	if r.code != 1 {
		t.Fatalf("timed out update: exit %d", r.code)
	}
	mustContain(t, "timed out update", r.errOut, "timed out after 200ms", "stays queued")
	// Bad usage: exit 2.
	if r = <-update("--payload", "{nope"); r.code != 2 {
		t.Fatalf("bad payload: exit %d, err %q", r.code, r.errOut)
	}
	// A finished run refuses at once, an unknown one is not found: exit 1.
	if err := st.RunsComplete(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	r = <-update("--payload", "1")
	if r.code != 1 {
		t.Fatalf("finished run: exit %d", r.code)
	}
	mustContain(t, "finished run", r.errOut, "finished", "COMPLETED", "nothing was sent")
	out, errOut, code := c.run("--nats-url", natsURL, "run", "update", uuid.NewString(), "AddItem")
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("unknown run: exit %d, out %q, err %q", code, out, errOut)
	}
}
