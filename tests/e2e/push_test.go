package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
)

// threeSteps registers a 3-step workflow "Three" that counts step calls.
func threeSteps(c *counter) func(*worker.Worker) error {
	return func(w *worker.Worker) error {
		return worker.Register(w, "Three", func(ctx workflow.Context, in int) (int, error) {
			sum := in
			for i := 0; i < 3; i++ {
				v, err := workflow.Step(ctx, fmt.Sprintf("step-%d", i), func(context.Context) (int, error) {
					c.inc("%s/%d", ctx.RunID(), i)
					return i, nil
				})
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		})
	}
}

func TestThousandRunsTwoDispatchersThreeWorkers(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{dispatchers: 2, workers: 3, concurrency: 50, register: threeSteps(calls)})
	ctx := context.Background()
	reqs := make([]client.StartRequest, 1000)
	for i := range reqs {
		reqs[i] = client.StartRequest{Type: "Three", Input: i}
	}
	hs, err := e.cl.StartMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, hs, 2*time.Minute)
	got := calls.snapshot()
	if len(got) != 3000 {
		t.Fatalf("%d distinct (run, step) invocations, want 3000", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("step %s ran %d times", k, n)
		}
	}
	for i, h := range hs[:10] {
		var out int
		if err := h.Result(ctx, &out); err != nil || out != i+3 {
			t.Fatalf("run %d: result %d, %v; want %d", i, out, err, i+3)
		}
	}
	var claimed int64
	for _, d := range e.srv.Dispatchers {
		claimed += d.Stats().Claimed
	}
	if claimed < 1000 {
		t.Fatalf("dispatchers claimed %d runs, want at least 1000", claimed)
	}
}

// report sends a report as a worker would and returns the reply.
func report(t *testing.T, nc *nats.Conn, r *protocol.Report) protocol.ReportReply {
	t.Helper()
	data, err := protocol.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(protocol.SubjectReport(r.Namespace), data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep protocol.ReportReply
	if err := protocol.Decode(msg.Data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestStaleLeaseReportIsRejected(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{dispatchers: 1, workers: -1, register: threeSteps(calls)})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An old holder claims the run, then loses it (released as if its
	// delivery failed); a real worker then claims and completes it.
	old, err := e.srv.Store.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default",
		WorkerID: h.RunID, Types: []store.TypeVersion{{Type: "Three"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(old) != 1 {
		t.Fatalf("claim: %d %v", len(old), err)
	}
	if err := e.srv.Store.RunsRelease(ctx, store.Lease{Namespace: "default", RunID: h.RunID, Token: old[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	e.startWorker(worker.Config{}, threeSteps(calls))
	var out int
	if err := h.Result(ctx, &out); err != nil || out != 4 {
		t.Fatalf("result %d %v", out, err)
	}
	before, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// The old holder's late reports: a step and a completion.
	rep := report(t, e.nc, &protocol.Report{WorkerID: h.RunID, Namespace: "default", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: h.RunID, LeaseToken: old[0].LeaseToken, StepID: "step-0", Attempt: 2, Output: json.RawMessage(`99`)},
		{Kind: protocol.ReportRunCompleted, RunID: h.RunID, LeaseToken: old[0].LeaseToken, Output: json.RawMessage(`"clobbered"`)},
	}})
	for i, r := range rep.Results {
		if r.Code != protocol.ResultLeaseLost {
			t.Fatalf("item %d: %s %s, want lease_lost", i, r.Code, r.Message)
		}
	}
	after, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Output) != string(before.Output) || after.Status != store.StatusCompleted || after.LeaseToken != before.LeaseToken {
		t.Fatalf("stale report changed the run: before %s %s, after %s %s", before.Status, before.Output, after.Status, after.Output)
	}
	steps, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("%d step rows after a stale step report, want 3", len(steps))
	}
}

func TestRelayFailover(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{dispatchers: 2, workers: 1, register: threeSteps(calls)})
	ctx := context.Background()
	n, err := e.srv.Store.LockHolderTerminate(ctx, dispatcher.RelayLockKey)
	if err != nil || n != 1 {
		t.Fatalf("kill relay connection: %d %v", n, err)
	}
	killed := time.Now()
	// Runs started while no relay listens must still complete.
	var hs []*client.Handle
	for i := 0; i < 20; i++ {
		h, err := e.cl.Start(ctx, "Three", i, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	select {
	case <-e.relayUp:
		if took := time.Since(killed); took > 2*time.Second {
			t.Fatalf("standby relayed after %v, want within 2 s", took)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no relay took over within 2 s")
	}
	waitAll(t, hs, 30*time.Second)
}

func TestMalformedMessagesAreDropped(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{dispatchers: 1, workers: 1, register: threeSteps(calls)})
	ctx := context.Background()
	garbage := [][]byte{nil, []byte("{"), []byte(`{"v":1}`), []byte(`{"v":2,"ns":"default"}`), []byte("\x00\xff"), []byte(`[]`)}
	subjects := []string{
		protocol.SubjectWork("default", "default"), protocol.SubjectReport("default"),
		protocol.SubjectReady("default", "default"), protocol.SubjectRelayUp,
	}
	for _, s := range subjects {
		for _, g := range garbage {
			if s == protocol.SubjectWork("default", "default") || s == protocol.SubjectReport("default") {
				// Requests: the dispatcher drops them without a reply.
				if _, err := e.nc.Request(s, g, 50*time.Millisecond); err == nil {
					t.Fatalf("malformed request on %s got a reply", s)
				}
				continue
			}
			if err := e.nc.Publish(s, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A well-formed report naming another namespace than its subject's:
	// NATS permissions let a worker publish on its own namespace's subject
	// only, so it may not speak for another namespace there either.
	now := time.Now().UTC()
	foreign, err := protocol.Encode(&protocol.Report{WorkerID: uuid.New(), Namespace: "other", Items: []protocol.ReportItem{{
		Kind: protocol.ReportRunCompleted, RunID: uuid.New(), LeaseToken: 1, Output: []byte(`1`), FinishedAt: &now}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nc.Request(protocol.SubjectReport("default"), foreign, 50*time.Millisecond); err == nil {
		t.Fatal("a report of another namespace got a reply")
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The system still works, and every malformed message was counted.
	h, err := e.cl.Start(ctx, "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Result(ctx, nil); err != nil {
		t.Fatal(err)
	}
	want := int64(len(subjects)*len(garbage)) + 1
	if got := e.srv.Dispatchers[0].Stats().Malformed; got != want {
		t.Fatalf("dispatcher counted %d malformed messages, want %d", got, want)
	}
}
