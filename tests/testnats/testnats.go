// Package testnats runs real NATS servers for tests: nats-server as a
// process of its own on a loopback TCP port, so every hop in a test is a
// real NATS connection and the module under test needs none of the
// server's code. The binary is the version the natsbin module pins, built
// on first use (see binary).
package testnats

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/tests/freeport"
)

// MaxPayload is the message size limit of the test servers, the one Kagzi
// runs NATS with: room for a run's 2 MiB input plus its envelope.
const MaxPayload = 8 << 20

// startTimeout bounds a server's start, generous for a loaded machine.
const startTimeout = 30 * time.Second

// monitor is the client of the servers' monitoring endpoints.
var monitor = &http.Client{Timeout: 5 * time.Second}

// Server is a running NATS server process.
type Server struct {
	conf string // configuration file
	host string // where it listens
	// via, if set, is the command that starts the server (StartVia), with
	// binDir, holding the pinned binary as nats-server, first on its PATH.
	via    []string
	binDir string
	// bin, if set, is the nats-server binary run instead of binary()'s.
	bin string
	// prefix, if set, is a command the server runs under (ip netns exec
	// NAME, say), which must exec the binary and its arguments.
	prefix []string

	mu   sync.Mutex
	port int // client port: random at the first start, kept by Restart
	name string
	http string // base URL of the monitoring endpoints
	proc *proc  // nil while stopped

	// defaults come before the options of every Connect (the Observer's
	// credentials on a server with authorization).
	defaults []nats.Option
}

// proc is one run of the server's process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is gone and reaped
	log    *tail
}

// Start starts a server on a free loopback port, shut down when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWithMaxPayload(t, MaxPayload)
}

// StartWithMaxPayload is Start with another message size limit.
func StartWithMaxPayload(t testing.TB, maxPayload int32) *Server {
	t.Helper()
	return start(t, "127.0.0.1", fmt.Sprintf("max_payload: %d\n", maxPayload))
}

// StartHost is Start listening on host instead of loopback (the host's
// end of a network namespace's link, say).
func StartHost(t testing.TB, host string) *Server {
	t.Helper()
	return start(t, host, fmt.Sprintf("max_payload: %d\n", MaxPayload))
}

// StartConfig starts a server from the nats-server configuration text
// conf (written to a file of t's), on a free loopback port whatever conf
// says, with MaxPayload unless conf sets max_payload.
func StartConfig(t testing.TB, conf string) *Server {
	t.Helper()
	// A later key overrides an earlier one.
	return start(t, "127.0.0.1", fmt.Sprintf("max_payload: %d\n", MaxPayload)+conf)
}

// StartPinging is Start with the pings of every server Kagzi ships and
// runs (natsutil.ServerConfig): a frozen client is closed within
// natsutil.StaleClientBound, as in production. The tests of frozen
// processes use it; the others keep the server's default pings, so that a
// test process slowed by the race detector while it moves megabytes of
// payloads is not taken for a frozen one.
func StartPinging(t testing.TB) *Server {
	t.Helper()
	return start(t, "127.0.0.1", fmt.Sprintf("max_payload: %d\n", MaxPayload)+natsutil.ServerConfig())
}

// DebianBinary is where Debian's nats-server package (2.9 in bookworm)
// installs the server: the oldest version Kagzi supports
// (natsutil.MinServerVersion), which tests run beside the pinned one.
// scripts/ensure-nats-server.sh installs it for `make test`.
const DebianBinary = "/usr/sbin/nats-server"

// Binary is a nats-server binary the tests run: Path "" is the pinned
// one.
type Binary struct {
	Name, Path string
}

// Binaries returns the pinned server and Debian's, the versions every
// claim about NATS's default settings is tested on. Debian's is skipped
// with a word where it is not installed, except under CI (CI set), where
// its absence fails t: the install step is the project's.
func Binaries(t testing.TB) []Binary {
	t.Helper()
	out := []Binary{{Name: "pinned"}}
	if _, err := os.Stat(DebianBinary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Debian's nats-server is not installed at %s (scripts/ensure-nats-server.sh): %v", DebianBinary, err)
		}
		t.Logf("Debian's nats-server is not installed at %s (scripts/ensure-nats-server.sh installs it): its cases are skipped", DebianBinary)
		return out
	}
	return append(out, Binary{Name: "debian", Path: DebianBinary})
}

// StartBinary is Start (NATS's default settings but MaxPayload) with the
// binary b.
func StartBinary(t testing.TB, b Binary) *Server {
	t.Helper()
	return start(t, "127.0.0.1", fmt.Sprintf("max_payload: %d\n", MaxPayload), func(s *Server) { s.bin = b.Path })
}

// StartVia is StartConfig through a command of the deployment's, such as
// a script that prepares nats-server's environment and then runs it:
// prefix (e.g. "sh", "start.sh") is run with nats-server's arguments
// appended and must run "nats-server" with them, found first on its PATH
// as the pinned binary.
func StartVia(t testing.TB, conf string, prefix ...string) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "nats-server")); err != nil {
		t.Fatal(err)
	}
	return start(t, "127.0.0.1", fmt.Sprintf("max_payload: %d\n", MaxPayload)+conf, func(s *Server) {
		s.via, s.binDir = prefix, dir
	})
}

// start writes conf to a file of t's and starts a server from it on host,
// stopped when t ends.
func start(t testing.TB, host, conf string, opts ...func(*Server)) *Server {
	t.Helper()
	s := &Server{conf: filepath.Join(t.TempDir(), "nats.conf"), host: host}
	for _, o := range opts {
		o(s)
	}
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.launch(); err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's client URL.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "nats://" + net.JoinHostPort(s.host, strconv.Itoa(s.port))
}

// Addr is the server's client address.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &net.TCPAddr{IP: net.ParseIP(s.host), Port: s.port}
}

// Name is the server's name.
func (s *Server) Name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// Stop kills the server and waits until it is gone; clients see their
// connections drop. Stop on a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Signal sends sig to the server's process: syscall.SIGSTOP freezes it
// as a paused VM would (its kernel keeps its connections open, so clients
// notice only by their pings), syscall.SIGCONT resumes it.
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return errors.New("nats server not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Restart stops the server if it runs and starts it again with the same
// configuration on the same port, so that clients reconnect to it.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.launch(); err != nil {
		t.Fatalf("restart nats server on port %d: %v", s.port, err)
	}
}

// Connect opens a client connection to s, closed when t ends. It reconnects
// forever, so tests can restart the server under it.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, s.defaults...), opts...)
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Connz is the part of the server's /connz a test reads.
type Connz struct {
	Conns []ConnInfo `json:"connections"`
}

// ConnInfo is a client connection in Connz.
type ConnInfo struct {
	CID  uint64 `json:"cid"`
	Name string `json:"name"`
	// Stop and Reason tell when and why a closed connection closed
	// (ClosedConnz): "Stale Connection" for a client that stopped
	// answering the server's pings.
	Stop   *time.Time `json:"stop,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// Connz lists the server's client connections.
func (s *Server) Connz() (*Connz, error) {
	var cz Connz
	return &cz, s.get("/connz", &cz)
}

// ClosedConnz lists the client connections the server closed lately (it
// remembers the last ones), with when and why.
func (s *Server) ClosedConnz() (*Connz, error) {
	var cz Connz
	return &cz, s.get("/connz?state=closed", &cz)
}

// routez is the part of /routez that tells a cluster's peers.
type routez struct {
	Routes []struct {
		RemoteID string `json:"remote_id"`
	} `json:"routes"`
}

// get decodes the JSON of the monitoring endpoint path.
func (s *Server) get(path string, v any) error {
	s.mu.Lock()
	base := s.http
	s.mu.Unlock()
	resp, err := monitor.Get(base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Log lines of nats-server that tell its addresses and readiness.
const (
	logClients = "Listening for client connections on "
	logMonitor = "Starting http monitor on "
	logName    = "  Name: "
	logReady   = "Server is ready"
)

// launch starts the process and waits until it says it is ready and its
// /healthz agrees. Its log is read for the addresses it listens on (ports
// it picked itself at the first start); the monitoring port is picked
// afresh each time.
func (s *Server) launch() error {
	bin := s.bin
	if bin == "" {
		var err error
		if bin, err = binary(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	port := s.port
	s.mu.Unlock()
	if port == 0 {
		port = -1 // nats-server's "any free port"
	}
	// Flags override the file: whatever it says, the server listens
	// where the test wants it.
	args := []string{"-c", s.conf, "-a", s.host, "-p", strconv.Itoa(port), "-m", "-1"}
	cmd := exec.Command(bin, args...)
	if len(s.prefix) > 0 {
		cmd = exec.Command(s.prefix[0], append(append(s.prefix[1:len(s.prefix):len(s.prefix)], bin), args...)...)
	}
	if len(s.via) > 0 {
		cmd = exec.Command(s.via[0], append(s.via[1:len(s.via):len(s.via)], args...)...)
		cmd.Env = append(os.Environ(), "PATH="+s.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	orphanProof(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: &tail{}}
	if err := cmd.Start(); err != nil {
		return err
	}
	var clients, mon, name string
	ready := make(chan struct{})
	go func() {
		defer close(p.exited)
		told := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.log.add(line)
			if told {
				continue // read on so that the server never blocks on its log
			}
			if _, v, ok := strings.Cut(line, logClients); ok {
				clients = strings.TrimSpace(v)
			} else if _, v, ok := strings.Cut(line, logMonitor); ok {
				mon = strings.TrimSpace(v)
			} else if _, v, ok := strings.Cut(line, logName); ok && name == "" {
				name = strings.TrimSpace(v)
			} else if strings.Contains(line, logReady) {
				told = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait() // after the last read: Wait closes the pipe
	}()
	fail := func(err error) error {
		_ = cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%w; its log:\n%s", err, p.log)
	}
	select {
	case <-ready:
	case <-p.exited:
		return fmt.Errorf("nats-server exited at start (%v); its log:\n%s", cmd.ProcessState, p.log)
	case <-time.After(startTimeout):
		return fail(errors.New("nats-server not ready in time"))
	}
	_, cport, err := net.SplitHostPort(clients)
	if err != nil {
		return fail(fmt.Errorf("client address %q: %v", clients, err))
	}
	n, err := strconv.Atoi(cport)
	if err != nil {
		return fail(fmt.Errorf("client address %q: %v", clients, err))
	}
	if mon == "" {
		return fail(errors.New("nats-server told no monitoring address"))
	}
	s.mu.Lock()
	s.port, s.name, s.http, s.proc = n, name, "http://"+mon, p
	s.mu.Unlock()
	if err := s.healthy(); err != nil {
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		return fail(err)
	}
	return nil
}

// healthy waits until /healthz answers OK (at once, after "ready").
func (s *Server) healthy() error {
	deadline := time.Now().Add(startTimeout)
	for {
		var h struct {
			Status string `json:"status"`
		}
		err := s.get("/healthz", &h)
		if err == nil && h.Status == "ok" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("/healthz: status %q", h.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tail keeps the last lines of a server's log, for the message of a
// failed start.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (l *tail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 40 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// StartCluster starts n servers on loopback ports joined into one NATS
// cluster by routes (every server names every other), and waits until each
// has a route to every other. Each is shut down when t ends; a test may
// shut one down earlier (Stop) to kill a node.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	return StartClusterBinary(t, n, Binary{Name: "pinned"})
}

// StartClusterBinary is StartCluster with the binary b.
func StartClusterBinary(t testing.TB, n int, b Binary) []*Server {
	t.Helper()
	return StartClusterWith(t, n, ClusterOptions{Binary: b})
}

// ClusterOptions are the settings of StartClusterWith.
type ClusterOptions struct {
	// Binary is the nats-server binary (the pinned one if zero).
	Binary Binary
	// Hosts, if set, gives each node the address it listens on, for its
	// clients and its routes alike (loopback if unset).
	Hosts []string
	// Prefix, if set, gives the command each node runs under (nil for
	// none): ip netns exec NAME, to run it in a network namespace.
	Prefix func(node int) []string
	// Config is added to every node's configuration (ping settings, say).
	Config string
}

// StartClusterWith is StartCluster with o.
func StartClusterWith(t testing.TB, n int, o ClusterOptions) []*Server {
	t.Helper()
	host := func(i int) string {
		if i < len(o.Hosts) {
			return o.Hosts[i]
		}
		return "127.0.0.1"
	}
	ports := make([]int, n)
	for i := range ports {
		p, err := freeport.Port("127.0.0.1", ports[:i]...)
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	out := make([]*Server, n)
	for i := range out {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, strconv.Quote("nats-route://"+net.JoinHostPort(host(j), strconv.Itoa(p))))
			}
		}
		conf := fmt.Sprintf("server_name: node-%d\nmax_payload: %d\n%scluster {\n  name: kagzi-test\n  listen: %q\n  routes: [%s]\n}\n",
			i, MaxPayload, o.Config, net.JoinHostPort(host(i), strconv.Itoa(ports[i])), strings.Join(routes, ", "))
		var prefix []string
		if o.Prefix != nil {
			prefix = o.Prefix(i)
		}
		out[i] = start(t, host(i), conf, func(s *Server) { s.bin, s.prefix = o.Binary.Path, prefix })
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range out {
		// Routes are pooled (several connections per peer): count peers.
		for {
			peers, err := s.peers()
			if len(peers) >= n-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats cluster: %s has %d of %d peers (%v)", s.Name(), len(peers), n-1, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// peers returns the server IDs of the nodes s has a route to.
func (s *Server) peers() (map[string]bool, error) {
	var rz routez
	err := s.get("/routez", &rz)
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteID] = true
	}
	return peers, err
}

// Peers is how many other nodes s has a route to now.
func (s *Server) Peers() (int, error) {
	p, err := s.peers()
	return len(p), err
}

// ClusterURL lists the client URLs of servers, as a client's server list.
func ClusterURL(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}
