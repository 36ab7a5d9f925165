package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/testnats"
)

// waitEnv is a test database with NATS and the NOTIFY relay running, so
// `run start --wait` is woken by push as in production.
func waitEnv(t *testing.T) (*cli, string) {
	t.Helper()
	c := newCLI(t)
	ns := testnats.Start(t)
	cfg, err := config.Defaults[dispatcher.Config](context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = c.url
	relay := dispatcher.NewRelay(cfg, dispatcher.RelayDeps{Retry: 50 * time.Millisecond}, ns.Connect(t), nil)
	if err := relay.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for !relay.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("relay never became leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, ns.URL()
}

// finishOne plays a worker: it claims the next run of typ and ends it with
// complete (output) or fail (error message).
func finishOne(t *testing.T, st *store.Store, typ string, output []byte, failMsg string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: typ, Version: "v1"}}, Limit: 1, Lease: time.Minute})
		if err != nil {
			t.Error(err)
			return uuid.Nil
		}
		if len(runs) == 1 {
			l := store.Lease{Namespace: "default", RunID: runs[0].ID, Token: runs[0].LeaseToken}
			if failMsg != "" {
				err = st.RunsFail(ctx, l, failMsg)
			} else {
				err = st.RunsComplete(ctx, l, output)
			}
			if err != nil {
				t.Error(err)
			}
			return runs[0].ID
		}
		if time.Now().After(deadline) {
			t.Error("no run to claim")
			return uuid.Nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunStartWait(t *testing.T) {
	t.Parallel()
	c, natsURL := waitEnv(t)
	st := c.store()

	type result struct {
		out, errOut string
		code        int
	}
	start := func(args ...string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			out, errOut, code := c.run(append([]string{"--nats-url", natsURL}, args...)...)
			ch <- result{out, errOut, code}
		}()
		return ch
	}

	// Completed: the output is printed, exit 0.
	done := start("run", "start", "Greet", "--input", `{"name": "Ada"}`, "--wait", "--timeout", "1m")
	id := finishOne(t, st, "Greet", []byte(`{"greeting": "hello Ada"}`), "")
	r := <-done
	if r.code != 0 {
		t.Fatalf("wait for completed run: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	mustContain(t, "run start --wait", r.out, id.String(), "COMPLETED", `{"greeting":"hello Ada"}`)

	// Completed, JSON.
	done = start("--json", "run", "start", "Greet", "--wait")
	id = finishOne(t, st, "Greet", []byte(`"hi"`), "")
	r = <-done
	if r.code != 0 {
		t.Fatalf("wait --json: exit %d\n%s", r.code, r.errOut)
	}
	var res startJSON
	if err := json.Unmarshal([]byte(r.out), &res); err != nil {
		t.Fatalf("decode %q: %v", r.out, err)
	}
	if res.RunID != id.String() || !res.Created || res.Run == nil || res.Run.Status != store.StatusCompleted ||
		compact(res.Run.Output) != `"hi"` {
		t.Fatalf("wait --json: %+v", res)
	}

	// Failed: the failure is reported, exit 1.
	done = start("run", "start", "Greet", "--wait")
	id = finishOne(t, st, "Greet", nil, "boom: no such person")
	r = <-done
	if r.code != cliutil.ExitFailed {
		t.Fatalf("wait for failed run: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	mustContain(t, "stderr", r.errOut, id.String(), "FAILED", "boom: no such person")

	// Timeout: exit 1, the run goes on.
	r = <-start("run", "start", "Greet", "--wait", "--timeout", "300ms")
	if r.code != cliutil.ExitFailed || !strings.Contains(r.errOut, "timed out") || !strings.Contains(r.errOut, "kagzi run show") {
		t.Fatalf("wait timeout: exit %d\n%s", r.code, r.errOut)
	}
}

func TestRunStartWaitNeedsNATS(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, errOut := c.fails(cliutil.ExitFailed, "--nats-url", "nats://127.0.0.1:1", "run", "start", "Greet", "--wait")
	mustContain(t, "stderr", errOut, "connect to NATS", "--nats-url")
	// Without --wait, NATS is not needed.
	c.ok("--nats-url", "nats://127.0.0.1:1", "run", "start", "Greet")
}
