package e2e_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// leaderSilence is how long a leader may be silent before a standby ends
// its session (three beacons at the default 1 s), and leaderBound how soon
// after a leader froze a standby must lead: the silence counted from the
// last beacon before the freeze (at most an interval before it), the
// standby's next check (an interval), and a second for the takeover under
// a loaded test machine.
const (
	leaderSilence = 3 * time.Second
	leaderBound   = leaderSilence + 2*time.Second + time.Second
)

// frozenLeaderEnv is a service environment on dbURL and natsURL without
// health endpoints.
func frozenLeaderEnv(dbURL, natsURL string) []string {
	return []string{"KAGZI_DATABASE_URL=" + dbURL, "KAGZI_NATS_URL=" + natsURL, "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info",
		"KAGZI_WORKER_TIMEOUT=3s"}
}

// signal sends sig to the child process and returns the time just before
// it did: whatever the child logs in answer is read after that.
func (c *child) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v: %v", c.name, sig, err)
	}
	return at
}

// awaitQueued waits until one session holds lock key and one waits for it:
// the standby is queued, so what is measured is the end of the leader's
// session.
func awaitQueued(t *testing.T, ctx context.Context, st *store.Store, key int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		held, waiting, err := st.LockSessions(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if held == 1 && waiting == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions hold lock %x and %d wait for it, want 1 and 1", held, key, waiting)
		}
		// Nothing signals that a session waits for a lock: pg_locks is
		// read until it shows.
		time.Sleep(20 * time.Millisecond)
	}
}

// election is one leader role with its two replicas, each a process of
// its own.
type election struct {
	service, leads, stepsDown string
	key                       int64
	leader, standby           *child
}

// startElections starts the relay's and the reaper's leaders, then their
// standbys, and returns once each standby waits for its lock; the names
// of the processes say what the test does to them (leaderAs, standbyAs).
func startElections(t *testing.T, ctx context.Context, st *store.Store, env []string, leaderAs, standbyAs string) []*election {
	t.Helper()
	elections := []*election{
		{service: "dispatcher", leads: "relay is leader", stepsDown: "relay lost leadership", key: dispatcher.RelayLockKey},
		{service: "reaper", leads: "reaper is leader", stepsDown: "reaper stepped down", key: reaper.LockKey},
	}
	for _, e := range elections {
		e.leader = startChild(t, e.service+" ("+leaderAs+")", env, e.service)
		if _, err := e.leader.await(ctx, e.leads, time.Time{}, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", e.service, err)
		}
		e.standby = startChild(t, e.service+" ("+standbyAs+")", env, e.service)
		awaitQueued(t, ctx, st, e.key)
	}
	return elections
}

// pingSetting is a NATS server the tests of frozen processes run on.
type pingSetting struct {
	name  string
	start func(testing.TB) *testnats.Server
	// evicts: the server closes a frozen client's connection.
	evicts bool
}

// pingSettings are the NATS servers the tests of frozen processes run on:
// one with the deployment's pings, which closes a frozen client's
// connection within seconds, and one with nats-server's defaults, which
// keeps it for the whole freeze. Without full(), tests that take long run
// on the defaults only (pingCases), the case that shows the defects.
var pingSettings = []pingSetting{{"deployment pings", testnats.StartPinging, true}, {"default pings", testnats.Start, false}}

// pingCases is pingSettings, or with a quick run only its last, the
// server's defaults.
func pingCases() []pingSetting {
	if full() {
		return pingSettings
	}
	return pingSettings[len(pingSettings)-1:]
}

// TestFrozenLeaderIsReplaced freezes (SIGSTOP) the relay's and the
// reaper's leaders, each a process of its own with a standby beside it:
// each standby must lead within leaderBound of the freeze, the relay's
// standby must relay, and each resumed leader must step down without
// acting — the resumed reaper declares no worker dead that heartbeated
// throughout.
func TestFrozenLeaderIsReplaced(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	env := frozenLeaderEnv(dbURL, ns.URL())

	// A worker that heartbeats every 300 ms throughout, as far as the
	// reapers can tell.
	nc := ns.Connect(t)
	workerID := heartbeatingWorker(t, ctx, nc)

	elections := startElections(t, ctx, st, env, "frozen", "standby")
	// The worker is live in the database before anything freezes.
	waitUntil(t, 10*time.Second, "worker registered", func() bool {
		w, err := st.WorkersGet(ctx, "default", workerID)
		return err == nil && w.Status == store.WorkerOnline
	})

	frozen := map[string]time.Time{}
	for _, e := range elections {
		frozen[e.service] = e.leader.signal(t, syscall.SIGSTOP)
	}
	for _, e := range elections {
		led, err := e.standby.await(ctx, e.leads, frozen[e.service], leaderBound+10*time.Second)
		if err != nil {
			t.Fatalf("%s standby: %v", e.service, err)
		}
		took := led.Sub(frozen[e.service])
		t.Logf("%s: the standby leads %.2f s after its leader froze", e.service, took.Seconds())
		if took > leaderBound {
			t.Errorf("%s: the standby took %v to lead after its leader froze, want at most %v", e.service, took, leaderBound)
		}
	}

	// The new relay relays: a run created now wakes the dispatchers.
	ready := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(protocol.SubjectReady("default", "frozen"), ready)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "frozen", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("no wakeup relayed while the old relay is frozen")
	}

	// Frozen past the worker timeout (3 s): the old reaper holds liveness
	// times older than that for every worker.
	time.Sleep(time.Until(frozen["reaper"].Add(8 * time.Second)))
	for _, e := range elections {
		resumed := e.leader.signal(t, syscall.SIGCONT)
		if _, err := e.leader.await(ctx, e.stepsDown, resumed, 10*time.Second); err != nil {
			t.Errorf("%s resumed: %v", e.service, err)
		}
	}
	// Give the resumed reaper time to act, if it would: a flush interval
	// and then some.
	time.Sleep(4 * time.Second)
	w, err := st.WorkersGet(ctx, "default", workerID)
	if err != nil {
		t.Fatal(err)
	}
	if w.Status != store.WorkerOnline {
		t.Errorf("worker that heartbeated throughout is %s after the old reaper resumed", w.Status)
	}
	for _, e := range elections {
		for _, c := range []*child{e.leader, e.standby} {
			if c.logged("workers lost") {
				t.Errorf("%s logged workers lost: a worker that heartbeated throughout was declared dead", c.name)
			}
		}
	}
	// The old leaders are standbys now: each lock has one holder.
	for _, e := range elections {
		if held, _, err := st.LockSessions(ctx, e.key); err != nil || held != 1 {
			t.Errorf("%s: %d holders of its lock (%v), want 1", e.service, held, err)
		}
	}
}

// TestFrozenLoneReaperDeclaresNoOneDead freezes the only reaper for longer
// than the worker timeout while a worker heartbeats throughout: when it
// resumes it must not take the heartbeats it missed for silence.
func TestFrozenLoneReaperDeclaresNoOneDead(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	r := startChild(t, "reaper", frozenLeaderEnv(dbURL, ns.URL()), "reaper")
	if _, err := r.await(ctx, "reaper is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	workerID := heartbeatingWorker(t, ctx, ns.Connect(t))
	waitUntil(t, 10*time.Second, "worker registered", func() bool {
		w, err := st.WorkersGet(ctx, "default", workerID)
		return err == nil && w.Status == store.WorkerOnline
	})
	r.signal(t, syscall.SIGSTOP)
	time.Sleep(8 * time.Second)
	resumed := r.signal(t, syscall.SIGCONT)
	// Its view is as old as the freeze: it ends its term and takes over
	// afresh, from the database's liveness and its own new amnesty.
	if _, err := r.await(ctx, "reaper stepped down", resumed, 10*time.Second); err != nil {
		t.Fatalf("resumed reaper: %v", err)
	}
	waitUntil(t, 10*time.Second, "resumed reaper leads again", func() bool { return r.count("reaper is leader") == 2 })
	time.Sleep(4 * time.Second)
	w, err := st.WorkersGet(ctx, "default", workerID)
	if err != nil {
		t.Fatal(err)
	}
	if w.Status != store.WorkerOnline || r.logged("workers lost") {
		t.Errorf("worker that heartbeated throughout is %s after the reaper resumed (workers lost logged: %v)", w.Status, r.logged("workers lost"))
	}
}

// logged reports whether the child logged msg.
func (c *child) logged(msg string) bool { return c.count(msg) > 0 }

// count returns how many times the child logged msg.
func (c *child) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		if l.msg == msg {
			n++
		}
	}
	return n
}

// TestFrozenSchedulerDelaysNoFire runs two schedulers, each a process, on
// a schedule that fires every second, and freezes one for five seconds:
// every second of the freeze fires exactly once, and no later than a
// second after its time.
func TestFrozenSchedulerDelaysNoFire(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	env := frozenLeaderEnv(dbURL, ns.URL())
	relay := startChild(t, "dispatcher", env, "dispatcher")
	if _, err := relay.await(ctx, "relay is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var schedulers []*child
	for _, name := range []string{"scheduler (frozen)", "scheduler"} {
		s := startChild(t, name, env, "scheduler")
		if _, err := s.await(ctx, "running", time.Time{}, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		schedulers = append(schedulers, s)
	}
	sc, err := st.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "default", Queue: "default", Type: "T", Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	from := schedulers[0].signal(t, syscall.SIGSTOP).Truncate(time.Second).Add(time.Second)
	time.Sleep(5 * time.Second)
	schedulers[0].signal(t, syscall.SIGCONT)
	to := from.Add(5 * time.Second)
	// Every fire time up to `to` is due a second after it at the latest.
	time.Sleep(time.Until(to.Add(2 * time.Second)))
	fires, err := st.SchedulesFires(ctx, "default", from, to)
	if err != nil {
		t.Fatal(err)
	}
	byTime := map[time.Time]int{}
	var worst float64
	for _, f := range fires {
		if f.ScheduleID != sc.ID {
			continue
		}
		byTime[f.FireAt.UTC()]++
		worst = max(worst, f.LateMS)
	}
	for at := from; at.Before(to); at = at.Add(time.Second) {
		if n := byTime[at.UTC()]; n != 1 {
			t.Errorf("fire time %s fired %d times during the freeze, want once", at.Format(time.TimeOnly), n)
		}
	}
	t.Logf("%d fires during a scheduler's 5 s freeze, the latest %.0f ms after its time", len(fires), worst)
	if worst > 1000 {
		t.Errorf("a fire %.0f ms late during a scheduler's freeze, want at most 1 s", worst)
	}
}

// heartbeatingWorker registers a worker over nc and heartbeats for it every
// 300 ms until ctx ends: a worker that is alive throughout, as far as the
// reapers can tell.
func heartbeatingWorker(t *testing.T, ctx context.Context, nc *nats.Conn) uuid.UUID {
	t.Helper()
	id := uuid.New()
	publish := func(subject string, m protocol.Message) {
		data, err := protocol.Encode(m)
		if err != nil {
			t.Error(err)
			return
		}
		_ = nc.Publish(subject, data)
	}
	publish(protocol.SubjectWorkerRegister("default"), &protocol.WorkerRegister{WorkerID: id, Namespace: "default", Queue: "default",
		Types: []protocol.TypeVersion{{Type: "T"}}, MaxConcurrency: 1})
	go func() {
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				publish(protocol.SubjectWorkerHeartbeat("default"), &protocol.Heartbeat{WorkerID: id, Namespace: "default",
					Queue: "default", SentAt: time.Now().UTC()})
			}
		}
	}()
	return id
}

// TestFrozenStandbyDeposesNoOne freezes the relay's and the reaper's
// standbys (SIGSTOP) for 20 s while their leaders stay healthy, then
// resumes them: a standby that resumes finds the leader's beacons stale by
// the length of its own freeze, and the leader's lock session idle, as a
// lock session always is. It must listen again rather than end that
// session: no session ended, no leader stepped down, no leader changed.
//
// It runs on a server with the deployment's pings, which closes the
// frozen standby's connection (it reconnects on resuming, having missed
// every beacon), and on one with NATS's defaults, which keeps it (the
// beacons wait in its socket).
func TestFrozenStandbyDeposesNoOne(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	for _, c := range pingCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			frozenStandby(t, c.start(t))
		})
	}
}

func frozenStandby(t *testing.T, ns *testnats.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	env := frozenLeaderEnv(dbURL, ns.URL())

	elections := startElections(t, ctx, st, env, "leader", "frozen standby")
	for _, e := range elections {
		e.standby.signal(t, syscall.SIGSTOP)
	}
	time.Sleep(20 * time.Second)
	for _, e := range elections {
		e.standby.signal(t, syscall.SIGCONT)
	}
	// Each resumed standby has a silence window and more to hear the
	// leader's beacons, and would have acted by now if it were going to
	// (the deposal this guards against came 35 ms after SIGCONT).
	time.Sleep(leaderBound)
	for _, e := range elections {
		if n := e.standby.count("leader silent: its session ended"); n > 0 {
			t.Errorf("%s: the resumed standby ended the healthy leader's session %d times", e.service, n)
		}
		if e.leader.logged(e.stepsDown) {
			t.Errorf("%s: the healthy leader stepped down after its standby resumed", e.service)
		}
		if e.standby.logged(e.leads) {
			t.Errorf("%s: the resumed standby took over from a healthy leader", e.service)
		}
		if held, waiting, err := st.LockSessions(ctx, e.key); err != nil || held != 1 || waiting != 1 {
			t.Errorf("%s: %d holders of its lock and %d waiting (%v), want 1 and 1", e.service, held, waiting, err)
		}
	}
}
