package testnats_test

import (
	"bufio"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/tests/testnats"
)

// frozenClientEnv makes TestFrozenClientProcess the client that
// TestFrozenClientIsEvicted freezes: the URL to connect to.
const frozenClientEnv = "KAGZI_TESTNATS_FROZEN_CLIENT"

// TestFrozenClientProcess is not a test: it is the child process of
// TestFrozenClientIsEvicted, a Kagzi client (natsutil.Connect) that says
// it is connected and then waits to be frozen and killed.
func TestFrozenClientProcess(t *testing.T) {
	url := os.Getenv(frozenClientEnv)
	if url == "" {
		t.Skip("the child process of TestFrozenClientIsEvicted")
	}
	nc, err := natsutil.Connect(url, "frozen", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("connected\n")
	time.Sleep(10 * time.Minute)
}

// A client process frozen by SIGSTOP keeps its TCP session (its kernel
// still acknowledges), so only the server's pings can tell that it is gone:
// the test servers, configured as every server Kagzi runs, must close it
// as stale within natsutil.StaleClientBound of the freeze, and keep the
// live connections beside it, idle ones included (they answer the
// server's pings; one is a Kagzi client that pings the server too).
func TestFrozenClientIsEvicted(t *testing.T) {
	t.Parallel()
	s := testnats.StartPinging(t)
	s.Connect(t, nats.Name("idle"))
	kagzi, err := natsutil.Connect(s.URL(), "kagzi", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kagzi.Close)

	cmd := exec.Command(os.Args[0], "-test.run=^TestFrozenClientProcess$")
	cmd.Env = append(os.Environ(), frozenClientEnv+"="+s.URL())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // SIGKILL ends a stopped process too
		_ = cmd.Wait()
	})
	connected := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "connected" {
				connected <- true
				return
			}
		}
		connected <- false
	}()
	select {
	case ok := <-connected:
		if !ok {
			t.Fatal("the client process exited before it connected")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client process did not connect")
	}
	conns := func() map[string]uint64 {
		cz, err := s.Connz()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, c := range cz.Conns {
			m[c.Name] = c.CID
		}
		return m
	}
	before := conns()
	frozenCID, ok := before["frozen"]
	if !ok {
		t.Fatalf("the client process is not in /connz: %v", before)
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var evicted time.Time
	// Polled, since nothing else tells: /connz is what the server knows.
	for deadline := frozen.Add(natsutil.StaleClientBound + 10*time.Second); ; {
		if _, ok := conns()["frozen"]; !ok {
			evicted = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frozen client is still connected %v after its freeze", time.Since(frozen))
		}
		time.Sleep(25 * time.Millisecond)
	}
	took := evicted.Sub(frozen)
	t.Logf("the frozen client was closed %v after SIGSTOP (bound %v)", took.Round(time.Millisecond), natsutil.StaleClientBound)
	// Slack for a loaded machine: the server's timers and the poll.
	if took > natsutil.StaleClientBound+time.Second {
		t.Errorf("the frozen client was closed %v after its freeze, want at most %v", took, natsutil.StaleClientBound)
	}
	cz, err := s.ClosedConnz()
	if err != nil {
		t.Fatal(err)
	}
	reason := "not listed"
	for _, c := range cz.Conns {
		if c.CID == frozenCID {
			reason = c.Reason
		}
	}
	if reason != "Stale Connection" {
		t.Errorf("the frozen client's connection closed for %q, want Stale Connection", reason)
	}

	// The live connections, idle all along, outlive a few more rounds of
	// pings: the same connections (they would reconnect under a new id).
	for end := time.Now().Add(3 * natsutil.ServerPingInterval); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		live := conns()
		for _, name := range []string{"idle", "kagzi"} {
			if live[name] != before[name] {
				t.Fatalf("the live connection %q was closed: connection ids before the freeze %v, now %v", name, before, live)
			}
		}
	}
}
