package chaos

// The harness's processes and faults: spawning and watching the services,
// the scenario that kills, freezes and restarts them while the driver starts
// runs, and the teardown.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testflows"
)

// registrations subscribes to worker registrations (pids).
func (h *harness) registrations() (<-chan int, func(), error) {
	ch := make(chan int, 64)
	sub, err := h.nc.Subscribe(protocol.SubjectWorkerRegisterAll, func(m *nats.Msg) {
		var r protocol.WorkerRegister
		if protocol.Decode(m.Data, &r) == nil {
			select {
			case ch <- r.PID:
			default:
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := h.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, err
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}

func waitRegistered(ctx context.Context, regs <-chan int, pids []int, limit time.Duration) error {
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	timeout := time.After(limit)
	for len(want) > 0 {
		select {
		case pid := <-regs:
			delete(want, pid)
		case <-timeout:
			return fmt.Errorf("chaos: %d of %d workers did not register within %v", len(want), len(pids), limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (h *harness) waitReadyz(ctx context.Context, p *proc, want string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if strings.Contains(p.readyz(ctx), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s's /readyz did not say %q within %v", p.name, want, limit)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// spawn starts the service role in slot (replacing what ran there) and
// watches it: a process that exits without being killed or stopped on
// purpose is a problem, and is restarted.
func (h *harness) spawn(slot, role string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := append(append(os.Environ(), h.common...), "KAGZI_HTTP_ADDR="+addr)
	if role != "worker" {
		env = append(env, "KAGZI_DATABASE_URL="+withApp(h.dbURL, "kagzi-"+role))
	} else if h.o.Model {
		env = append(env, "KAGZI_MAX_INLINE_RETRY="+inlineRetry(slot))
	}
	p, err := startProc(slot, role, filepath.Join(h.dir, slot+".log"), env, h.o.Exe, "serve", role)
	if err != nil {
		return nil, err
	}
	p.httpAddr = addr
	h.mu.Lock()
	h.slots[slot] = p
	h.mu.Unlock()
	h.monitors.Add(1)
	go h.monitor(slot, p)
	return p, nil
}

func (h *harness) monitor(slot string, p *proc) {
	defer h.monitors.Done()
	<-p.done
	if p.wasIntended() || h.stopping.Load() {
		return
	}
	h.problem("%s (pid %d) exited on its own after %.1fs: %v; last log lines: %s",
		slot, p.pid, time.Since(p.started).Seconds(), p.err, p.tail(3))
	time.Sleep(time.Second)
	h.mu.Lock()
	current := h.slots[slot] == p
	h.mu.Unlock()
	if current && !h.stopping.Load() {
		if _, err := h.spawn(slot, p.role); err != nil {
			h.problem("restart %s: %v", slot, err)
		}
	}
}

func (h *harness) slot(name string) *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots[name]
}

// slotsOf lists the slots of a role, sorted.
func (h *harness) slotsOf(role string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, p := range h.slots {
		if p.role == role {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// killAndRestart SIGKILLs the process in slot, waits pause, and starts
// a new one there.
func (h *harness) killAndRestart(ctx context.Context, slot, why string, pause time.Duration) {
	p := h.slot(slot)
	if p == nil || !p.alive() {
		h.problem("kill %s: not running", slot)
		return
	}
	p.kill()
	h.event("SIGKILL %s%s (pid %d)", slot, why, p.pid)
	if err := sleepCtx(ctx, pause); err != nil {
		return
	}
	np, err := h.spawn(slot, p.role)
	if err != nil {
		h.problem("restart %s: %v", slot, err)
		return
	}
	h.event("restarted %s (pid %d)", slot, np.pid)
}

// freeze stops the process in slot (SIGSTOP) for FreezeFor and lets it
// go on (SIGCONT): alive to the kernel, which keeps its sessions, locks and
// subscriptions, but making no progress.
func (h *harness) freeze(ctx context.Context, slot, why string) {
	if h.o.FreezeFor < 0 {
		return
	}
	p := h.slot(slot)
	if p == nil || !p.alive() {
		h.problem("freeze %s: not running", slot)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	h.event("SIGSTOP %s%s (pid %d) for %v", slot, why, p.pid, h.o.FreezeFor)
	// Resumed even when the run ends meanwhile, so it can be stopped.
	_ = sleepCtx(ctx, h.o.FreezeFor)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	h.event("SIGCONT %s (pid %d)", slot, p.pid)
}

// relayLeader returns the slot of the dispatcher whose /readyz says it
// relays ("" if none says so within ten seconds).
func (h *harness) relayLeader(ctx context.Context) string {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for _, s := range h.slotsOf("dispatcher") {
			if p := h.slot(s); p != nil && strings.Contains(p.readyz(ctx), "relay: leader") {
				return s
			}
		}
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			return ""
		}
	}
	return ""
}

// scenario drives the runs and the faults, then waits for every run to
// finish (or ctx to end).
func (h *harness) scenario(ctx context.Context) {
	o := h.o
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))

	// The every-second schedule, from now until the end of the chaos
	// phase.
	pol := &retry.Policy{MaxAttempts: -1, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second}
	sc, err := h.cl.CreateSchedule(ctx, "Chaos", testflows.ChaosInput{Steps: o.Steps}, client.ScheduleOptions{
		Cron: "* * * * * *", RetryPolicy: pol,
	})
	if err != nil {
		h.problem("create schedule: %v", err)
	} else {
		h.sched = &ScheduleData{ID: sc.ID, From: time.Now()}
	}
	h.t0ns.Store(time.Now().UnixNano())
	h.logf("chaos phase: %d runs over %v, worker SIGKILL every %v", o.Runs, o.Duration, o.KillEvery)

	end := h.t0().Add(o.Duration)
	stopProgress := make(chan struct{})
	defer close(stopProgress)
	go h.progress(ctx, stopProgress)
	var wg sync.WaitGroup
	wg.Add(3)
	driveRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	killRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	go func() { defer wg.Done(); h.drive(ctx, driveRng, pol) }()
	go func() { defer wg.Done(); h.killWorkers(ctx, killRng, end) }()
	go func() { defer wg.Done(); h.faults(ctx) }()
	if err := sleepCtx(ctx, time.Until(end)); err == nil && h.sched != nil {
		for {
			if _, err := h.cl.PauseSchedule(ctx, h.sched.ID); err == nil {
				break
			} else if ctx.Err() != nil {
				break
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
		// A fire time just before the pause may still be in flight.
		h.sched.To = time.Now().Add(-3 * time.Second)
		h.event("schedule paused")
	}
	wg.Wait()
	h.waitDone(ctx)
	// Give a zombie execution (one that lost its lease without knowing) a
	// moment to show itself in the logs.
	time.Sleep(2 * time.Second)
	if h.sched != nil && h.sched.To.IsZero() {
		h.sched.To = time.Now().Add(-3 * time.Second)
	}
}

// drive starts the runs, spread over the first 80% of the chaos phase, in
// batches; event runs get their event from a goroutine 0–500 ms after
// their start returned.
func (h *harness) drive(ctx context.Context, rng *rand.Rand, pol *retry.Policy) {
	defer h.startDone.Store(true)
	o := h.o
	span := o.Duration * 8 / 10
	const batch = 25
	failing := false
	for i := 0; i < o.Runs; i += batch {
		n := min(batch, o.Runs-i)
		reqs := make([]client.StartRequest, n)
		ins := make([]testflows.ChaosInput, n)
		for j := range reqs {
			in := testflows.ChaosInput{N: i + j + 1, Steps: o.Steps}
			if rng.Float64() < o.SleepFraction {
				in.SleepMS = 100 + rng.IntN(401)
			}
			if rng.Float64() < o.EventFraction {
				in.Event = true
			}
			ins[j] = in
			reqs[j] = client.StartRequest{Type: "Chaos", Input: in, Options: client.StartOptions{
				ExternalID: externalID(in.N), RetryPolicy: pol,
			}}
		}
		var hs []*client.Handle
		for {
			var err error
			hs, err = h.cl.StartMany(ctx, reqs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				h.problem("starting runs: stopped at run %d of %d: %v", i+1, o.Runs, ctx.Err())
				return
			}
			if !failing {
				h.logf("start failed (retrying; external ids make it idempotent): %v", err)
				failing = true
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
		if failing {
			h.logf("starts succeed again")
			failing = false
		}
		h.started.Add(int64(n))
		for j, hd := range hs {
			if ins[j].Event {
				h.sendEventLater(ctx, hd.RunID, ins[j].N, time.Duration(rng.IntN(501))*time.Millisecond)
			}
		}
		next := h.t0().Add(time.Duration(float64(span) * float64(i+n) / float64(o.Runs)))
		_ = sleepCtx(ctx, time.Until(next))
	}
}

func externalID(n int) string { return fmt.Sprintf("chaos-%d", n) }

func (h *harness) sendEventLater(ctx context.Context, id uuid.UUID, n int, after time.Duration) {
	h.events.Add(1)
	go func() {
		defer h.events.Done()
		if err := sleepCtx(ctx, after); err != nil {
			h.problem("event for run %s not sent: %v", id, err)
			return
		}
		for {
			_, err := h.cl.SendEvent(ctx, id, testflows.ChaosEventName, testflows.ChaosEvent{N: n})
			switch {
			case err == nil:
				return
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInvalidArgument):
				h.problem("event for run %s: %v", id, err)
				return
			case ctx.Err() != nil:
				h.problem("event for run %s not sent: %v", id, err)
				return
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
}

// killWorkers SIGKILLs a random worker every KillEvery until end, and
// starts a replacement at once.
func (h *harness) killWorkers(ctx context.Context, rng *rand.Rand, end time.Time) {
	t := time.NewTicker(h.o.KillEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.After(end) {
				h.event("stopped killing workers after %d kills", n)
				return
			}
		}
		slots := h.slotsOf("worker")
		var alive []*proc
		for _, s := range slots {
			if p := h.slot(s); p != nil && p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			continue
		}
		p := alive[rng.IntN(len(alive))]
		at := p.kill()
		n++
		h.mu.Lock()
		h.kills = append(h.kills, Kill{PID: p.pid, At: at})
		h.mu.Unlock()
		np, err := h.spawn(p.name, "worker")
		if err != nil {
			h.problem("replace %s: %v", p.name, err)
			continue
		}
		h.logf("SIGKILL %s (pid %d), replaced by pid %d", p.name, p.pid, np.pid)
	}
}

// faults kills the relay leader, a scheduler and the reaper once each,
// restarts NATS and restarts Postgres, spread over the chaos phase.
func (h *harness) faults(ctx context.Context) {
	d := h.o.Duration
	at := func(frac float64) error { return sleepCtx(ctx, time.Until(h.t0().Add(time.Duration(frac*float64(d))))) }

	if at(0.15) != nil {
		return
	}
	leader := h.relayLeader(ctx)
	if leader == "" {
		h.problem("no dispatcher's /readyz says relay: leader")
	} else {
		h.killAndRestart(ctx, leader, " (relay leader)", time.Second)
	}

	if at(0.22) != nil {
		return
	}
	if leader := h.relayLeader(ctx); leader != "" {
		h.freeze(ctx, leader, " (relay leader)")
	}

	if at(0.30) != nil {
		return
	}
	if h.slot("scheduler-0") != nil {
		h.killAndRestart(ctx, "scheduler-0", "", time.Second)
	}

	if at(0.38) != nil {
		return
	}
	h.freeze(ctx, "reaper-0", " (leader)")

	if at(0.45) != nil {
		return
	}
	h.killAndRestart(ctx, "reaper-0", " (leader)", time.Second)

	if at(0.52) != nil {
		return
	}
	if ws := h.slotsOf("worker"); len(ws) > 0 {
		h.freeze(ctx, ws[0], "")
	}
	if ss := h.slotsOf("scheduler"); len(ss) > 1 {
		h.freeze(ctx, ss[1], "")
	}

	if at(0.60) != nil {
		return
	}
	if h.ns == nil {
		h.event("NATS is not the run's own: not restarted")
	} else if p := h.ns.p; p != nil {
		p.kill()
		h.event("SIGKILL nats server (pid %d)", p.pid)
		if sleepCtx(ctx, time.Second) != nil {
			return
		}
		if err := h.ns.start(ctx); err != nil {
			h.problem("restart NATS: %v", err)
		} else {
			h.event("restarted nats server (pid %d)", h.ns.p.pid)
		}
	}

	if at(0.68) != nil {
		return
	}
	if leader := h.relayLeader(ctx); leader != "" {
		for _, d := range h.slotsOf("dispatcher") {
			if d != leader {
				h.freeze(ctx, d, " (not relaying)")
				break
			}
		}
	}

	if at(0.75) != nil {
		return
	}
	if h.pg == nil {
		h.event("Postgres is not the run's own: not restarted")
		return
	}
	from := time.Now()
	h.event("pg_ctl restart -m fast")
	err := h.pg.Restart(ctx)
	to := time.Now()
	h.mu.Lock()
	h.outages = append(h.outages, Window{From: from, To: to})
	h.mu.Unlock()
	if err != nil {
		h.problem("restart Postgres: %v", err)
		return
	}
	h.event("Postgres is back after %d ms", to.Sub(from).Milliseconds())
}

// progress prints the runs by status every 5 s until stop is closed.
func (h *harness) progress(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
		if counts, err := h.st.RunsCount(ctx, Namespace); err == nil {
			live := counts[store.StatusPending] + counts[store.StatusRunning] + counts[store.StatusSleeping]
			h.logf("started %d of %d; completed %d, failed %d, live %d (pending %d, running %d, sleeping %d)",
				h.started.Load(), h.o.Runs, counts[store.StatusCompleted], counts[store.StatusFailed], live,
				counts[store.StatusPending], counts[store.StatusRunning], counts[store.StatusSleeping])
		}
	}
}

// waitDone waits until every run was started and every run of the
// namespace finished.
func (h *harness) waitDone(ctx context.Context) {
	done := make(chan struct{})
	go func() { h.events.Wait(); close(done) }()
	for {
		counts, err := h.st.RunsCount(ctx, Namespace)
		if err == nil {
			live := counts[store.StatusPending] + counts[store.StatusRunning] + counts[store.StatusSleeping]
			eventsSent := false
			select {
			case <-done:
				eventsSent = true
			default:
			}
			if h.startDone.Load() && eventsSent && live == 0 && time.Since(h.t0()) > h.o.Duration {
				h.logf("every run finished: completed %d, failed %d, cancelled %d",
					counts[store.StatusCompleted], counts[store.StatusFailed], counts[store.StatusCancelled])
				return
			}
		}
		if sleepCtx(ctx, 500*time.Millisecond) != nil {
			if counts, err := h.st.RunsCount(context.WithoutCancel(ctx), Namespace); err == nil {
				h.problem("timed out (--timeout %v) with %d runs pending, %d running, %d sleeping",
					h.o.Timeout, counts[store.StatusPending], counts[store.StatusRunning], counts[store.StatusSleeping])
			} else {
				h.problem("timed out (--timeout %v)", h.o.Timeout)
			}
			return
		}
	}
}

// stopServices stops the workers (draining) and then the other services.
func (h *harness) stopServices() {
	h.stopping.Store(true)
	stopRole := func(roles ...string) {
		var wg sync.WaitGroup
		for _, role := range roles {
			for _, s := range h.slotsOf(role) {
				if p := h.slot(s); p != nil {
					wg.Add(1)
					go func() { defer wg.Done(); p.stop(15 * time.Second) }()
				}
			}
		}
		wg.Wait()
	}
	stopRole("worker")
	stopRole("dispatcher", "scheduler", "reaper")
	h.monitors.Wait()
}

// teardown stops whatever still runs: services, NATS, Postgres (once).
func (h *harness) teardown(ctx context.Context) {
	h.tornDown.Do(func() { h.teardownOnce(ctx) })
}

func (h *harness) teardownOnce(ctx context.Context) {
	h.stopServices()
	if h.cl != nil {
		h.cl.Close()
	}
	if h.nc != nil {
		h.nc.Close()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.ns != nil && h.ns.p != nil {
		h.ns.p.stop(5 * time.Second)
	}
	if h.pg != nil {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := h.pg.Stop(sctx); err != nil {
			fmt.Fprintf(h.o.Log, "chaos: stop Postgres: %v\n", err)
		}
	}
}
