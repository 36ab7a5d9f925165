package worker_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testlog"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A delivery NATS dropped consumed the worker's request at the dispatcher
// (which releases the runs when no ack comes): the worker renews its
// request at once instead of waiting for its wait timeout.
func TestDroppedDeliveryRenewsTheRequest(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	d := newFakeDispatcher(t, s)
	// The delivery loop logs a malformed delivery: it is held there while
	// messages pile up behind it.
	st := testlog.NewStall(t, "dropped malformed message")
	// One delivery waiting behind the one in hand fills the subscription.
	w, err := worker.New(worker.Config{WaitTimeout: 10 * time.Minute, Logger: slog.New(st), DrainTimeout: 200 * time.Millisecond},
		s.Connect(t, nats.SyncQueueLen(1)))
	if err != nil {
		t.Fatal(err)
	}
	must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	t.Cleanup(st.Release)
	req1 := d.nextRequest(t)
	if err := d.nc.Publish(req1.reply, []byte("{")); err != nil {
		t.Fatal(err)
	}
	closed(t, st.Entered(), "the delivery loop held")
	data, err := protocol.Encode(&protocol.Delivery{WorkerID: req1.WorkerID, Seq: req1.Seq, Runs: []protocol.DeliveredRun{newRun(t, "X", nil)},
		Limits: protocol.PayloadLimits{WarnBytes: 1, MaxBytes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the first waits, the second is dropped
		if err := d.nc.PublishRequest(req1.reply, d.nc.NewInbox(), data); err != nil {
			t.Fatal(err)
		}
	}
	req2 := d.nextRequest(t)
	if req2.Seq != req1.Seq+1 {
		t.Fatalf("request seq %d after %d", req2.Seq, req1.Seq)
	}
	// A drop is counted once its handler has returned, which is after the
	// renewed request went out: wait for the count, not just the request.
	deadline := time.Now().Add(waitLimit)
	for w.Stats().Drops == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := w.Stats(); s.Drops != 1 || s.Renewals != 1 {
		t.Fatalf("stats %+v: want one drop and one renewal", s)
	}
}
