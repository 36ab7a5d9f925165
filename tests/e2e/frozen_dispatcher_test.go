package e2e_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// frozenUnderLoadBound is what a frozen dispatcher, relay leader or not,
// may cost the runs in flight: the longest pause in step starts. A
// worker's round trip to it is cancelled when its beacons fall silent (3
// s) and sent to another; a relay leader's standby takes the relay within
// its silence and a check (4 s) and reads the backlog.
const frozenUnderLoadBound = 7 * time.Second

// TestFrozenDispatcherUnderLoad freezes (SIGSTOP) one of two dispatchers
// for 12 or 20 s while two workers run 10 starts/s of three-step runs, on a NATS
// server with its default settings (a ping every 2 minutes: it keeps the
// frozen dispatcher's connection, subscriptions and queue-group place for
// minutes), on the pinned nats-server and on Debian's 2.9. The workers
// route around the silent dispatcher themselves: step starts pause for at
// most frozenUnderLoadBound, and every run started in the freeze's first
// 5 s completes before the dispatcher resumes. Then the dispatcher
// resumes: every run completes, each step's result recorded once.
//
// `make test` runs the relay leader on the pinned server and the other
// dispatcher on Debian's, frozen 12 s; `make test-faults` each on both,
// frozen 20 s.
func TestFrozenDispatcherUnderLoad(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	freeze := 12 * time.Second
	if full() {
		freeze = 20 * time.Second
	}
	for i, bin := range testnats.Binaries(t) {
		for j, relayLeader := range []bool{true, false} {
			if !full() && i != j {
				continue
			}
			name := fmt.Sprintf("%s/relay leader=%v", bin.Name, relayLeader)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				frozenDispatcherUnderLoad(t, testnats.StartBinary(t, bin), relayLeader, freeze)
			})
		}
	}
}

func frozenDispatcherUnderLoad(t *testing.T, ns *testnats.Server, freezeRelayLeader bool, freeze time.Duration) {
	const rate = 10 // starts per second
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

	load := newSteady()
	for range 2 {
		startWorker(t, ns, worker.Config{MaxConcurrency: 20}, load.register)
	}
	cl := newClient(t, st, ns.Connect(t))

	load.startFor(t, ctx, cl, rate, 3*time.Second) // the steady state the freeze interrupts
	frozeAt := frozen.signal(t, syscall.SIGSTOP)
	load.startFor(t, ctx, cl, rate, freeze)
	resumedAt := frozen.signal(t, syscall.SIGCONT)
	load.startFor(t, ctx, cl, rate, 2*time.Second)
	pause := load.check(t, frozeAt, resumedAt)

	// The runs started in the freeze's first 5 s completed before it ended.
	early, late := 0, 0
	for _, r := range load.runs {
		if r.at.Before(frozeAt) || r.at.After(frozeAt.Add(5*time.Second)) {
			continue
		}
		early++
		run, err := st.RunsGet(ctx, "default", r.h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.FinishedAt == nil || !run.FinishedAt.Before(resumedAt) {
			late++
		}
	}
	t.Logf("%d runs; longest pause in step starts while frozen: %v; of the %d runs started in the freeze's first 5 s, %d completed after it ended",
		len(load.runs), pause.Round(time.Millisecond), early, late)
	if pause > frozenUnderLoadBound {
		t.Errorf("step starts paused for %v while a dispatcher was frozen, want at most %v", pause.Round(time.Millisecond), frozenUnderLoadBound)
	}
	if late > 0 {
		t.Errorf("%d of the %d runs started in the freeze's first 5 s completed only after it ended", late, early)
	}
}
