package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/tests/pgcluster"
)

// The bench's processes besides the services: the NATS server it starts
// apart so its CPU is counted, its own Postgres cluster, and the list of
// processes whose CPU a scenario measures.

// cpuProcs are the processes of a Kagzi scenario: every service process
// and the bench itself.
func (e *env) cpuProcs() []measure.LabeledPID {
	out := make([]measure.LabeledPID, 0, len(e.procs)+1)
	for _, p := range e.procs {
		out = append(out, measure.LabeledPID{Label: p.Args[2], PID: p.Process.Pid})
	}
	if e.nats != nil {
		out = append(out, measure.LabeledPID{Label: "nats", PID: e.nats.Process.Pid})
	}
	if e.bouncer != nil {
		out = append(out, measure.LabeledPID{Label: "pgbouncer", PID: e.bouncer.PID()})
	}
	label := "bench (client)"
	if e.o.CountStatements {
		label = "bench (client, dispatcher)"
	}
	return append(out, measure.LabeledPID{Label: label, PID: os.Getpid()})
}

// startNATS starts the embedded NATS server as a process of its own (the
// kagzi binary's `chaos --serve-nats` helper), so that its CPU is counted
// apart, with its monitoring endpoint for the message counters.
func (e *env) startNATS(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	mport, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, e.o.Exe, "chaos", "--serve-nats", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "KAGZI_NATS_MONITOR_PORT="+strconv.Itoa(mport))
	cmd.Stdout, cmd.Stderr = e.o.ServiceLog, e.o.ServiceLog
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start nats: %w", err)
	}
	e.nats = cmd
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: nats on %s not up within 20 s: %w", addr, err)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	e.natsURL = "nats://" + addr
	e.natsMonitor = net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startOwnPostgres starts a throwaway cluster, as durable as the
// machine's server (fsync, full page writes and synchronous commit on),
// with pg_stat_statements preloaded (nested statements too: a trigger's
// work shows), and points o.AdminURL at it.
func startOwnPostgres(ctx context.Context, o *Options) (func(), error) {
	dir, err := os.MkdirTemp("", "kagzi-bench-pg-")
	if err != nil {
		return nil, err
	}
	c, err := pgcluster.Start(ctx, dir, pgcluster.Options{Settings: []string{
		"fsync=on", "full_page_writes=on", "synchronous_commit=on",
		"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all", "pg_stat_statements.track_planning=on",
	}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	o.AdminURL = c.AdminURL()
	o.Log.Info("own postgres", "url", o.AdminURL, "log", c.LogPath())
	return func() {
		if err := c.Stop(context.WithoutCancel(ctx)); err != nil {
			o.Log.Warn("stop own postgres", "err", err)
		}
		_ = os.RemoveAll(dir)
	}, nil
}

// spawnProc starts a service process with the common environment and
// extra, as the scenario's own (it stops with the others).
func (e *env) spawnProc(ctx context.Context, service string, extra ...string) (*exec.Cmd, error) {
	if err := e.spawn(ctx, service, append(append([]string(nil), e.x.common...), extra...)); err != nil {
		return nil, err
	}
	return e.procs[len(e.procs)-1], nil
}

// procsOf are the processes of service started so far, oldest first.
func (e *env) procsOf(service string) []*exec.Cmd {
	var out []*exec.Cmd
	for _, p := range e.procs {
		if p.Args[2] == service {
			out = append(out, p)
		}
	}
	return out
}
