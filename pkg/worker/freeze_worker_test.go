package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A test cannot SIGSTOP its own process, so these tests replace the
// worker's pulse (w.stalled) with stalls they declare; the pulse itself
// is internal/lifecycle's and tested there.

// stalls is a pulse whose one stall the test sets.
type stalls struct {
	mu  sync.Mutex
	end time.Time
	len time.Duration
}

// stall declares a stall of d that ended now.
func (s *stalls) stall(d time.Duration) {
	s.mu.Lock()
	s.end, s.len = time.Now(), d
	s.mu.Unlock()
}

// stalledSince is lifecycle.Pulse.StalledSince for the declared stall.
func (s *stalls) stalledSince(since time.Time, max time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.len > max && s.end.After(since)
}

// frozenRig is a worker with declared stalls, over a real NATS server,
// and the dispatcher's side of its requests, deliveries and reports.
type frozenRig struct {
	w        *Worker
	nc       *nats.Conn
	stalls   *stalls
	requests chan *nats.Msg
	done     chan uuid.UUID // runs reported completed
	steps    sync.Map       // run id → *atomic.Int32: step bodies run
}

func startFrozenRig(t *testing.T, cfg Config) *frozenRig {
	t.Helper()
	s := testnats.Start(t)
	r := &frozenRig{nc: s.Connect(t), stalls: &stalls{}, requests: make(chan *nats.Msg, 100), done: make(chan uuid.UUID, 100)}
	if _, err := r.nc.ChanSubscribe(protocol.SubjectWorkAll, r.requests); err != nil {
		t.Fatal(err)
	}
	_, err := r.nc.Subscribe(protocol.SubjectReportAll, func(m *nats.Msg) {
		var rep protocol.Report
		if err := protocol.Decode(m.Data, &rep); err != nil {
			t.Errorf("bad report: %v", err)
			return
		}
		reply := protocol.ReportReply{}
		for _, it := range rep.Items {
			if it.Kind == protocol.ReportRunCompleted {
				r.done <- it.RunID
			}
			reply.Results = append(reply.Results, protocol.ReportResult{Code: protocol.ResultOK})
		}
		data, _ := protocol.Encode(&reply)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.DrainTimeout = 200 * time.Millisecond
	w, err := New(cfg, s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	w.stalled = r.stalls.stalledSince
	err = Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.Step(ctx, "s", func(context.Context) (int, error) {
			n, _ := r.steps.LoadOrStore(ctx.RunID(), new(atomic.Int32))
			return int(n.(*atomic.Int32).Add(1)), nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r.w = w
	return r
}

// nextRequest returns the next work request, within.
func (r *frozenRig) nextRequest(t *testing.T, within time.Duration) (protocol.WorkRequest, string) {
	t.Helper()
	select {
	case m := <-r.requests:
		var req protocol.WorkRequest
		if err := protocol.Decode(m.Data, &req); err != nil {
			t.Fatal(err)
		}
		return req, m.Reply
	case <-time.After(within):
		t.Fatalf("no work request within %v", within)
		panic("unreachable")
	}
}

// deliver delivers a run of X for req and returns whether it was accepted.
func (r *frozenRig) deliver(t *testing.T, req protocol.WorkRequest, inbox string, runID uuid.UUID) bool {
	t.Helper()
	data, err := protocol.Encode(&protocol.Delivery{WorkerID: req.WorkerID, Seq: req.Seq,
		Runs: []protocol.DeliveredRun{{RunID: runID, Namespace: "default", Queue: "default", Type: "X",
			Attempt: 1, LeaseToken: 1, Input: json.RawMessage(`{}`)}},
		Limits: protocol.PayloadLimits{WarnBytes: protocol.DefaultPayloadWarnBytes, MaxBytes: protocol.DefaultPayloadMaxBytes}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.nc.Request(inbox, data, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack protocol.DeliveryAck
	if err := protocol.Decode(m.Data, &ack); err != nil {
		t.Fatal(err)
	}
	return ack.Accepted
}

// completed waits until run is reported completed.
func (r *frozenRig) completed(t *testing.T, run uuid.UUID) {
	t.Helper()
	for {
		select {
		case id := <-r.done:
			if id == run {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %s not completed", run)
		}
	}
}

// bodies is how many times run's step body ran.
func (r *frozenRig) bodies(run uuid.UUID) int32 {
	n, ok := r.steps.Load(run)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// A worker that stalled for longer than stallLimit since it asked for work
// refuses the delivery for that request (its dispatcher may have released
// the runs while it was frozen) and renews the request at once; the run,
// delivered again for the new request, runs its step once. A shorter
// stall refuses nothing.
func TestDeliveryAfterStallIsRefused(t *testing.T) {
	t.Parallel()
	// Heartbeats, which renew after a stall too, out of the way.
	r := startFrozenRig(t, Config{MaxConcurrency: 1, HeartbeatInterval: time.Hour, WaitTimeout: time.Minute})

	req, inbox := r.nextRequest(t, 10*time.Second)
	r.stalls.stall(stallLimit / 2)
	a := uuid.New()
	if !r.deliver(t, req, inbox, a) {
		t.Fatal("refused a delivery after a stall shorter than the limit")
	}
	r.completed(t, a)

	req, inbox = r.nextRequest(t, 10*time.Second)
	r.stalls.stall(2 * stallLimit)
	b := uuid.New()
	if r.deliver(t, req, inbox, b) {
		t.Fatal("accepted a delivery for a request sent before a stall longer than the limit")
	}
	if st := r.w.Stats(); st.Refused != 1 || st.RefusedStalled != 1 || st.RunsStarted != 1 || st.Renewals != 1 {
		t.Fatalf("stats %+v: want one delivery refused for the stall, one renewal, one run started", st)
	}
	// Renewed at once, not after the request's minute.
	renewed, inbox := r.nextRequest(t, 10*time.Second)
	if renewed.Seq != req.Seq+1 {
		t.Fatalf("request seq %d after %d", renewed.Seq, req.Seq)
	}
	// The dispatcher released the run and delivers it again, for the
	// request sent after the stall.
	if !r.deliver(t, renewed, inbox, b) {
		t.Fatal("refused a delivery for a request sent after the stall")
	}
	r.completed(t, b)
	if na, nb := r.bodies(a), r.bodies(b); na != 1 || nb != 1 {
		t.Fatalf("step bodies ran %d and %d times, want once each", na, nb)
	}
}

// A stall noticed at a heartbeat tick renews a request sent before it
// (its dispatcher may have consumed it with a delivery it then released),
// once: the renewed request postdates the stall.
func TestStallRenewsTheRequest(t *testing.T) {
	t.Parallel()
	r := startFrozenRig(t, Config{HeartbeatInterval: 20 * time.Millisecond, WaitTimeout: time.Minute})
	req, _ := r.nextRequest(t, 10*time.Second)
	r.stalls.stall(2 * stallLimit)
	renewed, _ := r.nextRequest(t, 10*time.Second)
	if renewed.Seq != req.Seq+1 {
		t.Fatalf("request seq %d after %d", renewed.Seq, req.Seq)
	}
	select {
	case m := <-r.requests:
		t.Fatalf("renewed again after the stall: %s", m.Data)
	case <-time.After(20 * r.w.cfg.HeartbeatInterval):
	}
	if n := r.w.Stats().Renewals; n != 1 {
		t.Fatalf("%d renewals, want 1", n)
	}
}
