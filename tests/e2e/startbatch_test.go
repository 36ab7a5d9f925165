package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Start batches closed by time survive the reaper's leader: starts are
// added to batches of five keys, none filling, so each becomes a run at
// its deadline, closed by the leader. The leader is killed (SIGKILL),
// then its successor frozen (SIGSTOP) while a third stands by, and later
// resumed, all while starts go on: in the end no batch is open and every
// item is in exactly one run.
func TestStartBatchesSurviveKilledAndFrozenReaper(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	env := frozenLeaderEnv(dbURL, ns.URL())
	first, second := startReaperPair(t, ctx, st, env, "reaper (frozen)")

	const keys = 5
	var (
		mu    sync.Mutex
		added = map[string]bool{}
		stop  = make(chan struct{})
		done  = make(chan error, 1)
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(added)
	}
	go func() { // adds items round the keys until stopped
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			p := fmt.Sprintf(`{"k":%d,"i":%d}`, i%keys, i)
			_, err := st.StartBatchesAdd(ctx, store.StartBatchAddParams{Namespace: "default", Queue: "nobody", Type: "Agg",
				Batch:   store.StartBatch{Key: fmt.Sprint(i % keys), MaxSize: store.MaxStartBatchSize, MaxWait: 300 * time.Millisecond},
				Payload: []byte(p)})
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			added[p] = true
			mu.Unlock()
		}
	}()
	closedRuns := func() int {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the adder stopped at %d items: %v", count(), err)
		default:
		}
		bs, err := st.StartBatchesList(ctx, "default", false, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range bs {
			if b.RunID != nil {
				n++
			}
		}
		return n
	}
	waitUntil(t, 30*time.Second, "batches closed by the first leader", func() bool { return closedRuns() >= 2*keys })
	killed := time.Now()
	_ = first.cmd.Process.Kill()
	t.Logf("killed the leader at %d items", count())
	if _, err := second.await(ctx, "reaper is leader", killed, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	third := startChild(t, "reaper (standby)", env, "reaper")
	awaitQueued(t, ctx, st, reaper.LockKey)
	at := closedRuns()
	waitUntil(t, 30*time.Second, "batches closed by the second leader", func() bool { return closedRuns() >= at+2*keys })
	frozen := second.signal(t, syscall.SIGSTOP)
	t.Logf("froze its successor at %d items", count())
	if _, err := third.await(ctx, "reaper is leader", frozen, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(frozen.Add(batchFreeze())))
	second.signal(t, syscall.SIGCONT)
	at = closedRuns()
	waitUntil(t, 30*time.Second, "batches closed after the resume", func() bool { return closedRuns() >= at+2*keys })
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "no batch open", func() bool {
		open, err := st.StartBatchesList(ctx, "default", true, 10)
		return err == nil && len(open) == 0
	})
	runs, _, err := st.RunsList(ctx, store.RunsListParams{Namespace: "default", Type: "Agg", Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == store.MaxPageSize {
		t.Fatalf("%d runs or more: the check reads one page", len(runs))
	}
	seen := map[string]bool{}
	for _, r := range runs {
		full, err := st.RunsGet(ctx, "default", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(full.Input, &items); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if seen[string(it)] {
				t.Fatalf("item %s is in two runs", it)
			}
			if !added[string(it)] {
				t.Fatalf("run %s holds item %s that was never added", r.ID, it)
			}
			seen[string(it)] = true
		}
	}
	t.Logf("%d items in %d runs", len(seen), len(runs))
	if len(seen) != len(added) {
		t.Fatalf("%d items in runs, %d added", len(seen), len(added))
	}
}
