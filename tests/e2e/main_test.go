package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle/process"
	"github.com/kagzi/kagzi/tests/devserver"
)

// envServe makes the test binary run one service instead of the tests, as
// `kagzi serve` does: tests that kill a service with SIGKILL run it as a
// process of its own.
const envServe = "KAGZI_E2E_SERVE"

func TestMain(m *testing.M) {
	if service := os.Getenv(envServe); service != "" {
		os.Exit(serve(service))
	}
	os.Exit(m.Run())
}

// serve runs one service configured from KAGZI_* variables until SIGINT
// or SIGTERM.
func serve(service string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devserver.Serve(ctx, service, nil); err != nil && ctx.Err() == nil {
		process.Exit(service, err) // the exit codes of the service binaries
	}
	return 0
}

// proc is a service process started by a test.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// spawnDispatcher starts a dispatcher process on the database and NATS
// server given; relay says whether it takes part in the relay election.
// It is killed when the test ends.
func spawnDispatcher(t *testing.T, dbURL, natsURL string, relay bool) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"=dispatcher", "KAGZI_DATABASE_URL="+dbURL, "KAGZI_NATS_URL="+natsURL,
		"KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=error", "KAGZI_RELAY="+strconv.FormatBool(relay))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL: no graceful path runs. It returns when the process
// is gone, with the time of the signal.
func (p *proc) kill() time.Time {
	at := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return at
}

// freeze sends SIGSTOP: the process stays alive to the kernel, which keeps
// its TCP sessions (NATS subscriptions, queue-group membership, Postgres
// sessions), but it makes no progress. It returns the time of the signal;
// kill ends it as any other.
func (p *proc) freeze() time.Time {
	at := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	return at
}
