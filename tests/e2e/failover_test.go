package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/pgcluster"
	"github.com/kagzi/kagzi/tests/testnats"
)

// failoverBound is how soon after its leader's host is cut off from the
// network a standby must lead (docs/ARCHITECTURE.md, Recovery).
const failoverBound = 15 * time.Second

// notifyAfterCut is when the test makes Postgres notify the cut-off relay:
// just before the silence of an idle session ends it (about 4 to 5 s after
// the cut, see pkg/store's lockConnConfig).
const notifyAfterCut = 3500 * time.Millisecond

// TestFailoverNetworkCut runs a dispatcher (relay leader) and a reaper
// (leader) in a network namespace, standbys of both outside it, and cuts
// the namespace off while its processes lead: no process dies and no FIN or
// RST is sent, as when a host dies or is partitioned away. Each standby
// must lead, and each deposed leader step down, within failoverBound of the
// cut, the relay in its worst case (see notifyAfterCut).
func TestFailoverNetworkCut(t *testing.T) {
	skipUnderAuth(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the leaders run in a network namespace (ip netns) that the test cuts off")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal("the ip command (iproute2) is missing: apt-get install iproute2 (make test installs it when run as root)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	n := newNetns(t, ctx, ip)
	dir, err := os.MkdirTemp("", "kagzi-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg, err := pgcluster.Start(ctx, dir, pgcluster.Options{Listen: n.hostIP, Trust: []string{n.hostIP + "/30"}})
	if err != nil {
		t.Fatalf("throwaway Postgres on %s: %v", n.hostIP, err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pg.Stop(sctx); err != nil {
			t.Logf("stop Postgres: %v", err)
		}
	})
	if err := dbadmin.DatabaseCreate(ctx, pg.AdminURL(), "kagzi", ""); err != nil {
		t.Fatal(err)
	}
	dbURL, err := dbadmin.DatabaseURL(pg.AdminURL(), "kagzi")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	pool, err := store.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool, store.Options{})

	// NATS too must be reachable from the namespace: a server on the
	// host's end of the link.
	nsrv := testnats.StartHost(t, n.hostIP)

	env := []string{"KAGZI_DATABASE_URL=" + dbURL, "KAGZI_NATS_URL=" + nsrv.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info"}
	type election struct {
		service, leads, stepsDown string
		key                       int64
		leader, standby           *child
	}
	elections := []*election{
		{service: "dispatcher", leads: "relay is leader", stepsDown: "relay lost leadership", key: dispatcher.RelayLockKey},
		{service: "reaper", leads: "reaper is leader", stepsDown: "reaper stepped down", key: reaper.LockKey},
	}
	for _, e := range elections {
		e.leader = startChild(t, e.service+" (cut off)", env, e.service, ip, "netns", "exec", n.name)
	}
	for _, e := range elections {
		if _, err := e.leader.await(ctx, e.leads, time.Time{}, 30*time.Second); err != nil {
			t.Fatalf("%s in the namespace: %v", e.service, err)
		}
	}
	for _, e := range elections {
		e.standby = startChild(t, e.service+" (standby)", env, e.service)
	}
	// Both standbys must be queued on the lock before the cut, so what is
	// measured is the release of the lock. Nothing signals that a session
	// waits for a lock: pg_locks is read until it shows.
	queued := time.Now().Add(30 * time.Second)
	for _, e := range elections {
		for {
			held, waiting, err := st.LockSessions(ctx, e.key)
			if err != nil {
				t.Fatal(err)
			}
			if held == 1 && waiting == 1 {
				break
			}
			if time.Now().After(queued) {
				t.Fatalf("%s: %d sessions hold the lock and %d wait for it, want 1 and 1", e.service, held, waiting)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	cut := n.cut(t, ctx)
	// The worst case of the relay: a notification sent to the cut-off
	// session just before its silence would have ended it. From then on
	// data is unacknowledged, keepalives stop, and only tcp_user_timeout,
	// counted from that send, ends the session.
	select {
	case <-time.After(notifyAfterCut):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if _, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "failover", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range elections {
		led, err := e.standby.await(ctx, e.leads, cut, failoverBound+15*time.Second)
		if err != nil {
			t.Fatalf("%s standby: %v", e.service, err)
		}
		down, err := e.leader.await(ctx, e.stepsDown, cut, failoverBound+15*time.Second)
		if err != nil {
			t.Fatalf("%s cut off: %v", e.service, err)
		}
		took, gone := led.Sub(cut), down.Sub(cut)
		t.Logf("%s: the standby leads %.1f s after the cut; the cut-off leader stepped down after %.1f s", e.service, took.Seconds(), gone.Seconds())
		if took > failoverBound {
			t.Errorf("%s: the standby took %v to lead after the cut, want at most %v", e.service, took, failoverBound)
		}
		if gone > failoverBound {
			t.Errorf("%s: the cut-off leader stepped down %v after the cut, want at most %v", e.service, gone, failoverBound)
		}
	}
}

// netns is a network namespace joined to the host by a veth pair: the
// host end has hostIP, the namespace end nsIP.
type netns struct {
	ip           string // the ip command
	name         string
	hostIf, nsIf string
	hostIP, nsIP string
}

// newNetns creates a namespace and its veth pair, removed when t ends. It
// skips t if the kernel refuses (no CAP_SYS_ADMIN / CAP_NET_ADMIN).
func newNetns(t *testing.T, ctx context.Context, ip string) *netns {
	t.Helper()
	pid := os.Getpid()
	n := &netns{ip: ip, name: fmt.Sprintf("kagzi-failover-%d", pid),
		hostIf: fmt.Sprintf("kgzf%dh", pid), nsIf: fmt.Sprintf("kgzf%dn", pid)}
	n.hostIP, n.nsIP = freeSubnet(t)
	if out, err := exec.CommandContext(ctx, ip, "netns", "add", n.name).CombinedOutput(); err != nil {
		if s := string(out); strings.Contains(s, "not permitted") || strings.Contains(s, "Permission denied") {
			t.Skipf("network namespaces are not available here: ip netns add: %s", strings.TrimSpace(s))
		}
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Deleting the host end deletes its peer; the namespace goes once
		// its processes are gone (their cleanups ran first).
		_ = exec.Command(ip, "link", "del", n.hostIf).Run()
		if out, err := exec.Command(ip, "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", n.nsIf},
		{"-n", n.name, "link", "set", n.nsIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if out, err := exec.CommandContext(ctx, ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n
}

// cut takes the namespace's end of the link down and returns when it was
// cut. The processes inside live on; their packets and the host's packets
// to them vanish without an error or a reset, as when a host dies or is
// partitioned away.
func (n *netns) cut(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	at := time.Now()
	if out, err := exec.CommandContext(ctx, n.ip, "-n", n.name, "link", "set", n.nsIf, "down").CombinedOutput(); err != nil {
		t.Fatalf("cut: %v: %s", err, out)
	}
	return at
}

// freeSubnet picks a /30 of 198.18.0.0/15 (reserved for network tests)
// that no interface of the host uses, and returns its two addresses.
func freeSubnet(t *testing.T) (host, peer string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		base := net.IPv4(198, 18+byte(rand.IntN(2)), byte(rand.IntN(256)), byte(rand.IntN(64)*4)).To4()
		subnet := &net.IPNet{IP: base, Mask: net.CIDRMask(30, 32)}
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(base)) {
				used = true
			}
		}
		if !used {
			return net.IPv4(base[0], base[1], base[2], base[3]+1).String(), net.IPv4(base[0], base[1], base[2], base[3]+2).String()
		}
	}
	t.Fatal("no free /30 in 198.18.0.0/15")
	return "", ""
}

// child is a service process (the test binary with envServe set) whose
// JSON log lines the test reads as they come.
type child struct {
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []logLine
	changed chan struct{} // closed and replaced on every line
	exited  chan struct{}
	err     error // after exited
}

type logLine struct {
	at  time.Time // when the test read it
	msg string
	raw string
}

// startChild runs service with env under prefix (e.g. ip netns exec NAME),
// killed when t ends; its log is printed if t fails.
func startChild(t *testing.T, name string, env []string, service string, prefix ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string(nil), prefix...), exe)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), envServe+"="+service)
	// ip netns exec execs the command, so the kernel kills the service
	// itself if the test dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	_ = pw.Close()
	c := &child{name: name, cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := logLine{at: time.Now(), raw: sc.Text()}
			var m struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				l.msg = m.Msg
			}
			c.mu.Lock()
			c.lines = append(c.lines, l)
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		_ = pr.Close()
		c.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", name, cmd.Process.Pid)
		}
		if t.Failed() {
			c.mu.Lock()
			defer c.mu.Unlock()
			from := max(0, len(c.lines)-40)
			for _, l := range c.lines[from:] {
				t.Logf("%s: %s", name, l.raw)
			}
		}
	})
	return c
}

// await returns when the child logged msg, the first such line read after
// after; it fails if the child logged it before (a standby that led too
// early), exits, or does not log it within limit.
func (c *child) await(ctx context.Context, msg string, after time.Time, limit time.Duration) (time.Time, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	seen, exited := 0, false
	for {
		c.mu.Lock()
		lines, changed := c.lines[seen:], c.changed
		seen = len(c.lines)
		c.mu.Unlock()
		for _, l := range lines {
			if l.msg != msg {
				continue
			}
			if l.at.Before(after) {
				return time.Time{}, fmt.Errorf("logged %q at %s, before %s", msg, l.at.Format(time.StampMilli), after.Format(time.StampMilli))
			}
			return l.at, nil
		}
		if exited {
			return time.Time{}, fmt.Errorf("exited (%v) without logging %q", c.err, msg)
		}
		select {
		case <-changed:
		case <-c.exited:
			exited = true // read what it logged last
		case <-timer.C:
			return time.Time{}, fmt.Errorf("did not log %q within %v", msg, limit)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
