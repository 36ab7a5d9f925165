package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Payload limits come from the database, and workers are told them: a
// step whose output is over the database's limit (below the 2 MiB default)
// fails once, non-retryably, with a clear error, in the worker before it is
// reported — it is not re-executed every time the run is recovered.
func TestPayloadLimitIsToldToWorkers(t *testing.T) {
	t.Parallel()
	calls := newCounter()
	e := start(t, opts{workers: 1, limits: &store.Settings{PayloadWarnBytes: 512 << 10, PayloadMaxBytes: 1 << 20},
		register: func(w *worker.Worker) error {
			return worker.Register(w, "Big", func(ctx workflow.Context, _ struct{}) (int, error) {
				s, err := workflow.Step(ctx, "big", func(context.Context) (string, error) {
					calls.inc("%s", ctx.RunID())
					return strings.Repeat("x", 3<<19), nil // 1.5 MiB
				})
				return len(s), err
			})
		}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Big", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed ||
		!strings.Contains(re.Message, "payload too large") || !strings.Contains(re.Message, "1048576") {
		t.Fatalf("run: %v", err)
	}
	if n := calls.snapshot()[h.RunID.String()]; n != 1 {
		t.Fatalf("the step ran %d times, want 1", n)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 1 {
		t.Fatalf("%d attempts, want 1", r.Attempts)
	}
	// The client applies the same limit to inputs.
	if _, err := e.cl.Start(ctx, "Big", strings.Repeat("y", 1<<20), client.StartOptions{}); !errors.Is(err, store.ErrPayloadTooLarge) {
		t.Fatalf("start with an input over the limit: %v", err)
	}
}

// A report the store refuses for good (here a step output over the limit,
// sent by a worker that did not check it) fails the run, once, with the
// reason; the run is not left to be recovered and refused again.
func TestRefusedReportFailsTheRunOnce(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1, limits: &store.Settings{PayloadWarnBytes: 1024, PayloadMaxBytes: 2048}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Raw", nil, client.StartOptions{Queue: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	d := askForWork(t, e.nc, "raw", protocol.TypeVersion{Type: "Raw"})
	run := d.Runs[0]
	if d.Limits.MaxBytes != 2048 || d.Limits.WarnBytes != 1024 {
		t.Fatalf("the delivery told limits %+v, want the database's", d.Limits)
	}
	big := json.RawMessage(`"` + strings.Repeat("z", 4096) + `"`)
	rep := report(t, e.nc, &protocol.Report{WorkerID: uuid.New(), Namespace: "default", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: run.RunID, LeaseToken: run.LeaseToken, StepID: "s", Attempt: 1, Output: big},
		{Kind: protocol.ReportRunCompleted, RunID: run.RunID, LeaseToken: run.LeaseToken, Output: json.RawMessage(`1`)},
	}})
	for i, r := range rep.Results {
		if r.Code != protocol.ResultInvalid {
			t.Fatalf("item %d: %s %s, want invalid", i, r.Code, r.Message)
		}
	}
	var re *client.RunError
	if _, err := result[int](t, h, 10*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed ||
		!strings.Contains(re.Message, "report refused") || !strings.Contains(re.Message, "limit is 2048") {
		t.Fatalf("run: %v", err)
	}
	if steps := e.steps(h.RunID); len(steps) != 0 {
		t.Fatalf("the refused step was recorded: %+v", steps)
	}
	// Sent again, the report finds the run ended: nothing is refused twice.
	rep = report(t, e.nc, &protocol.Report{WorkerID: uuid.New(), Namespace: "default", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: run.RunID, LeaseToken: run.LeaseToken, StepID: "s", Attempt: 1, Output: big},
	}})
	if rep.Results[0].Code != protocol.ResultInvalid {
		t.Fatalf("repeated report: %s %s", rep.Results[0].Code, rep.Results[0].Message)
	}
	if r, _ := e.cl.Get(ctx, h.RunID); r.Attempts != 1 || r.Status != client.StatusFailed {
		t.Fatalf("run %s after %d attempts", r.Status, r.Attempts)
	}
	refused := int64(0)
	for _, dsp := range e.srv.Dispatchers {
		refused += dsp.Stats().RunsRefused
	}
	if refused != 1 {
		t.Fatalf("%d runs failed for a refused report, want 1", refused)
	}
}

// askForWork sends one work request for tv on queue, as a worker would,
// and returns the delivery (acknowledged).
func askForWork(t *testing.T, nc *nats.Conn, queue string, tv protocol.TypeVersion) protocol.Delivery {
	t.Helper()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := protocol.Encode(&protocol.WorkRequest{WorkerID: uuid.New(), Namespace: "default", Queue: queue, Credits: 1,
		Types: []protocol.TypeVersion{tv}, Seq: 1, WaitMS: 10000})
	if err := nc.PublishRequest(protocol.SubjectWork("default", queue), inbox, req); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var d protocol.Delivery
	if err := protocol.Decode(msg.Data, &d); err != nil {
		t.Fatal(err)
	}
	ack, _ := protocol.Encode(&protocol.DeliveryAck{Accepted: true})
	if err := msg.Respond(ack); err != nil {
		t.Fatal(err)
	}
	return d
}

// A run whose history is larger than a NATS message — five steps of
// 1.9 MiB each, every one within the limit — is delivered and replayed:
// the delivery carries the large outputs by size and the worker fetches
// them when the replay reaches them. So does a large event payload and a
// child's large output.
//
// KAGZI_E2E_HISTORY_STEPS sets the number of large steps (default 5), to
// measure larger histories.
func TestLargeHistoryIsDeliverable(t *testing.T) {
	t.Parallel()
	const size = 1900 << 10
	nsteps := 5
	if v := os.Getenv("KAGZI_E2E_HISTORY_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KAGZI_E2E_HISTORY_STEPS %q", v)
		}
		nsteps = n
	}
	calls := newCounter()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "BigChild", func(ctx workflow.Context, _ struct{}) (string, error) {
				return strings.Repeat("c", size), nil
			}),
			worker.Register(w, "Hoard", func(ctx workflow.Context, _ struct{}) (int, error) {
				total := 0
				for i := range nsteps {
					fill := string(rune('a' + i%26))
					s, err := workflow.Step(ctx, fmt.Sprintf("chunk-%d", i), func(context.Context) (string, error) {
						calls.inc("%s/%d", ctx.RunID(), i)
						return strings.Repeat(fill, size), nil
					})
					if err != nil {
						return 0, err
					}
					if len(s) != size || s[:1] != fill {
						return 0, errors.New("a replayed output came back wrong")
					}
					total += len(s)
					// Each sleep makes the next delivery replay everything so far.
					if err := workflow.Sleep(ctx, fmt.Sprintf("nap-%d", i), time.Millisecond); err != nil {
						return 0, err
					}
				}
				ev, err := workflow.WaitForEvent[string](ctx, "big", time.Minute)
				if err != nil {
					return 0, err
				}
				child, err := workflow.Child[string](ctx, "child", "BigChild", nil)
				if err != nil {
					return 0, err
				}
				if err := workflow.Sleep(ctx, "last-nap", time.Millisecond); err != nil {
					return 0, err
				}
				return total + len(ev) + len(child), nil
			}),
		)
	}})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Hoard", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "big", strings.Repeat("e", size)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	n, err := result[int](t, h, time.Duration(60+5*nsteps)*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := (nsteps + 2) * size; n != want {
		t.Fatalf("result %d, want %d", n, want)
	}
	for k, c := range calls.snapshot() {
		if c != 1 {
			t.Fatalf("step %s ran %d times", k, c)
		}
	}
	reads := int64(0)
	for _, d := range e.srv.Dispatchers {
		reads += d.Stats().PayloadReads
	}
	if reads == 0 {
		t.Fatal("no payload was fetched: the history travelled inline")
	}
	t.Logf("history of %d bytes of step outputs replayed in full %d times, in %v; %d payload reads",
		(nsteps+2)*size, nsteps+2, time.Since(began).Round(time.Millisecond), reads)
}

// With a NATS server whose messages are smaller than the payload limit,
// workers are told the smaller limit for what they report, and a run input
// larger than one message (accepted by the database's limit) is still
// delivered: fetched in chunks.
func TestSmallNATSMessages(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, natsMaxPayload: 1 << 20, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Len", func(ctx workflow.Context, in string) (int, error) { return len(in), nil }),
			worker.Register(w, "Emit", func(ctx workflow.Context, n int) (int, error) {
				s, err := workflow.Step(ctx, "emit", func(context.Context) (string, error) { return strings.Repeat("o", n), nil })
				return len(s), err
			}),
		)
	}})
	ctx := context.Background()
	in := strings.Repeat("i", 1900<<10)
	h, err := e.cl.Start(ctx, "Len", in, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](t, h, 30*time.Second); err != nil || n != len(in) {
		t.Fatalf("input of %d bytes over 1 MiB messages: %d %v", len(in), n, err)
	}
	h, err = e.cl.Start(ctx, "Emit", 1<<20, client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var re *client.RunError
	if _, err := result[int](t, h, 30*time.Second); !errors.As(err, &re) || !strings.Contains(re.Message, "payload too large") {
		t.Fatalf("a step output larger than a message: %v", err)
	}
}

// Many runs finishing large steps at once: the worker's combined reports
// stay within the server's message size, and every run completes.
func TestCombinedReportsFitMessages(t *testing.T) {
	t.Parallel()
	const runs = 24
	var ready sync.WaitGroup
	ready.Add(runs)
	release := make(chan struct{})
	e := start(t, opts{workers: 1, concurrency: runs, register: func(w *worker.Worker) error {
		return worker.Register(w, "Heavy", func(ctx workflow.Context, _ struct{}) (int, error) {
			s, err := workflow.Step(ctx, "heavy", func(context.Context) (string, error) {
				ready.Done()
				<-release
				return strings.Repeat("h", 1<<20), nil
			})
			return len(s), err
		})
	}})
	ctx := context.Background()
	var hs []*client.Handle
	for range runs {
		h, err := e.cl.Start(ctx, "Heavy", nil, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	ready.Wait()
	close(release) // 24 MiB of outputs reported at once, over 8 MiB messages
	waitAll(t, hs, 60*time.Second)
	if s := idleStats(t, e.srv.Workers[0]); s.RunsCompleted != runs || s.RunsAbandoned != 0 {
		t.Fatalf("worker stats %+v", s)
	}
}

// A run whose step records alone do not fit in one message (thousands of
// steps on a server with small messages) cannot be delivered: it is failed
// with that reason, once, and the worker whose request it took is not left
// waiting for the request to time out — the next run reaches it at once.
func TestUndeliverableHistoryFailsClearly(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1, natsMaxPayload: 128 << 10})
	ctx := context.Background()
	st := e.srv.Store
	h, err := e.cl.Start(ctx, "Deep", nil, client.StartOptions{Queue: "deep"})
	if err != nil {
		t.Fatal(err)
	}
	// Build the history through the store, under the lease of a worker
	// that is not there (no worker serves the queue yet), then make the run
	// due again.
	cs, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "deep", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Deep"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(cs) != 1 || cs[0].ID != h.RunID {
		t.Fatalf("claim: %v %v", cs, err)
	}
	l := store.Lease{Namespace: "default", RunID: h.RunID, Token: cs[0].LeaseToken}
	const steps = 2000
	ps := make([]store.StepsRecordParams, steps)
	for i := range ps {
		ps[i] = store.StepsRecordParams{Lease: l, StepID: fmt.Sprintf("%s-%05d", strings.Repeat("s", 80), i), Attempt: 1,
			Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte(`1`)}
	}
	if errs, err := st.StepsRecordMany(ctx, ps); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("record %d steps: %v %v", steps, err, errors.Join(errs...))
	}
	due := time.Now()
	if err := st.RunsSleep(ctx, l, &due); err != nil {
		t.Fatal(err)
	}
	w := e.startWorker(worker.Config{Queue: "deep", WaitTimeout: time.Minute}, func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Deep", func(ctx workflow.Context, _ struct{}) (int, error) { return 0, nil }),
			worker.Register(w, "Next", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }),
		)
	})
	var re *client.RunError
	if _, err := result[int](t, h, 20*time.Second); !errors.As(err, &re) || re.Status != client.StatusFailed ||
		!strings.Contains(re.Message, "cannot be delivered") || !strings.Contains(re.Message, "max_payload") {
		t.Fatalf("undeliverable run: %v", err)
	}
	next, err := e.cl.Start(ctx, "Next", nil, client.StartOptions{Queue: "deep"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](t, next, 10*time.Second); err != nil || n != 1 {
		t.Fatalf("the next run (the worker's wait timeout is a minute): %d %v", n, err)
	}
	if s := idleStats(t, w); s.RunsStarted != 1 {
		t.Fatalf("worker stats %+v: the undeliverable run reached it", s)
	}
}
