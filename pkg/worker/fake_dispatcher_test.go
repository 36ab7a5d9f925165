package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/testnats"
)

// waitLimit bounds every wait of a test: reaching it is a failure.
const waitLimit = 10 * time.Second

// workReq is a work request as the fake dispatcher received it.
type workReq struct {
	protocol.WorkRequest
	reply string
	enc   protocol.Encoding
}

// event is one message the fake dispatcher saw, in arrival order.
type event struct {
	kind string // request, report, register, heartbeat, deregister, probe
	item protocol.ReportItem
	hb   protocol.Heartbeat
}

// fakeDispatcher speaks the dispatcher's side of the protocol over a real
// NATS server. One subscription receives everything the worker publishes,
// so events are recorded in the order the worker sent them.
type fakeDispatcher struct {
	t  *testing.T
	nc *nats.Conn

	mu     sync.Mutex
	events []event
	answer func(protocol.ReportItem) protocol.ResultCode
	// hold, if set, picks the reports whose reply waits on parked.
	hold func(protocol.ReportItem) bool

	parked chan parkedReply

	requests   chan workReq
	items      chan protocol.ReportItem
	heartbeats chan protocol.Heartbeat
	registers  chan protocol.WorkerRegister
	deregs     chan protocol.WorkerDeregister
}

func newFakeDispatcher(t *testing.T, s *testnats.Server) *fakeDispatcher {
	t.Helper()
	d := &fakeDispatcher{
		t:          t,
		nc:         s.Connect(t),
		requests:   make(chan workReq, 1000),
		items:      make(chan protocol.ReportItem, 1000),
		heartbeats: make(chan protocol.Heartbeat, 10000),
		registers:  make(chan protocol.WorkerRegister, 100),
		deregs:     make(chan protocol.WorkerDeregister, 100),
		parked:     make(chan parkedReply, 100),
	}
	if _, err := d.nc.Subscribe(protocol.Prefix+">", d.handle); err != nil {
		t.Fatal(err)
	}
	if err := d.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d
}

// setAnswer decides the result code of every report item from now on
// (default ok).
func (d *fakeDispatcher) setAnswer(f func(protocol.ReportItem) protocol.ResultCode) {
	d.mu.Lock()
	d.answer = f
	d.mu.Unlock()
}

func push[T any](t *testing.T, ch chan T, v T) {
	select {
	case ch <- v:
	default:
		t.Errorf("fake dispatcher: channel full, dropped %T", v)
	}
}

func (d *fakeDispatcher) record(e event) {
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
}

func (d *fakeDispatcher) handle(msg *nats.Msg) {
	t := d.t
	switch {
	case strings.HasPrefix(msg.Subject, strings.TrimSuffix(protocol.SubjectWorkAll, ">")):
		var r protocol.WorkRequest
		if err := protocol.Decode(msg.Data, &r); err != nil {
			t.Errorf("fake dispatcher: bad work request: %v", err)
			return
		}
		if ns, q, err := protocol.ParseWork(msg.Subject); err != nil || ns != r.Namespace || q != r.Queue {
			t.Errorf("work request on %s for %s/%s", msg.Subject, r.Namespace, r.Queue)
		}
		if msg.Reply == "" {
			t.Errorf("work request without a reply inbox")
		}
		d.record(event{kind: "request"})
		push(t, d.requests, workReq{WorkRequest: r, reply: msg.Reply, enc: protocol.EncodingOf(msg.Data)})
	case strings.HasPrefix(msg.Subject, strings.TrimSuffix(protocol.SubjectReportAll, ">")):
		var r protocol.Report
		if err := protocol.Decode(msg.Data, &r); err != nil {
			t.Errorf("fake dispatcher: bad report: %v", err)
			return
		}
		if msg.Subject != protocol.SubjectReport(r.Namespace) {
			t.Errorf("report for %s on %s", r.Namespace, msg.Subject)
		}
		d.mu.Lock()
		answer, hold := d.answer, d.hold
		d.mu.Unlock()
		reply := protocol.ReportReply{}
		held := false
		for _, it := range r.Items {
			held = held || hold != nil && hold(it)
			d.record(event{kind: "report", item: it})
			push(t, d.items, it)
			code := protocol.ResultOK
			if answer != nil {
				code = answer(it)
			}
			reply.Results = append(reply.Results, protocol.ReportResult{Code: code})
		}
		data, err := protocol.Encode(&reply)
		if err != nil {
			t.Errorf("encode reply: %v", err)
			return
		}
		if held {
			push(t, d.parked, parkedReply{msg: msg, data: data, items: r.Items})
			return
		}
		if err := msg.Respond(data); err != nil {
			t.Errorf("respond: %v", err)
		}
	case strings.HasPrefix(msg.Subject, protocol.SubjectWorkerHeartbeat("")):
		var hb protocol.Heartbeat
		if err := protocol.Decode(msg.Data, &hb); err != nil {
			t.Errorf("fake dispatcher: bad heartbeat: %v", err)
			return
		}
		d.record(event{kind: "heartbeat", hb: hb})
		push(t, d.heartbeats, hb)
	case strings.HasPrefix(msg.Subject, protocol.SubjectWorkerRegister("")):
		var r protocol.WorkerRegister
		if err := protocol.Decode(msg.Data, &r); err != nil {
			t.Errorf("fake dispatcher: bad register: %v", err)
			return
		}
		d.record(event{kind: "register"})
		push(t, d.registers, r)
	case msg.Subject == protocol.SubjectDispatcherProbe:
		var p protocol.DispatcherProbe
		if err := protocol.Decode(msg.Data, &p); err != nil || msg.Reply == "" {
			t.Errorf("fake dispatcher: bad probe (reply %q): %v", msg.Reply, err)
			return
		}
		d.record(event{kind: "probe"})
	case strings.HasPrefix(msg.Subject, protocol.SubjectWorkerDeregister("")):
		var r protocol.WorkerDeregister
		if err := protocol.Decode(msg.Data, &r); err != nil {
			t.Errorf("fake dispatcher: bad deregister: %v", err)
			return
		}
		d.record(event{kind: "deregister"})
		push(t, d.deregs, r)
	}
}

// parkedReply is the reply of a report the fake dispatcher holds back
// (setHold) until the test sends it.
type parkedReply struct {
	msg   *nats.Msg
	data  []byte
	items []protocol.ReportItem
}

func (p parkedReply) respond(t *testing.T) {
	t.Helper()
	if err := p.msg.Respond(p.data); err != nil {
		t.Fatalf("respond: %v", err)
	}
}

// setHold holds back, from now on, the reply of every report with an item
// f picks: it goes to parked instead.
func (d *fakeDispatcher) setHold(f func(protocol.ReportItem) bool) {
	d.mu.Lock()
	d.hold = f
	d.mu.Unlock()
}

// deliver sends runs for a request with the given seq and returns whether
// the worker accepted them.
func (d *fakeDispatcher) deliver(t *testing.T, req workReq, seq uint64, runs ...protocol.DeliveredRun) bool {
	t.Helper()
	data, err := protocol.Encode(&protocol.Delivery{WorkerID: req.WorkerID, Seq: seq, Runs: runs,
		Limits: protocol.PayloadLimits{WarnBytes: protocol.DefaultPayloadWarnBytes, MaxBytes: protocol.DefaultPayloadMaxBytes}})
	if err != nil {
		t.Fatal(err)
	}
	return d.ack(t, req.reply, data)
}

// ack sends raw data as a delivery and decodes the worker's answer.
func (d *fakeDispatcher) ack(t *testing.T, inbox string, data []byte) bool {
	t.Helper()
	msg, err := d.nc.Request(inbox, data, waitLimit)
	if err != nil {
		t.Fatalf("delivery request: %v", err)
	}
	var ack protocol.DeliveryAck
	if err := protocol.Decode(msg.Data, &ack); err != nil {
		t.Fatalf("delivery ack: %v", err)
	}
	return ack.Accepted
}

// cancel publishes a Cancel of runID to the worker.
// cancel asks the worker to cancel a run (the lease holds).
func (d *fakeDispatcher) cancel(t *testing.T, workerID, runID uuid.UUID) {
	t.Helper()
	d.sendCancel(t, &protocol.Cancel{Namespace: "default", RunID: runID, WorkerID: workerID})
}

// terminate tells the worker a run it holds was terminated.
func (d *fakeDispatcher) terminate(t *testing.T, workerID, runID uuid.UUID) {
	t.Helper()
	d.sendCancel(t, &protocol.Cancel{Namespace: "default", RunID: runID, WorkerID: workerID, Terminate: true})
}

func (d *fakeDispatcher) sendCancel(t *testing.T, c *protocol.Cancel) {
	t.Helper()
	workerID := c.WorkerID
	data, err := protocol.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.nc.Publish(protocol.SubjectCancel(c.Namespace, workerID), data); err != nil {
		t.Fatal(err)
	}
}

func (d *fakeDispatcher) nextRequest(t *testing.T) workReq {
	t.Helper()
	return recv(t, d.requests, "work request")
}

func (d *fakeDispatcher) nextItem(t *testing.T) protocol.ReportItem {
	t.Helper()
	return recv(t, d.items, "report item")
}

// noItems fails if report items arrived that the test did not read. Call
// it after a sync point that follows every report the worker could send.
func (d *fakeDispatcher) noItems(t *testing.T) {
	t.Helper()
	select {
	case it := <-d.items:
		t.Fatalf("unexpected report item %s %s", it.Kind, it.StepID)
	default:
	}
}

func (d *fakeDispatcher) eventLog() []event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]event(nil), d.events...)
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// newRun makes a delivered run of type typ with input.
func newRun(t *testing.T, typ string, input any, steps ...protocol.StepState) protocol.DeliveredRun {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.DeliveredRun{
		RunID: uuid.Must(uuid.NewV7()), Namespace: "default", Queue: "default",
		Type: typ, Version: "", Attempt: 1, LeaseToken: 1, Input: raw, Steps: steps,
	}
}

func completedStep(t *testing.T, id string, v any) protocol.StepState {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.StepState{StepID: id, Status: "COMPLETED", Attempt: 1, Output: raw}
}

// start runs a worker with cfg on a fresh server with a fake dispatcher;
// register registers its workflows. The worker is stopped when t ends.
func start(t *testing.T, cfg worker.Config, register func(w *worker.Worker)) (*fakeDispatcher, *worker.Worker) {
	t.Helper()
	s := testnats.Start(t)
	d := newFakeDispatcher(t, s)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 200 * time.Millisecond
	}
	w, err := worker.New(cfg, s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	register(w)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	t.Cleanup(func() {
		cancel()
		w.Stop()
	})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return d, w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
