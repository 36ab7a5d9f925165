package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kagzi/kagzi/tests/freeport"
)

// proc is one child process of the chaos run: a service (the kagzi
// binary's hidden `serve` command), the NATS server, or the embedded NATS
// helper.
type proc struct {
	name string
	// role is the serve argument (dispatcher, scheduler, reaper, worker),
	// or "nats".
	role     string
	cmd      *exec.Cmd
	pid      int
	httpAddr string
	logPath  string
	started  time.Time
	done     chan struct{}
	err      error // valid once done is closed
	mu       sync.Mutex
	intended bool // killed or stopped on purpose
}

func (p *proc) markIntended() {
	p.mu.Lock()
	p.intended = true
	p.mu.Unlock()
}

func (p *proc) wasIntended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.intended
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the process and waits for it; it returns the time of the
// signal.
func (p *proc) kill() time.Time {
	p.markIntended()
	at := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return at
}

// stop asks the process to stop (SIGINT), and SIGKILLs it after grace.
func (p *proc) stop(grace time.Duration) {
	p.markIntended()
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// readyz returns the body of the process's /readyz ("" if it does not
// answer 200).
func (p *proc) readyz(ctx context.Context) string {
	if p.httpAddr == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.httpAddr+"/readyz", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) { return freeport.Port("127.0.0.1") }

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept connections after %v: %w", addr, limit, err)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// startProc starts a child process whose output goes to logPath
// (appended), in its own process group and killed if this process dies.
func startProc(name, role, logPath string, env []string, bin string, args ...string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(lf, "=== chaos: start %s at %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, role: role, cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = lf.Close()
		close(p.done)
	}()
	return p, nil
}

var errNoProc = errors.New("chaos: no such process")
