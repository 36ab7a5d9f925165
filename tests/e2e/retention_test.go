package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// spawnReaper starts a reaper process on the database and NATS server
// given, with the retention cleanup's batch size and pause; it is killed
// when the test ends.
func spawnReaper(t *testing.T, dbURL, natsURL, batch, pause string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"=reaper", "KAGZI_DATABASE_URL="+dbURL, "KAGZI_NATS_URL="+natsURL,
		"KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=error", "KAGZI_RETENTION_BATCH="+batch, "KAGZI_RETENTION_PAUSE="+pause)
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

// The DBOS #769 case with real processes: a reaper working through a
// backlog of expired runs is SIGKILLed, again and again, wherever it is in
// its batches (deleting, committing, pausing). After every kill each run is
// there whole (its row, its step, its payload) or gone whole; a last
// reaper finishes the backlog; and a run started afterwards with an id
// that was deleted starts from nothing.
func TestKilledRetentionLeavesNoPartialRun(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ns := testnats.Start(t)
	st := openStore(t, url, nil)
	ctx := context.Background()
	const total = 8000
	if _, err := st.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "default", Queue: "q", Type: "Old",
		Count: total, Before: time.Now().Add(-30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	left := func() int64 {
		t.Helper()
		n, err := st.RunsCount(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		return n[store.StatusCompleted]
	}
	// whole checks every run left: one step, its payload, no row of a
	// run that is gone.
	whole := func(when string) {
		t.Helper()
		o, err := st.RunsOrphans(ctx)
		if err != nil || o != (store.Orphans{}) {
			t.Fatalf("%s: rows without their run: %+v %v", when, o, err)
		}
		p := store.RunsExportParams{Namespace: "default", Limit: 1000}
		for {
			recs, next, err := st.RunsExport(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if len(r.Steps) != 1 || r.Run.Input == nil || r.Run.Output == nil {
					t.Fatalf("%s: run %s is partly there: %d steps, input %q, output %q", when, r.Run.ID, len(r.Steps), r.Run.Input, r.Run.Output)
				}
			}
			if next == nil {
				return
			}
			p.After = next
		}
	}
	firstIDs, _, err := st.RunsList(ctx, store.RunsListParams{Namespace: "default", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}

	prev := int64(total)
	// The first kill falls most likely in a pause between small batches,
	// the others inside a large batch that barely pauses.
	for kill, pace := range [][2]string{{"100", "20ms"}, {"1000", "1ms"}, {"1000", "1ms"}, {"1000", "1ms"}} {
		p := spawnReaper(t, url, ns.URL(), pace[0], pace[1])
		// Killed once it has deleted something since the last kill.
		waitUntil(t, 30*time.Second, "the reaper deleting", func() bool { return left() < prev })
		p.kill()
		n := left()
		t.Logf("kill %d: %d runs left", kill, n)
		if n == 0 {
			t.Fatal("the backlog ended before the kill: nothing was killed mid-way")
		}
		whole(fmt.Sprintf("after kill %d", kill))
		prev = n
	}
	spawnReaper(t, url, ns.URL(), "100", "20ms")
	waitUntil(t, 60*time.Second, "the backlog deleted", func() bool { return left() == 0 })
	whole("at the end")

	// A deleted id, used again, starts from nothing.
	id := firstIDs[0].ID
	if _, created, err := st.RunsCreate(ctx, store.RunsCreateParams{RunID: id, Namespace: "default", Queue: "q", Type: "Old",
		Input: []byte(`"again"`)}); err != nil || !created {
		t.Fatalf("start %s again: %v %v", id, created, err)
	}
	got, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Old"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != id || len(got[0].Steps) != 0 || string(got[0].Input) != `"again"` {
		t.Fatalf("claim of the run started again: %+v %v; want it without steps", got, err)
	}
}
