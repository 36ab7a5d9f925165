package e2e_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/scheduler"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testlog"
	"github.com/kagzi/kagzi/tests/testnats"
)

// NATS drops the messages a subscription has not read once its pending
// limit is reached. A dropped wakeup is a lost wakeup; the component whose
// subscription dropped it reads its backlog instead.

// dropEnv is what each test below starts from: a database and a NATS
// server, a store and a relay on them, and a log handler that holds the
// first component logging a malformed message in the subscription handler
// that received it, while messages pile up behind it.
type dropEnv struct {
	ns    *testnats.Server
	st    *store.Store
	stall *testlog.Stall
}

func newDropEnv(t *testing.T) *dropEnv {
	t.Helper()
	url := testdb.New(t)
	ns := testnats.Start(t)
	st := openStore(t, url, nil)
	startRelay(t, url, ns.Connect(t))
	return &dropEnv{ns: ns, st: st, stall: testlog.NewStall(t, "dropping malformed message")}
}

// startDispatcher starts a dispatcher logging to the stall. One message
// in a handler fills any of its subscriptions: the next is dropped.
func (e *dropEnv) startDispatcher(t *testing.T) *dispatcher.Dispatcher {
	t.Helper()
	d := dispatcher.New(defaults[dispatcher.Config](t), dispatcher.Deps{PendingLimit: 1}, e.st, e.ns.Connect(t), slog.New(e.stall))
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	t.Cleanup(e.stall.Release) // before Stop, which waits for the handler
	return d
}

// held waits until the stall holds the handler named.
func (e *dropEnv) held(t *testing.T, handler string) {
	t.Helper()
	select {
	case <-e.stall.Entered():
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s handler was not held", handler)
	}
}

// completes starts a run of Three with a client on nc and fails unless it
// completes within 15 s.
func (e *dropEnv) completes(t *testing.T, nc *nats.Conn) {
	t.Helper()
	h, err := newClient(t, e.st, nc).Start(context.Background(), "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result[int](t, h, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A wakeup dropped while the dispatcher's wakeup handler is held up, for a
// queue the dispatcher knows to be empty: the drop makes it read the
// backlog, and the run is claimed and completes while the handler is still
// held. Without that, the queue would stay marked empty and renewed
// requests would park without a claim until the next wakeup.
func TestDroppedWakeupIsRecoveredByTheBacklog(t *testing.T) {
	t.Parallel()
	e := newDropEnv(t)
	d := e.startDispatcher(t)
	// Requests renewed every 200 ms park without a query once the queue is
	// known empty.
	startWorker(t, e.ns, worker.Config{WaitTimeout: 200 * time.Millisecond}, threeSteps(newCounter()))
	waitUntil(t, 30*time.Second, "the dispatcher to learn that the queue is empty", func() bool { return d.Stats().EmptySkips > 0 })

	// Hold the wakeup handler on a malformed wakeup.
	pub := e.ns.Connect(t)
	if err := pub.Publish(protocol.SubjectReady("default", "default"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	e.held(t, "wakeup")
	e.completes(t, pub)
	s := d.Stats()
	if s.Drops < 1 || s.WakeupsSeen != 0 {
		t.Fatalf("dispatcher stats %+v: want the wakeup dropped (Drops >= 1) and none seen", s)
	}
	t.Logf("completed with the wakeup handler held: %d drops, %d backlog reads", s.Drops, s.Resyncs)
}

// A schedule created while the scheduler's change handler is held up: its
// change notice is dropped, the drop makes the scheduler read its backlog,
// which arms the timer for it, and it fires. Without that, no timer would
// be armed for it.
func TestDroppedScheduleChangeIsRecoveredByTheBacklog(t *testing.T) {
	t.Parallel()
	e := newDropEnv(t)
	ctx := context.Background()
	s := scheduler.New(defaults[scheduler.Config](t), scheduler.Deps{PendingLimit: 1}, e.st, e.ns.Connect(t), slog.New(e.stall))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Cleanup(e.stall.Release)
	pub := e.ns.Connect(t)
	if err := pub.Publish(protocol.SubjectSchedule("default"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	e.held(t, "change")
	cl := newClient(t, e.st, pub)
	sc, err := cl.CreateSchedule(ctx, "Three", 1, client.ScheduleOptions{Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "the schedule to fire", func() bool {
		runs, err := cl.ScheduleHistory(ctx, sc.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(runs) > 0
	})
	if st := s.Stats(); st.Drops < 1 || st.Changes != 0 {
		t.Fatalf("scheduler stats %+v: want the change dropped (Drops >= 1) and none seen", st)
	}
}

// Work requests dropped while the dispatcher's request handlers are held
// up were never parked: the dispatcher asks every worker to renew its own,
// once at the drop and once more when it has caught up (the renewals sent
// while it was still held up were dropped too), and the run is claimed.
// Both of its subscriptions that take work requests are held, the queue
// group's and the one addressed to it, since a worker uses either.
func TestDroppedWorkRequestIsRenewed(t *testing.T) {
	t.Parallel()
	e := newDropEnv(t)
	d := e.startDispatcher(t)
	pub := e.ns.Connect(t)
	group := protocol.SubjectWork("default", "default")
	for _, subj := range []string{group, protocol.SubjectDirect(d.ID(), group)} {
		if err := pub.PublishRequest(subj, pub.NewInbox(), []byte("{")); err != nil {
			t.Fatal(err)
		}
	}
	e.held(t, "request")
	// Its requests would be renewed after ten minutes.
	w := startWorker(t, e.ns, worker.Config{WaitTimeout: 10 * time.Minute}, threeSteps(newCounter()))
	waitUntil(t, 30*time.Second, "the worker to be asked to renew its dropped request", func() bool { return w.Stats().Renewals > 0 })
	e.stall.Release()
	e.completes(t, pub)
	t.Logf("dispatcher drops %d, worker renewals %d", d.Stats().Drops, w.Stats().Renewals)
}
