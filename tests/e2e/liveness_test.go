package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Losing a dispatcher must not strand the workers whose requests it held:
// a worker keeps one request parked in one dispatcher, and without news of
// its death it would wait for the request's renewal (30 s by default).

// observer follows, from its own connection, the dispatchers' beacons,
// relay announcements and the workers' work requests.
type observer struct {
	mu       sync.Mutex
	beacons  map[uuid.UUID]int
	taken    map[uuid.UUID]bool
	requests map[uuid.UUID]int
	relayUps int
	changed  chan struct{}
}

func observe(t *testing.T, nc *nats.Conn) *observer {
	t.Helper()
	o := &observer{beacons: map[uuid.UUID]int{}, taken: map[uuid.UUID]bool{}, requests: map[uuid.UUID]int{},
		changed: make(chan struct{}, 1)}
	handle := func(m *nats.Msg) {
		o.mu.Lock()
		switch m.Subject {
		case protocol.SubjectDispatcherBeacon:
			var b protocol.DispatcherBeacon
			if protocol.Decode(m.Data, &b) == nil && !b.Leaving {
				o.beacons[b.DispatcherID]++
			}
		case protocol.SubjectRelayUp:
			o.relayUps++
		default:
			var r protocol.WorkRequest
			if protocol.Decode(m.Data, &r) == nil {
				o.requests[r.WorkerID]++
			}
		}
		o.mu.Unlock()
		select {
		case o.changed <- struct{}{}:
		default:
		}
	}
	for _, s := range []string{protocol.SubjectDispatcherBeacon, protocol.SubjectRelayUp, protocol.SubjectWorkAll, protocol.SubjectDirectWorkAll} {
		if _, err := nc.Subscribe(s, handle); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return o
}

// until waits for cond, re-checked at every message observed.
func (o *observer) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		ok := cond()
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// newDispatcher waits for a dispatcher not returned before to publish its
// second beacon: the first one precedes its subscriptions, the periodic
// ones follow them, so it takes work requests by then.
func (o *observer) newDispatcher(t *testing.T) {
	t.Helper()
	o.until(t, "a new dispatcher beacons", func() bool {
		for id, n := range o.beacons {
			if n >= 2 && !o.taken[id] {
				o.taken[id] = true
				return true
			}
		}
		return false
	})
}

func (o *observer) requestsOf(id uuid.UUID) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests[id]
}

// inProcessDispatcher is a dispatcher (and relay, if enabled) in the test
// process, on its own connection.
func inProcessDispatcher(t *testing.T, st *store.Store, url string, ns *testnats.Server, relay bool) (d *dispatcher.Dispatcher, stop func()) {
	t.Helper()
	comps := dispatcher.Assemble(dispatcherConfig(t, url, func(c *dispatcher.Config) { c.Relay = relay }),
		st, ns.Connect(t), nil).Components
	d = comps[0].(*dispatcher.Dispatcher)
	var started []lifecycle.Component
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
	for _, c := range comps {
		if err := c.Start(context.Background()); err != nil {
			stop()
			t.Fatal(err)
		}
		started = append(started, c)
	}
	t.Cleanup(stop)
	return d, stop
}

// cluster is a database and a NATS server watched by an observer, a store
// on them, and a dispatcher process, A, that takes work requests and takes
// part in the relay election if relays; if not, a relay of its own relays.
type cluster struct {
	url string
	ns  *testnats.Server
	st  *store.Store
	obs *observer
	a   *proc
}

// startCluster starts a cluster and waits until A takes work requests and
// a relay is up. The store's statements are counted in stmts, if given.
func startCluster(t *testing.T, relays bool, stmts *stmtcount.Counter, natsStart func(testing.TB) *testnats.Server) *cluster {
	t.Helper()
	url := testdb.New(t)
	ns := natsStart(t)
	c := &cluster{url: url, ns: ns, st: openStore(t, url, stmts), obs: observe(t, ns.Connect(t))}
	if !relays {
		startRelay(t, url, ns.Connect(t))
	}
	c.a = spawnDispatcher(t, url, ns.URL(), relays)
	c.obs.newDispatcher(t)
	c.obs.until(t, "a relay is up", func() bool { return c.obs.relayUps > 0 })
	return c
}

// failover measures, over several rounds, how long after a dispatcher
// holding an idle worker's request is SIGKILLed (or, with frozen,
// SIGSTOPped) a run started right then begins, and the same after a
// graceful stop. With relays, every dispatcher takes part in the relay
// election and the killed one relays; without, a relay of its own relays
// and the killed one does not.
func failover(t *testing.T, relays, frozen bool, natsStart func(testing.TB) *testnats.Server) (killed, stopped []time.Duration) {
	c := startCluster(t, relays, nil, natsStart)
	url, ns, st, obs, a := c.url, c.ns, c.st, c.obs, c.a
	ctx := context.Background()

	marks := make(chan time.Time, 1)
	proceed := make(chan struct{})
	// The default wait timeout (30 s): what a stranded worker waits.
	w := startWorker(t, ns, worker.Config{MaxConcurrency: 1}, func(w *worker.Worker) error {
		return worker.Register(w, "Mark", func(ctx workflow.Context, _ int) (int, error) {
			marks <- time.Now()
			<-proceed
			return 0, nil
		})
	})
	// Its request is parked in A, the only dispatcher.
	obs.until(t, "the worker asks for work", func() bool { return obs.requests[w.ID()] >= 1 })
	cl := newClient(t, st, ns.Connect(t))

	// runAfter starts a run and returns how long after since it began; the
	// worker's next request has gone out when it returns.
	runAfter := func(since time.Time, what string) time.Duration {
		t.Helper()
		h, err := cl.Start(ctx, "Mark", 0, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var took time.Duration
		select {
		case at := <-marks:
			took = at.Sub(since)
		case <-time.After(45 * time.Second):
			t.Fatalf("%s: the run did not start within 45 s", what)
		}
		n := obs.requestsOf(w.ID())
		proceed <- struct{}{}
		if _, err := result[int](t, h, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		obs.until(t, "the worker asks again", func() bool { return obs.requests[w.ID()] > n })
		return took
	}

	// B: a dispatcher in this process, started once the request is in A.
	_, stopB := inProcessDispatcher(t, st, url, ns, relays)
	obs.newDispatcher(t)
	for round := 0; round < 5; round++ {
		// The rounds would otherwise kill right after a beacon of A's:
		// let the kills land anywhere between two.
		time.Sleep(rand.N(time.Second))
		var at time.Time
		if frozen {
			at = a.freeze()
			killed = append(killed, runAfter(at, fmt.Sprintf("round %d, freeze", round)))
			a.kill()
		} else {
			at = a.kill()
			killed = append(killed, runAfter(at, fmt.Sprintf("round %d, kill", round)))
		}
		// The request is in B now; a new A comes up, B stops gracefully
		// and the request moves to A.
		a = spawnDispatcher(t, url, ns.URL(), relays)
		obs.newDispatcher(t)
		at = time.Now()
		stopB()
		stopped = append(stopped, runAfter(at, fmt.Sprintf("round %d, graceful stop", round)))
		_, stopB = inProcessDispatcher(t, st, url, ns, relays)
		obs.newDispatcher(t)
	}
	t.Logf("worker renewals: %d", w.Stats().Renewals)
	return killed, stopped
}

// A dispatcher that does not relay is SIGKILLed while it holds an idle
// worker's request: the worker hears it fall silent and renews its request
// with another dispatcher within a few beacon intervals, well within the
// time the reaper takes to declare a worker dead (KAGZI_WORKER_TIMEOUT,
// 6 s), not after its 30 s wait timeout.
func TestKilledDispatcherStrandsNoWorker(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	checkFailover(t, false)
}

// A dispatcher that does not relay is frozen (SIGSTOP) while it holds an
// idle worker's request: it stays a member of the dispatchers' queue group
// until NATS closes its connection for unanswered PINGs (3 to 4 s with the
// deployment's pings, minutes with nats-server's defaults), but the worker
// addressed its request to it and, when its beacons fall silent, renews
// the request with a dispatcher it still hears. The next run starts within
// frozenDispatcherBound, whatever the server's pings.
func TestFrozenDispatcherStrandsNoWorker(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	for _, c := range pingCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			killed, stopped := failover(t, false, true, c.start)
			t.Logf("SIGSTOP → next run starts: %v; graceful stop → next run starts: %v", killed, stopped)
			for i, d := range killed {
				if d > frozenDispatcherBound {
					t.Errorf("round %d: the run started %v after the freeze, want within %v", i, d, frozenDispatcherBound)
				}
			}
		})
	}
}

// frozenDispatcherBound: the beacons' silence (3 s), a renewal, plus
// slack for a loaded test machine.
const frozenDispatcherBound = 7 * time.Second

// The dispatcher SIGKILLed relays: the relay usually moves to another
// dispatcher within milliseconds (the dead session's advisory lock goes
// with it), and its relay.up makes the worker renew at once; when the
// standby was not yet queued on the lock, the beacons' silence still bounds
// the wait as for any dispatcher.
func TestKilledRelayDispatcherStrandsNoWorker(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	checkFailover(t, true)
}

// checkFailover runs failover and checks the next run starts within 6 s of
// a SIGKILL and within 2 s of a graceful stop.
func checkFailover(t *testing.T, relays bool) {
	t.Helper()
	killed, stopped := failover(t, relays, false, testnats.Start)
	t.Logf("SIGKILL → next run starts: %v; graceful stop → next run starts: %v", killed, stopped)
	for i, d := range killed {
		if d > 6*time.Second {
			t.Errorf("round %d: the run started %v after the kill, want within 6 s", i, d)
		}
	}
	for i, d := range stopped {
		if d > 2*time.Second {
			t.Errorf("round %d: the run started %v after the graceful stop, want within 2 s", i, d)
		}
	}
}

// What liveness costs: idle, beacons cost NATS a message per dispatcher
// per second (each worker receives them all) and Postgres nothing; losing
// the dispatcher that held every worker's request costs a renewal per
// worker and, on the dispatcher that takes them, one claim (and its
// next-due read) per queue it knew nothing of; with the relay lost too,
// one backlog read more.
func TestFailoverCost(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	for _, relays := range []bool{false, true} {
		t.Run(fmt.Sprintf("relays=%v", relays), func(t *testing.T) {
			const workers = 4
			stmts := &stmtcount.Counter{}
			c := startCluster(t, relays, stmts, testnats.Start)
			obs := c.obs
			var ws []*worker.Worker
			for i := 0; i < workers; i++ {
				ws = append(ws, startWorker(t, c.ns, worker.Config{}, threeSteps(newCounter())))
			}
			obs.until(t, "every worker parked its request in A", func() bool {
				for _, w := range ws {
					if obs.requests[w.ID()] < 1 {
						return false
					}
				}
				return true
			})
			b, _ := inProcessDispatcher(t, c.st, c.url, c.ns, relays)
			obs.newDispatcher(t)

			const idle = 5 * time.Second
			obs.mu.Lock()
			beaconsBefore := obs.total()
			obs.mu.Unlock()
			// A claim is one batch of two statements, which the counter
			// (a query tracer) does not see: claims are counted apart.
			before, claims := stmts.Load(), b.Stats().Claims
			time.Sleep(idle) // the measured idle window itself
			idleStmts := stmts.Load() - before + 2*(b.Stats().Claims-claims)
			obs.mu.Lock()
			beacons := obs.total() - beaconsBefore
			requests := map[uuid.UUID]int{}
			for _, w := range ws {
				requests[w.ID()] = obs.requests[w.ID()]
			}
			obs.mu.Unlock()
			if idleStmts > 0 {
				t.Errorf("idle for %v with two dispatchers and %d workers: %d statements, want none", idle, workers, idleStmts)
			}

			before, claims = stmts.Load(), b.Stats().Claims
			c.a.kill()
			obs.until(t, "every worker renewed its request", func() bool {
				for _, w := range ws {
					if obs.requests[w.ID()] == requests[w.ID()] {
						return false
					}
				}
				return true
			})
			waitUntil(t, 10*time.Second, "the surviving dispatcher to hold every request", func() bool { return b.Stats().Parked >= workers })
			if p := b.Stats().Parked; p != workers {
				t.Fatalf("the surviving dispatcher holds %d requests, want %d", p, workers)
			}
			// What the renewals set off (claims, next-due reads) is done
			// within a second: the measured window ends then.
			time.Sleep(time.Second)
			failClaims := b.Stats().Claims - claims
			failStmts := stmts.Load() - before + 2*failClaims
			var renewals uint64
			for _, w := range ws {
				renewals += w.Stats().Renewals
			}
			t.Logf("idle %v: %d statements, %.1f beacons/s on NATS (each worker receives all of them); "+
				"failover: %d statements (%d claims) for %d workers, %d renewals in all",
				idle, idleStmts, float64(beacons)/idle.Seconds(), failStmts, failClaims, workers, renewals)
			// A backlog read, then a claim (two statements) and its next-due
			// read for the queue, not for each worker. When the relay moved,
			// the new relay's backlog read forgets what the survivor knew to
			// be empty, and renewals that land after it cost one more claim
			// and next-due read: at most two, whatever the number of workers.
			limit := int64(4)
			if relays {
				limit = 7
			}
			if failStmts > limit || failClaims > 2 {
				t.Errorf("failover cost %d statements and %d claims for %d workers, want at most %d and 2", failStmts, failClaims, workers, limit)
			}
		})
	}
}

// total is the number of beacons observed.
func (o *observer) total() int {
	n := 0
	for _, c := range o.beacons {
		n += c
	}
	return n
}
