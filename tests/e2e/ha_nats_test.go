package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The TestHANATS tests run Kagzi on a three-node NATS cluster and take
// one node away under a steady load (10 starts/s of three-step runs),
// each in its own way: killed, frozen (SIGSTOP), partitioned away (its
// packets dropped, no FIN or RST), and the whole cluster restarted. Every
// process is given every node's URL: the dispatchers, reaper and
// scheduler are processes of their own, connected as `kagzi serve`
// connects (internal/natsutil), and the worker is the application's,
// connected as docs/deployment.md shows, with nats.go's default pings. Each
// case counts the runs lost (acknowledged, never completed), the steps
// whose result was recorded more than once and the step functions that
// ran again, and measures the recovery: the longest pause in step starts
// across the fault.
//
// `go test` runs one quick case of each kind, on one server build and
// with short faults; KAGZI_HA_FULL=1 (`make test-ha`) runs each on the
// pinned nats-server and on Debian's 2.9, for the node of the relay
// leader and for the worker's node, with 20 s faults.

// haNATSFull says whether the full matrix of the NATS cluster cases runs.
func haNATSFull() bool { return os.Getenv("KAGZI_HA_FULL") != "" }

const (
	// haNodeKilledBound is the longest pause in step starts a killed
	// node may cost: its clients see their connections close and
	// reconnect at once.
	haNodeKilledBound = 2 * time.Second
	// haSilentNodeBound is the longest a frozen or cut-off node may cost:
	// its clients notice by their pings, or a worker by the silence of
	// every dispatcher it heard (frozenUnderLoadBound).
	haSilentNodeBound = frozenUnderLoadBound
	// haRate is the load's starts per second.
	haRate = 10
)

// haCase is one case of the matrix: a server build and the role of the
// process whose node the fault takes away.
type haCase struct {
	bin  testnats.Binary
	role string // "dispatcher" (the relay leader's node) or "worker"
}

func (c haCase) name() string { return c.role + "/" + c.bin.Name }

// haCases returns the cases of a fault: the quick one (build quick of
// Binaries, the relay leader's node) and, under KAGZI_HA_FULL, every
// build for each of roles. The others are skipped with a word.
func haCases(t *testing.T, quick int, roles ...string) (run, skipped []haCase) {
	t.Helper()
	bins := testnats.Binaries(t)
	q := haCase{bin: bins[min(quick, len(bins)-1)], role: roles[0]}
	for _, r := range roles {
		for _, b := range bins {
			c := haCase{bin: b, role: r}
			if haNATSFull() || c == q {
				run = append(run, c)
			} else {
				skipped = append(skipped, c)
			}
		}
	}
	return run, skipped
}

// haRun runs each case of a fault as a subtest, one at a time. The quick
// cases run beside the rest of the suite (t.Parallel), the full matrix on
// its own, so that its figures are those of an unloaded machine.
func haRun(t *testing.T, quick int, roles []string, fn func(t *testing.T, c haCase)) {
	if !haNATSFull() {
		t.Parallel()
	}
	run, skipped := haCases(t, quick, roles...)
	for _, c := range run {
		t.Run(c.name(), func(t *testing.T) { fn(t, c) })
	}
	for _, c := range skipped {
		t.Run(c.name(), func(t *testing.T) {
			t.Skip("the full matrix runs with KAGZI_HA_FULL=1 (make test-ha)")
		})
	}
}

// TestHANATSNodeKilled kills (SIGKILL) the node of the relay leader, or
// of the worker: its clients see their connections close and move to
// another node. 0 runs lost, no step result recorded twice, step starts
// pause for at most haNodeKilledBound.
func TestHANATSNodeKilled(t *testing.T) {
	skipUnderAuth(t)
	haRun(t, 0, []string{"dispatcher", "worker"}, func(t *testing.T, c haCase) {
		r := startHARig(t, c, false)
		r.fault("killed", 8*time.Second, haNodeKilledBound,
			func() { r.nodes[r.victim].Stop() }, func() {})
	})
}

// TestHANATSNodeFrozen freezes (SIGSTOP) the node of the relay leader, or
// of the worker, for 10 s (20 s in the full matrix): its kernel keeps
// every TCP session open, so only pings tell. The services' connections
// ping every second (internal/natsutil) and leave it; the worker's, with
// nats.go's defaults, would stay for 2 minutes, and leaves it when every
// dispatcher it heard falls silent and the node does not answer a flush.
// 0 runs lost, no step result recorded twice, step starts pause for at
// most haSilentNodeBound.
func TestHANATSNodeFrozen(t *testing.T) {
	skipUnderAuth(t)
	haRun(t, 1, []string{"dispatcher", "worker"}, func(t *testing.T, c haCase) {
		r := startHARig(t, c, false)
		r.fault("frozen", haHold(), haSilentNodeBound,
			func() {
				if err := r.nodes[r.victim].Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			},
			func() {
				if err := r.nodes[r.victim].Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			})
	})
}

// TestHANATSNodePartitioned cuts the node of the relay leader, or of the
// worker, off from the other nodes and from every client for 10 s (20 s
// in the full matrix): each node runs in a network namespace of its own,
// bridged to the others and the host, and the victim's link goes down,
// so its packets vanish with no FIN or RST. 0 runs lost, no step result
// recorded twice, step starts pause for at most haSilentNodeBound.
func TestHANATSNodePartitioned(t *testing.T) {
	skipUnderAuth(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the nodes run in network namespaces (ip netns) that the test cuts off")
	}
	haRun(t, 0, []string{"dispatcher", "worker"}, func(t *testing.T, c haCase) {
		r := startHARig(t, c, true)
		r.fault("partitioned", haHold(), haSilentNodeBound,
			func() { r.net.link(t, r.victim, "down") }, func() { r.net.link(t, r.victim, "up") })
	})
}

// TestHANATSClusterRestarted stops every node of the cluster for 5 s
// (10 s in the full matrix) and starts them again, on the same ports,
// while runs are started: a start in the outage may fail with an error at
// the client, and every start acknowledged completes, each step's result
// recorded once. The recovery is the longest pause in step starts from
// the cluster's return.
func TestHANATSClusterRestarted(t *testing.T) {
	skipUnderAuth(t)
	outage := 5 * time.Second
	if haNATSFull() {
		outage = 10 * time.Second
	}
	haRun(t, 1, []string{"all"}, func(t *testing.T, c haCase) {
		r := startHARig(t, c, false)
		r.load.begin(t, r.ctx, r.cl)
		r.load.wait(3 * time.Second)
		downAt := time.Now()
		for _, n := range r.nodes {
			n.Stop()
		}
		r.load.wait(outage)
		for _, n := range r.nodes {
			n.Restart(t)
		}
		upAt := time.Now()
		r.load.wait(8 * time.Second)
		r.load.end()
		res := r.check(upAt, upAt.Add(8*time.Second))
		t.Logf("cluster restarted (%s): down %.1f s; %d runs started, %d starts refused in the outage (first: %v); recovery (longest pause in step starts after the restart): %v; lost %d, duplicate results %d, steps re-executed %d",
			c.bin.Name, upAt.Sub(downAt).Seconds(), len(r.load.runs), r.load.refused, r.load.firstErr, res.pause.Round(time.Millisecond), res.lost, res.dups, res.again)
		res.assert(t, 0)
	})
}

// haHold is how long a frozen or cut-off node stays so.
func haHold() time.Duration {
	if haNATSFull() {
		return 20 * time.Second
	}
	return 10 * time.Second
}

// haRig is a three-node cluster, the services as processes of their own,
// the application's worker and a client, and the load.
type haRig struct {
	t      *testing.T
	ctx    context.Context
	c      haCase
	nodes  []*testnats.Server
	net    *bridgeNet // when the nodes run in network namespaces
	st     *store.Store
	victim int // the node the fault takes away
	wnc    *nats.Conn
	w      *worker.Worker
	cl     *client.Client
	load   *haLoad
}

// startHARig starts the cluster (in network namespaces if partitioned),
// a dispatcher that leads the relay, then a second dispatcher, a reaper
// and a scheduler, every one of them given every node; the victim is the
// relay leader's node, or for the worker's role a node the worker is
// moved to. The client is on a node the fault spares.
func startHARig(t *testing.T, c haCase, partitioned bool) *haRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	r := &haRig{t: t, ctx: ctx, c: c, load: &haLoad{steady: newSteady()}}
	opts := testnats.ClusterOptions{Binary: c.bin}
	if partitioned {
		ip, err := exec.LookPath("ip")
		if err != nil {
			t.Fatal("the ip command (iproute2) is missing: apt-get install iproute2 (make test installs it when run as root)")
		}
		r.net = newBridgeNet(t, ctx, ip, 3)
		opts.Hosts = r.net.nodeIPs
		opts.Prefix = func(i int) []string { return []string{ip, "netns", "exec", r.net.ns[i]} }
	}
	r.nodes = testnats.StartClusterWith(t, 3, opts)
	db := testdb.New(t)
	pool, err := store.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.st = store.New(pool, store.Options{})

	env := []string{"KAGZI_DATABASE_URL=" + db, "KAGZI_NATS_URL=" + testnats.ClusterURL(r.nodes),
		"KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info"}
	leader := startChild(t, "dispatcher 0", env, "dispatcher")
	if _, err := leader.await(ctx, "relay is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatalf("dispatcher 0: %v", err)
	}
	// Alone so far: its node is the one holding a dispatcher.
	lnode := nodeOf(t, r.nodes, "kagzi-dispatcher")
	startChild(t, "dispatcher 1", env, "dispatcher")
	startChild(t, "reaper", env, "reaper")
	startChild(t, "scheduler", env, "scheduler")

	// The worker's connection as docs/deployment.md shows it, every node listed;
	// DontRandomize puts it on the first, the fault's victim for the
	// worker's role and another node for the others.
	r.victim = lnode
	wnode := (lnode + 1) % 3
	if c.role == "worker" {
		r.victim = wnode
	}
	urls := make([]*testnats.Server, 0, 3)
	for i := range 3 {
		urls = append(urls, r.nodes[(wnode+i)%3])
	}
	r.wnc, err = nats.Connect(testnats.ClusterURL(urls), nats.DontRandomize(), worker.Inbox("default", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.wnc.Close)
	// The worker's log, shown when the case fails.
	wlog := &lockedLog{}
	t.Cleanup(func() {
		if t.Failed() {
			wlog.dump(t, "worker")
		}
	})
	r.w, err = worker.New(worker.Config{MaxConcurrency: 20, Logger: slog.New(slog.NewJSONHandler(wlog, &slog.HandlerOptions{Level: slog.LevelInfo}))}, r.wnc)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.load.register(r.w); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.w.Stop)
	// The client on the node neither the leader nor the worker is on
	// (for the worker's role, the leader's).
	cnode := (lnode + 2) % 3
	if c.role == "worker" {
		cnode = lnode
	}
	r.cl = newClient(t, r.st, r.nodes[cnode].Connect(t))
	t.Logf("relay leader on node %d, worker on node %d, client on node %d; the fault takes node %d", lnode, wnode, cnode, r.victim)
	return r
}

// fault runs the load for 3 s, does (the fault), runs it for hold, undoes
// the fault, runs it 3 s more, and checks the runs: 0 lost, no step result
// recorded twice, and step starts paused for at most bound between the
// fault and its end.
func (r *haRig) fault(kind string, hold, bound time.Duration, do, undo func()) {
	t := r.t
	t.Helper()
	r.load.begin(t, r.ctx, r.cl)
	r.load.wait(3 * time.Second)
	at := time.Now()
	do()
	r.load.wait(hold)
	endAt := time.Now()
	undo()
	r.load.wait(3 * time.Second)
	r.load.end()
	res := r.check(at, endAt)
	t.Logf("node %s (%s server, the %s's node; watched %.0f s): %d runs started, %d refused; recovery (longest pause in step starts): %v; lost %d, duplicate results %d, steps re-executed %d; the worker left a silent server %d times, now on %s",
		kind, r.c.bin.Name, r.c.role, hold.Seconds(), len(r.load.runs), r.load.refused, res.pause.Round(time.Millisecond),
		res.lost, res.dups, res.again, r.w.Stats().ServerSilent, r.wnc.ConnectedUrl())
	res.assert(t, bound)
	if r.load.refused > 0 {
		t.Errorf("%d starts failed while one node of three was away (first: %v)", r.load.refused, r.load.firstErr)
	}
}

// haResult is what a case measured.
type haResult struct {
	pause             time.Duration
	lost, dups, again int
}

// assert fails t for a lost run, a duplicate result or (bound > 0) a pause
// over bound.
func (res haResult) assert(t *testing.T, bound time.Duration) {
	t.Helper()
	if res.lost > 0 {
		t.Errorf("%d acknowledged runs did not complete", res.lost)
	}
	if res.dups > 0 {
		t.Errorf("%d steps have more than one completed result", res.dups)
	}
	if bound > 0 && res.pause > bound {
		t.Errorf("step starts paused for %v, want at most %v", res.pause.Round(time.Millisecond), bound)
	}
}

// check waits (up to a minute in all) for every run the load started and
// counts the lost ones, the steps with more than one completed result
// and the step functions that ran more than once; pause is the longest
// pause in step starts between from and to.
func (r *haRig) check(from, to time.Time) haResult {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	var res haResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, run := range r.load.runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var out int
			err := run.h.Result(ctx, &out)
			if err == nil {
				var ss []store.Step
				if ss, err = r.st.StepsList(ctx, "default", run.h.RunID); err == nil {
					done := map[string]int{}
					for _, s := range ss {
						if s.IsLatest && s.Status == store.StepCompleted {
							done[s.StepID]++
						}
					}
					mu.Lock()
					for _, n := range done {
						if n > 1 {
							res.dups++
						}
					}
					mu.Unlock()
					if len(done) != 3 {
						err = fmt.Errorf("%d of 3 steps completed", len(done))
					}
				}
			}
			if err != nil {
				mu.Lock()
				res.lost++
				if res.lost <= 5 {
					t.Logf("run %s (started %s): %v", run.h.RunID, run.at.Format(time.StampMilli), err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s := r.load.steady
	s.mu.Lock()
	for _, n := range s.steps {
		if n > 1 {
			res.again++
		}
	}
	s.mu.Unlock()
	res.pause = s.pauseIn(from, to)
	return res
}

// pauseIn is the longest pause in step starts between from and to: from
// to the first start after it, every gap, the last start before to to to.
func (s *steady) pauseIn(from, to time.Time) time.Duration {
	s.mu.Lock()
	times := append([]time.Time(nil), s.starts...)
	s.mu.Unlock()
	sortTimes(times)
	last, pause := from, time.Duration(0)
	for _, at := range times {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			at = to
		}
		pause = max(pause, at.Sub(last))
		last = at
		if !at.Before(to) {
			return pause
		}
	}
	return max(pause, to.Sub(last))
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// haLoad is a steady load started in the background, so that a fault
// that blocks (a restart) does not hold the starts; a start that fails is
// counted, not fatal: in a whole cluster's outage a start may fail.
type haLoad struct {
	*steady
	refused  int
	firstErr error
	stop     chan struct{}
	done     chan struct{}
}

// begin starts haRate runs per second through cl until end.
func (l *haLoad) begin(t *testing.T, ctx context.Context, cl *client.Client) {
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / haRate)
		defer tick.Stop()
		for {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			h, err := cl.Start(sctx, "Steps", 0, client.StartOptions{})
			cancel()
			if err != nil {
				l.refused++
				if l.firstErr == nil {
					l.firstErr = err
				}
			} else {
				l.runs = append(l.runs, steadyStarted{at: time.Now(), h: h})
			}
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// wait lets the load run for d.
func (l *haLoad) wait(d time.Duration) { time.Sleep(d) }

// end stops the load and returns once it has.
func (l *haLoad) end() {
	close(l.stop)
	<-l.done
}

// bridgeNet runs each node of a cluster in a network namespace of its
// own, its link a port of a bridge on the host that has an address in the
// same subnet: the nodes reach each other and the host's processes reach
// every node. Taking a node's link down cuts it off from all of them.
type bridgeNet struct {
	ip      string
	bridge  string
	ns      []string // the namespaces, by node
	nsIf    []string
	nodeIPs []string
}

// newBridgeNet creates the bridge and n namespaces, removed when t ends.
func newBridgeNet(t *testing.T, ctx context.Context, ip string, n int) *bridgeNet {
	t.Helper()
	id := fmt.Sprintf("%d%02d", os.Getpid()%100000, rand.IntN(100))
	b := &bridgeNet{ip: ip, bridge: "kgzb" + id}
	hostIP, prefix := freeSubnet24(t)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, ip, args...).CombinedOutput(); err != nil {
			if s := string(out); strings.Contains(s, "not permitted") || strings.Contains(s, "Permission denied") {
				t.Skipf("network namespaces are not available here: ip %s: %s", strings.Join(args, " "), strings.TrimSpace(s))
			}
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		for i := range b.ns {
			_ = exec.Command(ip, "link", "del", fmt.Sprintf("kgzh%s%d", id, i)).Run()
			if out, err := exec.Command(ip, "netns", "del", b.ns[i]).CombinedOutput(); err != nil {
				t.Logf("ip netns del %s: %v: %s", b.ns[i], err, out)
			}
		}
		_ = exec.Command(ip, "link", "del", b.bridge).Run()
	})
	run("link", "add", b.bridge, "type", "bridge")
	run("addr", "add", hostIP+"/24", "dev", b.bridge)
	run("link", "set", b.bridge, "up")
	for i := range n {
		ns, hostIf, nsIf := fmt.Sprintf("kagzi-ha-%s-%d", id, i), fmt.Sprintf("kgzh%s%d", id, i), fmt.Sprintf("kgzn%s%d", id, i)
		addr := fmt.Sprintf("%s.%d", prefix, i+2)
		run("netns", "add", ns)
		b.ns = append(b.ns, ns)
		run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", ns)
		run("link", "set", hostIf, "master", b.bridge)
		run("link", "set", hostIf, "up")
		run("-n", ns, "addr", "add", addr+"/24", "dev", nsIf)
		run("-n", ns, "link", "set", nsIf, "up")
		run("-n", ns, "link", "set", "lo", "up")
		b.nsIf = append(b.nsIf, nsIf)
		b.nodeIPs = append(b.nodeIPs, addr)
	}
	return b
}

// link sets node i's link down (cut off: its packets and those sent to
// it vanish, no FIN or RST) or up again.
func (b *bridgeNet) link(t *testing.T, i int, state string) {
	t.Helper()
	if out, err := exec.Command(b.ip, "-n", b.ns[i], "link", "set", b.nsIf[i], state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", b.nsIf[i], state, err, out)
	}
}

// freeSubnet24 picks a /24 of 198.18.0.0/15 (reserved for network tests)
// that no interface of the host uses, and returns its first address and
// its first three octets.
func freeSubnet24(t *testing.T) (host, prefix string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		base := net.IPv4(198, 18+byte(rand.IntN(2)), byte(rand.IntN(256)), 0).To4()
		subnet := &net.IPNet{IP: base, Mask: net.CIDRMask(24, 32)}
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(base)) {
				used = true
			}
		}
		if !used {
			prefix = fmt.Sprintf("%d.%d.%d", base[0], base[1], base[2])
			return prefix + ".1", prefix
		}
	}
	t.Fatal("no free /24 in 198.18.0.0/15")
	return "", ""
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

// lockedLog keeps the lines a logger writes, for a failed test to show.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dump logs the last 200 lines as name's.
func (l *lockedLog) dump(t *testing.T, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines[max(0, len(l.lines)-200):] {
		t.Logf("%s: %s", name, line)
	}
}
