package worker_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

func (d *fakeDispatcher) publish(t *testing.T, subject string, m protocol.Message) {
	t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
}

// The worker probes for dispatchers before its first request, so it has
// heard every dispatcher its request may be parked in.
func TestProbeBeforeFirstRequest(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	d.nextRequest(t)
	for _, e := range d.eventLog() {
		if e.kind == "request" {
			t.Fatal("work request before the probe")
		}
		if e.kind == "probe" {
			return
		}
	}
	t.Fatal("no probe")
}

// The outstanding request is renewed at once, not at its wait timeout,
// when the dispatcher that may hold it is gone: it fell silent, left, lost
// requests, or the relay moved (it does when the dispatcher running it
// dies).
func TestRequestRenewedWhenADispatcherGoes(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	for name, c := range map[string]struct {
		// before is published before the request is in; gone after.
		before, gone protocol.Message
		subject      string
	}{
		"silent": {
			before: &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 20},
		},
		"left": {
			before: &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000},
			gone:   &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000, Leaving: true},
		},
		"lost requests": {
			before: &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000},
			gone:   &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000, Renew: true},
		},
		"relay moved": {
			before: &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000, RelayID: "r1"},
			gone:   &protocol.RelayUp{RelayID: "r2", At: time.Now()}, subject: protocol.SubjectRelayUp,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, w := start(t, worker.Config{WaitTimeout: 10 * time.Minute, MaxConcurrency: 2}, func(w *worker.Worker) {
				must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
			})
			req1 := d.nextRequest(t)
			d.publish(t, protocol.SubjectDispatcherBeacon, c.before)
			if c.gone != nil {
				subject := c.subject
				if subject == "" {
					subject = protocol.SubjectDispatcherBeacon
				}
				d.publish(t, subject, c.gone)
			}
			req2 := d.nextRequest(t)
			if req2.Seq != req1.Seq+1 || req2.Credits != 2 {
				t.Fatalf("renewal %+v after %+v", req2.WorkRequest, req1.WorkRequest)
			}
			if n := w.Stats().Renewals; n != 1 {
				t.Fatalf("%d renewals, want 1", n)
			}
			// The old request is superseded.
			if d.deliver(t, req1, req1.Seq, newRun(t, "X", nil)) {
				t.Fatal("accepted a delivery for the renewed request")
			}
		})
	}
}

// A worker writes its work requests in binary only while every dispatcher
// it hears says in its beacons that it reads binary: JSON before it heard
// one, and while an older dispatcher (no header) is among them. A request
// in binary is renewed when such a dispatcher joins, since it may have
// reached it first.
func TestBinaryWhileEveryDispatcherReadsIt(t *testing.T) {
	t.Parallel()
	d, _ := start(t, worker.Config{WaitTimeout: 10 * time.Minute}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	beacon := func(id uuid.UUID, binary bool) {
		// Renew (as after lost requests) makes the worker send its next.
		data, err := protocol.Encode(&protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000, Renew: binary})
		must(t, err)
		m := &nats.Msg{Subject: protocol.SubjectDispatcherBeacon, Data: data, Header: nats.Header{}}
		if binary {
			m.Header.Set(protocol.HeaderEncodings, protocol.EncodingsBinary)
		}
		must(t, d.nc.PublishMsg(m))
	}
	if r := d.nextRequest(t); r.enc != protocol.JSON {
		t.Fatal("binary before any dispatcher was heard")
	}
	newer, older := uuid.New(), uuid.New()
	beacon(newer, true)
	if r := d.nextRequest(t); r.enc != protocol.Binary {
		t.Fatal("JSON although every dispatcher reads binary")
	}
	beacon(older, false)
	if r := d.nextRequest(t); r.enc != protocol.JSON {
		t.Fatal("binary although a dispatcher reads JSON only")
	}
}

// The first relay a worker hears of, and a relay announcing itself again,
// renew nothing: neither says a dispatcher went away.
func TestRelayUpAloneRenewsNothing(t *testing.T) {
	t.Parallel()
	d, w := start(t, worker.Config{WaitTimeout: 10 * time.Minute}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	req := d.nextRequest(t)
	d.publish(t, protocol.SubjectRelayUp, &protocol.RelayUp{RelayID: "r1", At: time.Now()})
	d.publish(t, protocol.SubjectDispatcherBeacon, &protocol.DispatcherBeacon{DispatcherID: uuid.New(), IntervalMS: 60000, RelayID: "r1"})
	d.publish(t, protocol.SubjectRelayUp, &protocol.RelayUp{RelayID: "r1", At: time.Now()})
	// A leaving dispatcher is a renewal: once it is seen, the messages
	// before it were handled.
	d.publish(t, protocol.SubjectDispatcherBeacon, &protocol.DispatcherBeacon{DispatcherID: uuid.New(), IntervalMS: 60000, Leaving: true})
	req2 := d.nextRequest(t)
	if req2.Seq != req.Seq+1 || w.Stats().Renewals != 1 {
		t.Fatalf("request seq %d after %d, %d renewals: want one renewal, for the dispatcher that left", req2.Seq, req.Seq, w.Stats().Renewals)
	}
}

// A dispatcher that falls silent may be frozen rather than gone: it stays
// in the dispatchers' queue group until NATS closes its connection for
// unanswered PINGs (natsutil.StaleClientBound after it froze), so the
// request renewed at its silence may have landed in it. The worker renews
// once more after that bound if the dispatcher is still silent, and not if
// it was heard again.
func TestSilentDispatcherRenewedAgainAfterEviction(t *testing.T) {
	t.Parallel()
	for name, heardAgain := range map[string]bool{"still silent": false, "heard again": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, w := start(t, worker.Config{WaitTimeout: 10 * time.Minute}, func(w *worker.Worker) {
				must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
			})
			req1 := d.nextRequest(t)
			id := uuid.New()
			heard := time.Now()
			d.publish(t, protocol.SubjectDispatcherBeacon, &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 20})
			req2 := d.nextRequest(t)
			if req2.Seq != req1.Seq+1 {
				t.Fatalf("renewal at the silence: seq %d after %d", req2.Seq, req1.Seq)
			}
			if heardAgain {
				d.publish(t, protocol.SubjectDispatcherBeacon, &protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 60000})
			}
			select {
			case req3 := <-d.requests:
				if heardAgain {
					t.Fatalf("renewed again (seq %d) for a dispatcher heard again", req3.Seq)
				}
				if since := time.Since(heard); req3.Seq != req2.Seq+1 || since < natsutil.StaleClientBound {
					t.Fatalf("second renewal seq %d after %d, %v after the last beacon: want the next, after %v",
						req3.Seq, req2.Seq, since, natsutil.StaleClientBound)
				}
			case <-time.After(natsutil.StaleClientBound + 2*time.Second):
				if !heardAgain {
					t.Fatal("not renewed again for a dispatcher still silent")
				}
			}
			want := uint64(2)
			if heardAgain {
				want = 1
			}
			if n := w.Stats().Renewals; n != want {
				t.Fatalf("%d renewals, want %d", n, want)
			}
		})
	}
}
