package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// batchFreeze is how long TestBatchSurvivesKilledAndFrozenReaper freezes
// the reaper working on the batch (20 s in the full run).
func batchFreeze() time.Duration {
	if full() {
		return 20 * time.Second
	}
	return 8 * time.Second
}

// TestBatchSurvivesKilledAndFrozenReaper cancels every run of a type in
// one batch, worked by the reaper's leader, a process of its own with a
// standby beside it. The leader is killed (SIGKILL) mid-batch, then its
// successor is frozen (SIGSTOP) mid-batch while a third replica stands
// by: the batch completes, every run cancelled, each acted on once (a
// second cancel of a run would be recorded as skipped) and none skipped,
// and no second saw more runs acted on than the rate allows.
func TestBatchSurvivesKilledAndFrozenReaper(t *testing.T) {
	skipUnderAuth(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, dbURL := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	env := frozenLeaderEnv(dbURL, ns.URL())

	const n, rate = 2000, 200
	for i := range n {
		if _, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "nobody", Type: "B",
			Input: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	first, second := startReaperPair(t, ctx, st, env, "reaper (frozen)")

	b, err := st.BatchesCreate(ctx, store.BatchCreateParams{Namespace: "default", Action: store.BatchCancel, Query: "type = 'B'", Rate: rate})
	if err != nil || b.Total != n {
		t.Fatalf("create batch: %+v %v", b, err)
	}
	progress := func() store.Batch {
		t.Helper()
		got, err := st.BatchesGet(ctx, "default", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	waitUntil(t, 30*time.Second, "a quarter of the batch", func() bool { return progress().Done >= n/4 })
	killed := time.Now()
	_ = first.cmd.Process.Kill()
	t.Logf("killed the leader at %d of %d runs", progress().Done, n)
	if _, err := second.await(ctx, "reaper is leader", killed, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	third := startChild(t, "reaper (standby)", env, "reaper")
	awaitQueued(t, ctx, st, reaper.LockKey)
	at := progress().Done
	waitUntil(t, 30*time.Second, "the new leader's progress", func() bool { return progress().Done >= at+n/8 })
	frozen := second.signal(t, syscall.SIGSTOP)
	t.Logf("froze its successor at %d of %d runs", progress().Done, n)
	if _, err := third.await(ctx, "reaper is leader", frozen, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(frozen.Add(batchFreeze())))
	second.signal(t, syscall.SIGCONT)
	t.Logf("resumed it at %d of %d runs", progress().Done, n)

	waitUntil(t, 60*time.Second, "the batch completes", func() bool { return progress().State == store.BatchCompleted })
	got := progress()
	if got.Done != n || got.Failed != 0 || got.Skipped != 0 {
		t.Fatalf("batch: %d done, %d failed, %d skipped of %d; want every run done once", got.Done, got.Failed, got.Skipped, n)
	}
	total, groups, err := st.RunsCountQuery(ctx, "default", "type = 'B'", "status")
	if err != nil || total != n || len(groups) != 1 || groups[0].Value == nil || *groups[0].Value != string(store.StatusCancelled) {
		t.Fatalf("runs by status: %d %+v %v", total, groups, err)
	}
	rs, err := st.BatchRunsList(ctx, b.ID, "pending", uuid.Nil, 10)
	if err != nil || len(rs) != 0 {
		t.Fatalf("pending runs left: %+v %v", rs, err)
	}
	// The rate holds: no second saw more than its runs, give or take the
	// chunks two leaders had under way at a takeover.
	var acted []time.Time
	for after := uuid.Nil; ; {
		page, err := st.BatchRunsList(ctx, b.ID, "", after, store.MaxBatchList)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			acted = append(acted, *r.ActedAt)
		}
		if len(page) < store.MaxBatchList {
			break
		}
		after = page[len(page)-1].RunID
	}
	slices.SortFunc(acted, func(a, b time.Time) int { return a.Compare(b) })
	most, chunk := 0, rate/10
	for i, j := 0, 0; i < len(acted); i++ {
		for acted[i].Sub(acted[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	t.Logf("at most %d runs acted on in one second, at a rate of %d", most, rate)
	if most > rate+2*chunk {
		t.Errorf("%d runs acted on in one second, at a rate of %d runs/s", most, rate)
	}
}

// startReaperPair starts a dispatcher (the relay leader), a reaper that
// leads ("reaper (killed)") and a second one, named second, queued for
// the leadership.
func startReaperPair(t *testing.T, ctx context.Context, st *store.Store, env []string, second string) (leader, standby *child) {
	t.Helper()
	dispatcher := startChild(t, "dispatcher", env, "dispatcher")
	if _, err := dispatcher.await(ctx, "relay is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader = startChild(t, "reaper (killed)", env, "reaper")
	if _, err := leader.await(ctx, "reaper is leader", time.Time{}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	standby = startChild(t, second, env, "reaper")
	awaitQueued(t, ctx, st, reaper.LockKey)
	return leader, standby
}
