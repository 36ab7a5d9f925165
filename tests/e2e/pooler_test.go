package e2e_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
	"github.com/kagzi/kagzi/tests/testpgbouncer"
)

// The services' pooled work and the client's go through a PgBouncer in
// transaction mode (Debian's 1.18: no prepared statements), their
// sessions (the relay's LISTEN, the leaders' locks) straight to Postgres:
// a run with steps, an event it waits for, a durable sleep and a child,
// and a schedule's fires all complete, and the relay and the reaper lead.
func TestPoolerFlows(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, pooler: true, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Trip", func(ctx workflow.Context, n int) (int, error) {
				a, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { return n + 1, nil })
				if err != nil {
					return 0, err
				}
				b, err := workflow.WaitForEvent[int](ctx, "go", time.Minute)
				if err != nil {
					return 0, err
				}
				if err := workflow.Sleep(ctx, "nap", 300*time.Millisecond); err != nil {
					return 0, err
				}
				c, err := workflow.Child[int](ctx, "square", "Square", a+b)
				if err != nil {
					return 0, err
				}
				return workflow.Step(ctx, "z", func(context.Context) (int, error) { return c, nil })
			}),
			worker.Register(w, "Square", func(ctx workflow.Context, n int) (int, error) {
				return workflow.Step(ctx, "square", func(context.Context) (int, error) { return n * n, nil })
			}),
		)
	}})
	cfg, direct := e.srv.Pool.Config().ConnConfig, mustParse(t, e.url)
	if cfg.Host == direct.Host && cfg.Port == direct.Port {
		t.Fatalf("the services' pool connects to %s:%d, the database itself, not the pooler", cfg.Host, cfg.Port)
	}
	if cfg.DefaultQueryExecMode != pgx.QueryExecModeCacheDescribe {
		t.Fatalf("the services' pool prepares statements (%v) through the pooler", cfg.DefaultQueryExecMode)
	}
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Trip", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Waiting for the event (nothing else suspends it before): the event
	// wakes it through the relay.
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	if _, err := e.cl.SendEvent(ctx, h.RunID, "go", 2); err != nil {
		t.Fatal(err)
	}
	got, err := result[int](t, h, time.Minute)
	if err != nil || got != 16 {
		t.Fatalf("Trip(1) = %d, %v; want (1+1+2)² = 16", got, err)
	}

	sc, err := e.cl.CreateSchedule(ctx, "Square", 3, client.ScheduleOptions{Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a fire of the schedule to complete", func() bool {
		runs, err := e.cl.ScheduleHistory(ctx, sc.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Status == client.StatusCompleted {
				return true
			}
		}
		return false
	})
	if !e.srv.Relays[0].IsLeader() || !e.srv.Reapers[0].IsLeader() {
		t.Errorf("relay leads: %v, reaper leads: %v; want both", e.srv.Relays[0].IsLeader(), e.srv.Reapers[0].IsLeader())
	}
}

// The services as their own processes, each given the pooler's URL for
// its pooled work and the direct URL for its sessions
// (KAGZI_DATABASE_SESSION_URL), and workers and a client: the relay and
// the reaper lead, runs complete, and the reaper's leader finds a killed
// worker and marks it offline through its fenced transactions on the
// pooler.
func TestPoolerServiceProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	direct := testdb.New(t)
	pooled := testpgbouncer.URL(t, testpgbouncer.Start(t, direct), direct)
	ns := testnats.Start(t)
	nc := ns.Connect(t)
	relayUp := make(chan *nats.Msg, 4)
	if _, err := nc.ChanSubscribe(protocol.SubjectRelayUp, relayUp); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	db := []string{"KAGZI_DATABASE_URL=" + pooled, "KAGZI_DATABASE_SESSION_URL=" + direct,
		"KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info"}
	startChild(t, "dispatcher", db, "dispatcher")
	startChild(t, "scheduler", db, "scheduler")
	startChild(t, "reaper", append(db, "KAGZI_WORKER_TIMEOUT=2s", "KAGZI_FLUSH_INTERVAL=500ms"), "reaper")
	wenv := []string{"KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info",
		"KAGZI_HEARTBEAT_INTERVAL=500ms", freezeProbeDirEnv + "=" + t.TempDir()}
	doomed := startChild(t, "worker A", wenv, frozenWorkerService)
	startChild(t, "worker B", wenv, frozenWorkerService)
	select {
	case <-relayUp:
	case <-ctx.Done():
		t.Fatal("no relay came up")
	}
	// The checks read directly; the client goes through the pooler.
	check := openStore(t, direct, nil)
	cl := newClient(t, openStore(t, pooled, nil), ns.Connect(t))
	waitUntil(t, 30*time.Second, "the reaper to lead and both workers to register", func() bool {
		held, _, err := check.LockSessions(ctx, reaper.LockKey)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := cl.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return held == 1 && len(ws) == 2
	})
	if held, _, err := check.LockSessions(ctx, dispatcher.RelayLockKey); err != nil || held != 1 {
		t.Fatalf("relay lock: held by %d sessions (%v), want 1", held, err)
	}

	var hs []*client.Handle
	for range 20 {
		h, err := cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	waitAll(t, hs, time.Minute)

	doomed.signal(t, syscall.SIGKILL)
	waitUntil(t, 30*time.Second, "the reaper to mark the killed worker offline", func() bool {
		ws, err := cl.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		offline := 0
		for _, w := range ws {
			if w.Status == client.WorkerOffline {
				offline++
			}
		}
		return offline == 1
	})
	h, err := cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*client.Handle{h}, time.Minute)
}

// A service whose session would go through the pooler (only the pooler's
// URL given, as the documentation once implied) does not start: it exits at
// once, as a configuration error (2), naming the variable to set.
func TestPoolerSessionURLRefused(t *testing.T) {
	t.Parallel()
	direct := testdb.New(t)
	pooled := testpgbouncer.URL(t, testpgbouncer.Start(t, direct), direct)
	ns := testnats.Start(t)
	env := []string{"KAGZI_DATABASE_URL=" + pooled, "KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info"}
	for _, service := range []string{"dispatcher", "reaper"} {
		c := startChild(t, service, env, service)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s given only the pooler's URL is still running after 30 s", service)
		}
		c.mu.Lock()
		var out strings.Builder
		for _, l := range c.lines {
			out.WriteString(l.raw + "\n")
		}
		c.mu.Unlock()
		if code := c.cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%s: exit code %d, want 2 (configuration)\n%s", service, code, out.String())
		}
		for _, want := range []string{"connection pooler", "KAGZI_DATABASE_SESSION_URL"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s's output does not say %q:\n%s", service, want, out.String())
			}
		}
	}
}

// mustParse parses a database URL.
func mustParse(t *testing.T, url string) *pgconn.Config {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
