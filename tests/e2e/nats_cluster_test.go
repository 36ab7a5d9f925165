package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/services/reaper"
	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// TestNATSClusterNodeKilled runs the services on a three-node NATS cluster
// (every connection given all three nodes) and shuts down, mid-load, the
// node the dispatcher is connected to: deliveries, reports and replies in
// flight through it are lost, and every connection on it moves to another
// node. Every run must still complete, once, with each step's result
// recorded once and the output built from them.
func TestNATSClusterNodeKilled(t *testing.T) {
	skipUnderAuth(t)
	const (
		runs  = 300
		steps = 3
	)
	nodes := testnats.StartCluster(t, 3)
	url := testdb.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	var mu sync.Mutex
	executed := map[string]int{} // run/step → executions of its function
	var started atomic.Int64
	register := func(w *worker.Worker) error {
		return worker.Register(w, "Tri", func(ctx workflow.Context, n int) (int, error) {
			started.Add(1)
			sum := 0
			for i := 0; i < steps; i++ {
				v, err := workflow.Step(ctx, fmt.Sprintf("s%d", i), func(sctx context.Context) (int, error) {
					info, _ := workflow.StepInfoFrom(sctx)
					mu.Lock()
					executed[info.RunID+"/"+info.StepID]++
					mu.Unlock()
					// A little work, so that reports are in flight when
					// the node dies.
					time.Sleep(time.Millisecond)
					return n*10 + i, nil
				})
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		})
	}
	// Watch the relay come up on a node that stays.
	watch, err := nats.Connect(nodes[2].URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Close)
	relayUp := make(chan *nats.Msg, 16)
	if _, err := watch.ChanSubscribe(protocol.SubjectRelayUp, relayUp); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	rcfg, err := config.Defaults[reaper.Config](ctx)
	if err != nil {
		t.Fatal(err)
	}
	rcfg.WorkerTimeout, rcfg.FlushInterval, rcfg.LeaseGrace = 2*time.Second, 100*time.Millisecond, time.Second
	srv, err := devserver.Start(ctx, devserver.Options{
		DatabaseURL: url, NATSURL: testnats.ClusterURL(nodes), Dispatchers: 1, Workers: 2,
		Worker:   workersvc.Config{MaxConcurrency: 50, HeartbeatInterval: 200 * time.Millisecond},
		Reaper:   rcfg,
		Register: register,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	select {
	case <-relayUp:
	case <-time.After(10 * time.Second):
		t.Fatal("no relay came up")
	}
	// The dispatcher's node dies; the client is on another.
	victim := nodeOf(t, nodes, "kagzi-dev-dispatcher-0")
	nc := nodes[(victim+1)%len(nodes)].Connect(t)
	cl, err := client.NewFromStore(srv.Store, nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	reqs := make([]client.StartRequest, runs)
	for i := range reqs {
		reqs[i] = client.StartRequest{Type: "Tri", Input: i}
	}
	hs, err := cl.StartMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	// Mid-load: a third of the runs have started executing.
	waitUntil(t, 20*time.Second, "a third of the runs to start", func() bool { return started.Load() >= runs/3 })
	nodes[victim].Stop()
	t.Logf("killed node %d with %d of %d runs started", victim, started.Load(), runs)
	// The dispatcher's connection moved to a surviving node.
	survivors := append(append([]*testnats.Server(nil), nodes[:victim]...), nodes[victim+1:]...)
	waitUntil(t, 10*time.Second, "the dispatcher to reconnect to a surviving node", func() bool {
		return holds(t, survivors, "kagzi-dev-dispatcher-0")
	})

	waitAll(t, hs, 25*time.Second)

	ids := make([]uuid.UUID, len(hs))
	for i, h := range hs {
		ids[i] = h.RunID
		r, err := cl.Get(ctx, h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != client.StatusCompleted {
			t.Errorf("run %d: status %s (%s)", i, r.Status, r.Error)
			continue
		}
		if want := fmt.Sprint(i*10*steps + steps*(steps-1)/2); strings.TrimSpace(string(r.Output)) != want {
			t.Errorf("run %d: output %s, want %s", i, r.Output, want)
		}
		ss, err := srv.Store.StepsList(ctx, r.Namespace, h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		latest := map[string]int{}
		for _, s := range ss {
			if s.IsLatest && s.Status == store.StepCompleted {
				latest[s.StepID]++
			}
		}
		for j := 0; j < steps; j++ {
			if n := latest[fmt.Sprintf("s%d", j)]; n != 1 {
				t.Errorf("run %d step s%d: %d completed results, want 1", i, j, n)
			}
		}
	}
	mu.Lock()
	again := 0
	for _, n := range executed {
		if n > 1 {
			again++
		}
	}
	if len(executed) != runs*steps {
		t.Errorf("%d step functions ran, want %d", len(executed), runs*steps)
	}
	mu.Unlock()
	t.Logf("%d step functions ran more than once (a lost report; each result recorded once)", again)
}

// nodeOf is the index of the node holding the client connection named
// name.
func nodeOf(t *testing.T, nodes []*testnats.Server, name string) int {
	t.Helper()
	for i, n := range nodes {
		if holds(t, []*testnats.Server{n}, name) {
			return i
		}
	}
	t.Fatalf("no node holds connection %s", name)
	return -1
}

// holds reports whether one of nodes holds the client connection named
// name.
func holds(t *testing.T, nodes []*testnats.Server, name string) bool {
	t.Helper()
	for _, n := range nodes {
		cz, err := n.Connz()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cz.Conns {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// TestNATSClusterWorkerNodeFrozen freezes (SIGSTOP) for 12 or 20 s the node of a
// three-node NATS cluster that a worker is connected to, while runs flow
// at 10 starts/s. The worker's connection is made as the README shows,
// with nats.go's defaults: it pings its server every 2 minutes, so it
// would stay on the frozen node for the whole freeze. The worker notices
// instead: every dispatcher it heard falls silent at once, its server
// does not answer a flush, and it reconnects to another node. Step starts
// pause for at most frozenUnderLoadBound; every run completes, each step's
// result recorded once. On the pinned nats-server and on Debian's 2.9.
//
// `make test` runs it on Debian's server, frozen 12 s; `make test-faults`
// on both, frozen 20 s.
func TestNATSClusterWorkerNodeFrozen(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	freeze := 12 * time.Second
	if full() {
		freeze = 20 * time.Second
	}
	bins := testnats.Binaries(t)
	if !full() {
		bins = bins[len(bins)-1:]
	}
	for _, bin := range bins {
		t.Run(bin.Name, func(t *testing.T) {
			t.Parallel()
			clusterWorkerNodeFrozen(t, bin, freeze)
		})
	}
}

func clusterWorkerNodeFrozen(t *testing.T, bin testnats.Binary, freeze time.Duration) {
	const rate = 10
	nodes := testnats.StartClusterBinary(t, 3, bin)
	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	load := newSteady()
	// The services on nodes 1 and 2: what is measured is the worker's
	// own way off the frozen node.
	srv, err := devserver.Start(ctx, devserver.Options{
		DatabaseURL: url, NATSURL: testnats.ClusterURL(nodes[1:]), Dispatchers: 2, Workers: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	// The worker on node 0, with nats.go's default pings.
	wnc, err := nats.Connect(testnats.ClusterURL(nodes), nats.DontRandomize(), nats.MaxReconnects(-1),
		worker.Inbox("default", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	if got := wnc.ConnectedUrl(); got != nodes[0].URL() {
		t.Fatalf("worker connected to %s, want node 0 (%s)", got, nodes[0].URL())
	}
	w, err := worker.New(worker.Config{MaxConcurrency: 20}, wnc)
	if err != nil {
		t.Fatal(err)
	}
	if err := load.register(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cl := newClient(t, srv.Store, nodes[1].Connect(t))

	load.startFor(t, ctx, cl, rate, 3*time.Second)
	frozeAt := time.Now()
	if err := nodes[0].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	load.startFor(t, ctx, cl, rate, freeze)
	resumedAt := time.Now()
	if err := nodes[0].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	pause := load.check(t, frozeAt, resumedAt)
	t.Logf("%d runs; longest pause in step starts while the worker's node was frozen: %v; the worker left a silent server %d times; now on %s",
		len(load.runs), pause.Round(time.Millisecond), w.Stats().ServerSilent, wnc.ConnectedUrl())
	if pause > frozenUnderLoadBound {
		t.Errorf("step starts paused for %v while the worker's NATS node was frozen, want at most %v", pause.Round(time.Millisecond), frozenUnderLoadBound)
	}
}
