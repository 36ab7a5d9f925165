package worker_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// registersBefore counts the registrations the worker sent, in order,
// from event index from until its n-th heartbeat after from; it waits
// for that heartbeat, and returns the index after it.
func (d *fakeDispatcher) registersBefore(t *testing.T, from, n int) (registers, next int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		log := d.eventLog()
		beats := 0
		registers = 0
		for i := from; i < len(log); i++ {
			switch log[i].kind {
			case "register":
				registers++
			case "heartbeat":
				if beats++; beats == n {
					return registers, i + 1
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats of %d seen", beats, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// notify sends the worker a registration notice as the acting reaper does.
func (d *fakeDispatcher) notify(t *testing.T, w *worker.Worker, ask bool) {
	t.Helper()
	ns := w.Config().Namespace
	data, err := protocol.Encode(&protocol.RegistrationNotice{Namespace: ns, WorkerID: w.ID(), Ask: ask})
	must(t, err)
	must(t, d.nc.Publish(protocol.SubjectRegistration(ns, w.ID()), data))
	must(t, d.nc.Flush())
}

func (d *fakeDispatcher) reaperUp(t *testing.T) {
	t.Helper()
	data, err := protocol.Encode(&protocol.ReaperUp{ReaperID: uuid.New()})
	must(t, err)
	must(t, d.nc.Publish(protocol.SubjectReaperUp, data))
	must(t, d.nc.Flush())
}

// waitRegistered waits until the worker's Stats say registered is.
func waitRegistered(t *testing.T, w *worker.Worker, registered bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for w.Stats().Registered != registered {
		if time.Now().After(deadline) {
			t.Fatalf("Registered stays %v", !registered)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Until a reaper acknowledges it, a worker repeats its registration on
// heartbeat ticks 1, 3, 7, then every 5 (as it did beside a reaper of an
// earlier version, which acknowledges nothing); acknowledged, it repeats
// nothing; asked, or told that a reaper took over while it holds no
// acknowledgement, it registers at once.
func TestRegistrationRepeatedUntilAcknowledged(t *testing.T) {
	t.Parallel()
	d, w := start(t, worker.Config{HeartbeatInterval: 50 * time.Millisecond}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	// Start's registration, then ticks 1, 3, 7, 12 and 17.
	if n, _ := d.registersBefore(t, 0, 20); n != 6 {
		t.Fatalf("%d registrations up to the 20th heartbeat without an acknowledgement, want 6", n)
	}
	if w.Stats().Registered {
		t.Fatal("registered without an acknowledgement")
	}

	// Another worker's notice acknowledges nothing.
	data, err := protocol.Encode(&protocol.RegistrationNotice{Namespace: w.Config().Namespace, WorkerID: uuid.New()})
	must(t, err)
	must(t, d.nc.Publish(protocol.SubjectRegistration(w.Config().Namespace, w.ID()), data))
	must(t, d.nc.Publish(protocol.SubjectRegistration(w.Config().Namespace, w.ID()), []byte(`{"v":1,"ns":"default"}`)))
	d.notify(t, w, false)
	waitRegistered(t, w, true)
	if st := w.Stats(); st.Malformed != 1 {
		t.Errorf("malformed %d, want 1", st.Malformed)
	}
	// From the next heartbeat on: a repetition sent before the
	// acknowledgement arrived precedes it (one connection, in order).
	_, from := d.registersBefore(t, len(d.eventLog()), 1)
	if n, _ := d.registersBefore(t, from, 12); n != 0 {
		t.Fatalf("%d registrations in 12 heartbeats after the acknowledgement, want none", n)
	}
	// A reaper that takes over hears nothing from an acknowledged worker.
	from = len(d.eventLog())
	d.reaperUp(t)
	if n, _ := d.registersBefore(t, from, 12); n != 0 {
		t.Fatalf("%d registrations after a reaper took over, acknowledged, want none", n)
	}

	// Asked: at once, and unacknowledged again.
	for len(d.registers) > 0 {
		<-d.registers
	}
	before := w.Stats().Registrations
	d.notify(t, w, true)
	if reg := recv(t, d.registers, "registration asked for"); reg.WorkerID != w.ID() || len(reg.Types) != 1 {
		t.Fatalf("registration %+v", reg)
	}
	waitRegistered(t, w, false)
	// A reaper takes over: at once, before the backoff's next tick (the
	// ask left it 5 heartbeats away).
	from = len(d.eventLog())
	d.reaperUp(t)
	if n, _ := d.registersBefore(t, from, 2); n != 1 {
		t.Fatalf("%d registrations within 2 heartbeats of a reaper taking over, want 1", n)
	}
	if got := w.Stats().Registrations; got < before+2 {
		t.Errorf("Registrations %d, want at least %d", got, before+2)
	}
	d.notify(t, w, false)
	waitRegistered(t, w, true)
}
