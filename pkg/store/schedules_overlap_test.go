package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// overlapSchedule creates a minutely schedule of type T@v1 on a queue of
// its own from t0: it first fires at t0+1m.
func overlapSchedule(t *testing.T, s *store.Store, p store.OverlapPolicy, jitter time.Duration) store.Schedule {
	t.Helper()
	return createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *", Type: "T", Version: "v1",
		Queue: "q-" + uuid.NewString()[:8], Overlap: p, Jitter: jitter})
}

// fireAt fires sc (read again) as a scheduler whose clock says now.
func fireAt(t *testing.T, s *store.Store, id uuid.UUID, now time.Time) store.SchedulesFireDueManyResult {
	t.Helper()
	sc, err := s.SchedulesGet(context.Background(), "ns", id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SchedulesFireDueMany(context.Background(), []store.Schedule{sc}, now, 5*time.Minute, "")
	if err != nil || res[0].Err != nil {
		t.Fatalf("fire at %v: %v %+v", now, err, res)
	}
	if !res[0].Advanced {
		t.Fatalf("fire at %v: not advanced", now)
	}
	return res[0]
}

func fireTimes(runs []store.Run) []time.Time {
	out := make([]time.Time, len(runs))
	for i, r := range runs {
		out[i] = r.ScheduleFireAt.UTC()
	}
	return out
}

func wantFires(t *testing.T, what string, runs []store.Run, want ...time.Time) {
	t.Helper()
	got := fireTimes(runs)
	if len(got) != len(want) {
		t.Fatalf("%s: fired %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: fired %v, want %v", what, got, want)
		}
	}
}

func TestSchedulesOverlapDefaultIsAllowAll(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	sc := overlapSchedule(t, s, "", 0)
	if sc.Overlap != store.OverlapAllowAll || sc.Jitter != 0 {
		t.Fatalf("created: %+v", sc)
	}
	wantFires(t, "first", fireAt(t, s, sc.ID, t0.Add(time.Minute)).Runs, t0.Add(time.Minute))
	wantFires(t, "while live", fireAt(t, s, sc.ID, t0.Add(2*time.Minute)).Runs, t0.Add(2*time.Minute))
	if _, err := s.SchedulesCreate(context.Background(), store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T",
		Cron: "@daily", Overlap: "sometimes"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("unknown policy: %v", err)
	}
	if _, err := s.SchedulesCreate(context.Background(), store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T",
		Cron: "@daily", Jitter: -time.Second}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative jitter: %v", err)
	}
}

func TestSchedulesOverlapSkip(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := overlapSchedule(t, s, store.OverlapSkip, 0)
	first := fireAt(t, s, sc.ID, t0.Add(time.Minute))
	wantFires(t, "first", first.Runs, t0.Add(time.Minute))
	r := fireAt(t, s, sc.ID, t0.Add(2*time.Minute))
	wantFires(t, "while live", r.Runs)
	if len(r.Dropped) != 1 || !r.Dropped[0].Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("dropped %v", r.Dropped)
	}
	if _, err := s.RunsTerminate(ctx, "ns", first.Runs[0].ID, "done"); err != nil {
		t.Fatal(err)
	}
	wantFires(t, "after the end", fireAt(t, s, sc.ID, t0.Add(3*time.Minute)).Runs, t0.Add(3*time.Minute))
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if got.Overlap != store.OverlapSkip || got.BufferedFireAt != nil {
		t.Fatalf("schedule %+v", got)
	}
}

// BufferOne holds one fire while an instance is live, drops the rest, and
// the instance's end makes the template due at once (migration 015's
// trigger), with the held next fire time kept.
func TestSchedulesOverlapBufferOne(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := overlapSchedule(t, s, store.OverlapBufferOne, 0)
	first := fireAt(t, s, sc.ID, t0.Add(time.Minute))
	wantFires(t, "first", first.Runs, t0.Add(time.Minute))
	r := fireAt(t, s, sc.ID, t0.Add(2*time.Minute))
	wantFires(t, "while live", r.Runs)
	if r.Buffered == nil || !r.Buffered.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("buffered %v", r.Buffered)
	}
	r = fireAt(t, s, sc.ID, t0.Add(3*time.Minute))
	if len(r.Runs) != 0 || len(r.Dropped) != 1 || r.Buffered == nil || !r.Buffered.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("while buffered: %+v", r)
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if !got.NextFireAt.Equal(t0.Add(4 * time.Minute)) {
		t.Fatalf("next fire %v", got.NextFireAt)
	}

	// The end: the template is due now (the database's now, long before
	// t0), and comes up in the due list.
	if _, err := s.RunsTerminate(ctx, "ns", first.Runs[0].ID, "done"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.SchedulesGet(ctx, "ns", sc.ID)
	if got.NextFireAt == nil || !got.NextFireAt.Before(t0) || got.BufferedFireAt == nil {
		t.Fatalf("after the end: %+v", got)
	}
	now := t0.Add(3*time.Minute + 30*time.Second)
	due, err := s.SchedulesDue(ctx, now, 1000)
	if err != nil || len(due) != 1 || due[0].ID != sc.ID {
		t.Fatalf("due %+v %v", due, err)
	}
	r = fireAt(t, s, sc.ID, now)
	wantFires(t, "released", r.Runs, t0.Add(2*time.Minute))
	if r.Buffered != nil || len(r.Dropped) != 0 {
		t.Fatalf("released: %+v", r)
	}
	if r.Runs[0].AvailableAt == nil {
		t.Fatalf("released run not due: %+v", r.Runs[0])
	}
	got, _ = s.SchedulesGet(ctx, "ns", sc.ID)
	if !got.NextFireAt.Equal(t0.Add(4*time.Minute)) || got.BufferedFireAt != nil {
		t.Fatalf("after the release: next %v buffered %v", got.NextFireAt, got.BufferedFireAt)
	}
	// The next fire finds the released run live and holds itself.
	r = fireAt(t, s, sc.ID, t0.Add(4*time.Minute))
	if len(r.Runs) != 0 || r.Buffered == nil || !r.Buffered.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("after the release, a fire: %+v", r)
	}
	// A pause drops the held fire.
	if p, err := s.SchedulesPause(ctx, "ns", sc.ID); err != nil || p.BufferedFireAt != nil {
		t.Fatalf("pause: %+v %v", p, err)
	}
}

func TestSchedulesOverlapCancelAndTerminateOther(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	for _, p := range []store.OverlapPolicy{store.OverlapCancelOther, store.OverlapTerminateOther} {
		sc := overlapSchedule(t, s, p, 0)
		first := fireAt(t, s, sc.ID, t0.Add(time.Minute))
		wantFires(t, string(p), first.Runs, t0.Add(time.Minute))
		claimAgain(t, s, "ns", sc.Queue, first.Runs[0].ID)
		r := fireAt(t, s, sc.ID, t0.Add(2*time.Minute))
		wantFires(t, string(p)+" while live", r.Runs, t0.Add(2*time.Minute))
		if len(r.Stopped) != 1 || r.Stopped[0] != first.Runs[0].ID {
			t.Fatalf("%s: stopped %v", p, r.Stopped)
		}
		prev, err := s.RunsGet(ctx, "ns", first.Runs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		switch p {
		case store.OverlapCancelOther:
			// A request: the running workflow sees it and ends itself.
			if prev.Status != store.StatusRunning || prev.CancelRequestedAt == nil {
				t.Fatalf("cancel-other: previous %s, cancel requested %v", prev.Status, prev.CancelRequestedAt)
			}
		default:
			if prev.Status != store.StatusCancelled {
				t.Fatalf("terminate-other: previous %s", prev.Status)
			}
		}
	}
}

// Jitter delays each fire's run by the schedule's deterministic delay; the
// fire time stays the nominal one.
func TestSchedulesJitter(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	for _, p := range []store.OverlapPolicy{store.OverlapAllowAll, store.OverlapSkip} {
		sc := overlapSchedule(t, s, p, 40*time.Second)
		if sc.Jitter != 40*time.Second {
			t.Fatalf("jitter %v", sc.Jitter)
		}
		fire := t0.Add(time.Minute)
		r := fireAt(t, s, sc.ID, fire)
		wantFires(t, "jittered", r.Runs, fire)
		want := fire.Add(store.JitterDelay(sc.ID, fire, 40*time.Second))
		if got := r.Runs[0].AvailableAt; got == nil || !got.Equal(want) {
			t.Fatalf("%s: available at %v, want %v", p, got, want)
		}
	}
}

func TestSchedulesBackfill(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 * * * *", Jitter: time.Minute})
	bf := func(from, to time.Time, p store.OverlapPolicy) store.SchedulesBackfillResult {
		t.Helper()
		r, err := s.SchedulesBackfill(ctx, store.SchedulesBackfillParams{Namespace: "ns", ScheduleID: sc.ID, From: from, To: to,
			Overlap: p, Now: t0})
		if err != nil {
			t.Fatalf("backfill [%v, %v): %v", from, to, err)
		}
		return r
	}
	r := bf(t0.Add(-5*time.Hour), t0, "")
	wantFires(t, "backfill", r.Runs, t0.Add(-5*time.Hour), t0.Add(-4*time.Hour), t0.Add(-3*time.Hour), t0.Add(-2*time.Hour), t0.Add(-time.Hour))
	if len(r.FireTimes) != 5 || len(r.Existing) != 0 {
		t.Fatalf("backfill: %+v", r)
	}
	for _, run := range r.Runs {
		// Due now (the database's): fire time plus jitter is long past.
		if run.AvailableAt == nil || !run.AvailableAt.Before(t0) {
			t.Fatalf("backfilled run available at %v", run.AvailableAt)
		}
	}
	r = bf(t0.Add(-5*time.Hour), t0, "")
	if len(r.Runs) != 0 || len(r.Existing) != 5 {
		t.Fatalf("repeated backfill: %+v", r)
	}
	// Overlapping range: only the new times.
	r = bf(t0.Add(-7*time.Hour), t0.Add(-4*time.Hour+time.Second), store.OverlapAllowAll)
	wantFires(t, "overlapping backfill", r.Runs, t0.Add(-7*time.Hour), t0.Add(-6*time.Hour))
	// Skip with live instances starts nothing.
	r = bf(t0.Add(-10*time.Hour), t0.Add(-7*time.Hour), store.OverlapSkip)
	if len(r.Runs) != 0 || len(r.Dropped) != 3 {
		t.Fatalf("skip backfill: %+v", r)
	}
	hist, _ := s.SchedulesHistory(ctx, "ns", sc.ID, 1000)
	if len(hist) != 7 {
		t.Fatalf("%d runs, want 7", len(hist))
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
	}{
		{"empty", t0, t0},
		{"future", t0.Add(-time.Hour), t0.Add(time.Hour)},
		{"too many", t0.Add(-1001 * time.Hour), t0},
	} {
		if _, err := s.SchedulesBackfill(ctx, store.SchedulesBackfillParams{Namespace: "ns", ScheduleID: sc.ID, From: c.from, To: c.to,
			Now: t0}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%s: want ErrInvalidArgument, got %v", c.name, err)
		}
	}
	if _, err := s.SchedulesBackfill(ctx, store.SchedulesBackfillParams{Namespace: "ns", ScheduleID: uuid.New(),
		From: t0.Add(-time.Hour), To: t0, Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
}

// Two schedulers fire the same due schedules with overlap policies at
// once, round after round: each schedule advances once per round, each
// fire time starts at most once, and each policy holds (Skip and BufferOne
// never have two instances live).
func TestSchedulesOverlapRacingSchedulers(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	policies := []store.OverlapPolicy{store.OverlapSkip, store.OverlapBufferOne, store.OverlapCancelOther,
		store.OverlapTerminateOther, store.OverlapAllowAll}
	var ids []uuid.UUID
	for i := range 20 {
		ids = append(ids, overlapSchedule(t, s, policies[i%len(policies)], 0).ID)
	}
	for round := 1; round <= 4; round++ {
		now := t0.Add(time.Duration(round) * time.Minute)
		due, err := s.SchedulesDue(ctx, now, 1000)
		if err != nil || len(due) != len(ids) {
			t.Fatalf("round %d: %d due, %v", round, len(due), err)
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			res   [2][]store.SchedulesFireDueManyResult
			errs  [2]error
		)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[g], errs[g] = s.SchedulesFireDueMany(ctx, due, now, 5*time.Minute, "")
			}()
		}
		close(start)
		wg.Wait()
		advanced := map[uuid.UUID]int{}
		for g := range 2 {
			if errs[g] != nil {
				t.Fatalf("round %d: %v", round, errs[g])
			}
			for _, r := range res[g] {
				if r.Err != nil {
					t.Fatalf("round %d: %v", round, r.Err)
				}
				if r.Advanced {
					advanced[r.ScheduleID]++
				}
			}
		}
		for _, id := range ids {
			if advanced[id] != 1 {
				t.Fatalf("round %d: schedule %s advanced %d times", round, id, advanced[id])
			}
		}
	}
	for i, id := range ids {
		hist, err := s.SchedulesHistory(ctx, "ns", id, 100)
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, r := range hist {
			if r.Status == store.StatusPending || r.Status == store.StatusRunning || r.Status == store.StatusSleeping {
				live++
			}
		}
		// No instance ever ends here except by the policies themselves.
		want := map[store.OverlapPolicy][2]int{
			store.OverlapSkip:           {1, 1},
			store.OverlapBufferOne:      {1, 1},
			store.OverlapCancelOther:    {4, 1}, // unstarted runs are cancelled at once
			store.OverlapTerminateOther: {4, 1},
			store.OverlapAllowAll:       {4, 4},
		}[policies[i%len(policies)]]
		if len(hist) != want[0] || live != want[1] {
			t.Fatalf("%s: %d runs, %d live; want %d, %d", policies[i%len(policies)], len(hist), live, want[0], want[1])
		}
	}
}

// A schedule's concurrency and rate limit keys go with every run it
// starts, fired or backfilled: under a per-key limit of 1, only one of
// them is claimed.
func TestSchedulesCarryFlowKeys(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	queue := "q-" + uuid.NewString()[:8]
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *", Type: "T", Queue: queue, Now: start,
		ConcurrencyKey: "customer-7", RateLimitKey: "crm-api"})
	if sc.ConcurrencyKey != "customer-7" || sc.RateLimitKey != "crm-api" {
		t.Fatalf("schedule keys %q %q", sc.ConcurrencyKey, sc.RateLimitKey)
	}
	if got, err := s.SchedulesGet(ctx, "ns", sc.ID); err != nil || got.ConcurrencyKey != "customer-7" || got.RateLimitKey != "crm-api" {
		t.Fatalf("schedule read back: %+v %v", got, err)
	}
	if _, err := s.LimitsSetPerKey(ctx, "ns", queue, "T", 1); err != nil {
		t.Fatal(err)
	}
	fireAt(t, s, sc.ID, start.Add(time.Minute))
	fireAt(t, s, sc.ID, start.Add(2*time.Minute))
	if _, err := s.SchedulesBackfill(ctx, store.SchedulesBackfillParams{Namespace: "ns", ScheduleID: sc.ID,
		From: start.Add(-2 * time.Minute), To: start.Add(-time.Minute), Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: queue, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d runs of one key under a per-key limit of 1: %v", len(claimed), err)
	}
	usage, err := s.LimitsKeyUsage(ctx, "ns", queue, "T", 10)
	if err != nil || len(usage) != 1 || usage[0].Key != "customer-7" || usage[0].Running != 1 {
		t.Fatalf("key usage %+v %v", usage, err)
	}
	if _, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: queue, Type: "T", Cron: "@daily",
		ConcurrencyKey: strings.Repeat("k", 1000)}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("an over-long key: %v", err)
	}
}
