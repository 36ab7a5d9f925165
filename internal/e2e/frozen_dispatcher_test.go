package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/testdb"
	"github.com/kagzi/kagzi/internal/testnats"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// frozenUnderLoadBound is what a frozen dispatcher, relay leader or not,
// may cost the runs in flight: the longest pause in step starts. A
// worker's round trip to it is cancelled when its beacons fall silent (3
// s) and sent to another; a relay leader's standby takes the relay within
// its silence and a check (4 s) and reads the backlog.
const frozenUnderLoadBound = 7 * time.Second

// TestFrozenDispatcherUnderLoad freezes (SIGSTOP) one of two dispatchers
// for 20 s while two workers run 10 starts/s of three-step runs, on a NATS
// server with its default settings (a ping every 2 minutes: it keeps the
// frozen dispatcher's connection, subscriptions and queue-group place for
// minutes), on the pinned nats-server and on Debian's 2.9. The workers
// route around the silent dispatcher themselves: step starts pause for at
// most frozenUnderLoadBound, and every run started in the freeze's first
// 5 s completes before the dispatcher resumes. Then the dispatcher
// resumes: every run completes, each step's result recorded once.
func TestFrozenDispatcherUnderLoad(t *testing.T) {
	t.Parallel()
	for _, bin := range testnats.Binaries(t) {
		for _, relayLeader := range []bool{true, false} {
			name := fmt.Sprintf("%s/relay leader=%v", bin.Name, relayLeader)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				frozenDispatcherUnderLoad(t, testnats.StartBinary(t, bin), relayLeader)
			})
		}
	}
}

func frozenDispatcherUnderLoad(t *testing.T, ns *testnats.Server, freezeRelayLeader bool) {
	const (
		rate   = 10 // starts per second
		freeze = 20 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	env := frozenLeaderEnv(dbURL, ns.URL())

	a := startChild(t, "dispatcher A", env, "dispatcher")
	if _, err := a.await(ctx, "relay is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	b := startChild(t, "dispatcher B", env, "dispatcher")
	if _, err := b.await(ctx, "running", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	startChild(t, "reaper", env, "reaper")
	frozen := b
	if freezeRelayLeader {
		frozen = a
	}

	var mu sync.Mutex
	var stepStarts []time.Time
	steps := map[string]int{}
	register := func(w *worker.Worker) error {
		return worker.Register(w, "Steps", func(ctx workflow.Context, _ int) (int, error) {
			for i := range 3 {
				if _, err := workflow.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) {
					mu.Lock()
					stepStarts = append(stepStarts, time.Now())
					steps[fmt.Sprintf("%s/%d", ctx.RunID(), i)]++
					mu.Unlock()
					return i, nil
				}); err != nil {
					return 0, err
				}
			}
			return 0, nil
		})
	}
	for range 2 {
		startWorker(t, ns, worker.Config{MaxConcurrency: 20}, register)
	}
	cl := newClient(t, st, ns.Connect(t))

	type started struct {
		id uuid.UUID
		at time.Time
		h  *client.Handle
	}
	var runs []started
	startFor := func(d time.Duration) {
		t.Helper()
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		end := time.Now().Add(d)
		for now := time.Now(); now.Before(end); now = <-tick.C {
			h, err := cl.Start(ctx, "Steps", 0, client.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, started{id: h.RunID, at: time.Now(), h: h})
		}
	}

	startFor(3 * time.Second) // the steady state the freeze interrupts
	frozeAt := frozen.signal(t, syscall.SIGSTOP)
	startFor(freeze)
	resumedAt := frozen.signal(t, syscall.SIGCONT)
	startFor(2 * time.Second)
	for _, r := range runs {
		if _, err := result[int](t, r.h, time.Minute); err != nil {
			t.Fatalf("run %s: %v", r.id, err)
		}
	}

	// The longest pause in step starts from the freeze to the resume.
	mu.Lock()
	times := slices.Clone(stepStarts)
	counts := len(steps)
	for k, n := range steps {
		if n != 1 {
			t.Errorf("step %s ran %d times", k, n)
		}
	}
	mu.Unlock()
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	last, pause := frozeAt, time.Duration(0)
	for _, at := range times {
		if at.Before(frozeAt) {
			continue
		}
		if at.After(resumedAt) {
			at = resumedAt
		}
		pause = max(pause, at.Sub(last))
		last = at
		if !at.Before(resumedAt) {
			break
		}
	}
	// The runs started in the freeze's first 5 s completed before it ended.
	early, late := 0, 0
	for _, r := range runs {
		if r.at.Before(frozeAt) || r.at.After(frozeAt.Add(5*time.Second)) {
			continue
		}
		early++
		run, err := st.RunsGet(ctx, "default", r.id)
		if err != nil {
			t.Fatal(err)
		}
		if run.FinishedAt == nil || !run.FinishedAt.Before(resumedAt) {
			late++
		}
	}
	t.Logf("%d runs, %d steps; longest pause in step starts while frozen: %v; of the %d runs started in the freeze's first 5 s, %d completed after it ended",
		len(runs), counts, pause.Round(time.Millisecond), early, late)
	if pause > frozenUnderLoadBound {
		t.Errorf("step starts paused for %v while a dispatcher was frozen, want at most %v", pause.Round(time.Millisecond), frozenUnderLoadBound)
	}
	if late > 0 {
		t.Errorf("%d of the %d runs started in the freeze's first 5 s completed only after it ended", late, early)
	}
	if counts != 3*len(runs) {
		t.Errorf("%d steps recorded for %d runs of 3", counts, len(runs))
	}
}
