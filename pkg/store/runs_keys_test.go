package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// runningPerKey counts the RUNNING runs of each concurrency key.
func (e *env) runningPerKey() map[string]int {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT coalesce(concurrency_key, ''), count(*) FROM kagzi.workflow_runs
WHERE status = 'RUNNING' GROUP BY 1`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			e.t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

// completeRunning completes every RUNNING run.
func (e *env) completeRunning() int {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT run_id, lease_token FROM kagzi.workflow_runs WHERE status = 'RUNNING'`)
	if err != nil {
		e.t.Fatal(err)
	}
	var ls []store.Lease
	for rows.Next() {
		l := store.Lease{Namespace: "ns"}
		if err := rows.Scan(&l.RunID, &l.Token); err != nil {
			e.t.Fatal(err)
		}
		ls = append(ls, l)
	}
	rows.Close()
	for _, l := range ls {
		if err := e.s.RunsComplete(e.ctx, l, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	return len(ls)
}

// Many concurrent claimers never run more than the per-key limit of a key,
// and every key with runs reaches it.
func TestPerKeyLimitHoldsUnderConcurrentClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", 2)
	if err != nil || l.MaxPerKey != 2 || l.MaxRunning != store.NoLimit {
		t.Fatalf("set per-key limit: %+v %v", l, err)
	}
	if _, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", -1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative per-key limit: %v", err)
	}
	var ps []store.RunsCreateParams
	for k := 0; k < 10; k++ {
		for i := 0; i < 10; i++ {
			ps = append(ps, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "K", ConcurrencyKey: fmt.Sprintf("k%02d", k)})
		}
	}
	if _, err := e.s.RunsCreateMany(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	types := []store.TypeVersion{{Type: "K"}}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.s.RunsClaim(e.ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
					Types: types, Limit: 7, Lease: time.Minute}); err != nil {
					t.Errorf("claim: %v", err)
				}
			}()
		}
		wg.Wait()
		got := e.runningPerKey()
		if len(got) != 10 {
			t.Fatalf("round %d: keys running %v, want all 10", round, got)
		}
		for k, n := range got {
			if n != 2 {
				t.Fatalf("round %d: key %s has %d running, limit 2 (%v)", round, k, n, got)
			}
		}
		if n := e.completeRunning(); n != 20 {
			t.Fatalf("completed %d", n)
		}
	}
	// Runs without a key are not limited per key.
	for i := 0; i < 3; i++ {
		e.create(store.RunsCreateParams{Type: "K"})
	}
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: types, Limit: 10, Lease: time.Minute}); len(got) != 3 {
		t.Fatalf("claimed %d of 3 runs without a key", len(got))
	}
	// Removing the per-key limit removes the row (no total limit left).
	if _, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", 0); err != nil {
		t.Fatal(err)
	}
	if ls, err := e.s.LimitsList(e.ctx, "ns"); err != nil || len(ls) != 0 {
		t.Fatalf("limits after removal: %+v %v", ls, err)
	}
}

// A key with a few runs queued behind thousands of another key's gets its
// slots in the next claim: claims go round-robin across keys.
func TestPerKeyLimitIsFairAcrossKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", 2); err != nil {
		t.Fatal(err)
	}
	var ps []store.RunsCreateParams
	for i := 0; i < 2000; i++ {
		ps = append(ps, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "K", ConcurrencyKey: "A"})
	}
	if _, err := e.s.RunsCreateMany(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	var b []store.RunsCreateParams
	for i := 0; i < 4; i++ {
		b = append(b, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "K", ConcurrencyKey: "B", Priority: -5})
	}
	if _, err := e.s.RunsCreateMany(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	// One claim of three takes rank 1 of both keys before rank 2 of
	// either, though A's runs are older and of higher priority.
	got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "K"}}, Limit: 3, Lease: time.Minute})
	if pk := e.runningPerKey(); len(got) != 3 || pk["A"] != 2 || pk["B"] != 1 {
		t.Fatalf("claimed %d: %v, want A 2 and B 1", len(got), pk)
	}
	// Claims of one run at a time: B's second, then nothing (both full).
	for i, want := range []int{1, 0} {
		if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "K"}}, Limit: 1, Lease: time.Minute}); len(got) != want {
			t.Fatalf("claim %d took %d, want %d", i, len(got), want)
		}
	}
	e.completeRunning()
	got = e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "K"}}, Limit: 10, Lease: time.Minute})
	if pk := e.runningPerKey(); len(got) != 4 || pk["A"] != 2 || pk["B"] != 2 {
		t.Fatalf("claimed %d: %v", len(got), pk)
	}
	// Stats: A is full with runs queued; B is full with none left.
	_, st, err := e.s.RunsClaimStats(e.ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "K"}}, Limit: 10, Lease: time.Minute})
	if err != nil || st.KeysFull != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

// A type's total limit and its per-key limit hold together; unlimited types
// and runs without a key are claimed in the same statement.
func TestPerKeyLimitWithTotalLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "K", 3); err != nil {
		t.Fatal(err)
	}
	l, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", 1)
	if err != nil || l.MaxRunning != 3 || l.MaxPerKey != 1 {
		t.Fatalf("%+v %v", l, err)
	}
	for k := 0; k < 5; k++ {
		e.create(store.RunsCreateParams{Type: "K", ConcurrencyKey: fmt.Sprint(k)})
		e.create(store.RunsCreateParams{Type: "K", ConcurrencyKey: fmt.Sprint(k)})
		e.create(store.RunsCreateParams{Type: "U"})
	}
	got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "K"}, {Type: "U"}}, Limit: 100, Lease: time.Minute})
	pk := e.runningPerKey()
	if len(got) != 8 || pk[""] != 5 {
		t.Fatalf("claimed %d, running %v: want 3 K (total limit) and 5 U", len(got), pk)
	}
	for k, n := range pk {
		if k != "" && n != 1 {
			t.Fatalf("key %s: %d running, limit 1", k, n)
		}
	}
	use, err := e.s.LimitsKeyUsage(e.ctx, "ns", "q", "K", 10)
	if err != nil || len(use) != 3 || use[0].Running != 1 {
		t.Fatalf("usage %+v %v", use, err)
	}
}

// A rate limit admits at most its limit per window across concurrent
// claimers, and moves the runs it held back to the windows ahead.
func TestRateLimitHoldsAndMovesHeldRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.RateLimitsSet(e.ctx, "ns", "api", 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		n int
		p time.Duration
	}{{0, time.Second}, {1, 0}, {1, 1500 * time.Microsecond}} {
		if _, err := e.s.RateLimitsSet(e.ctx, "ns", "api", bad.n, bad.p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("limit %d per %v: %v", bad.n, bad.p, err)
		}
	}
	var ps []store.RunsCreateParams
	for i := 0; i < 10; i++ {
		ps = append(ps, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "R", RateLimitKey: "api"})
		ps = append(ps, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "R"})
	}
	if _, err := e.s.RunsCreateMany(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := 0
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, st, err := e.s.RunsClaimStats(e.ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
				Types: []store.TypeVersion{{Type: "R"}}, Limit: 4, Lease: time.Minute})
			if err != nil {
				t.Errorf("claim: %v", err)
			}
			mu.Lock()
			held += st.RateHeld
			mu.Unlock()
		}()
	}
	wg.Wait()
	// A claim whose candidates the limit held back takes fewer than it
	// could (the dispatcher claims again); the held runs are moved, so the
	// next claim takes the rest.
	e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "R"}}, Limit: 10, Lease: time.Minute})
	var keyed, plain, later int
	var firstLater time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE status = 'RUNNING' AND rate_key IS NOT NULL),
	count(*) FILTER (WHERE status = 'RUNNING' AND rate_key IS NULL),
	count(*) FILTER (WHERE status = 'PENDING' AND available_at > now()),
	coalesce(min(available_at) FILTER (WHERE status = 'PENDING'), 'epoch')
FROM kagzi.workflow_runs`).Scan(&keyed, &plain, &later, &firstLater); err != nil {
		t.Fatal(err)
	}
	if keyed != 3 || plain != 10 || later != 7 || held < 7 {
		t.Fatalf("running with key %d (limit 3), without %d (want 10), moved later %d (want 7), held %d", keyed, plain, later, held)
	}
	if want := time.Now().Truncate(time.Hour).Add(time.Hour); !firstLater.Equal(want) {
		t.Fatalf("held runs due at %v, want the next window %v", firstLater, want)
	}
	rl, err := e.s.RateLimitsList(e.ctx, "ns")
	if err != nil || len(rl) != 1 || rl[0].Claims != 3 || rl[0].Limit != 3 || rl[0].Period != time.Hour {
		t.Fatalf("rate limits %+v %v", rl, err)
	}
	// The plain statement never claims a due rate-keyed run.
	e.create(store.RunsCreateParams{Type: "R", RateLimitKey: "api"})
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "R"}}, Limit: 10, Lease: time.Minute}); len(got) != 0 {
		t.Fatalf("claimed %d past a full window", len(got))
	}
	// Removing the limit gives the runs it held their due time back: the
	// 7 moved to the windows ahead and the one just held.
	released, err := e.s.RateLimitsDelete(e.ctx, "ns", "api")
	if err != nil || released != 8 {
		t.Fatalf("delete: released %d (want 8), %v", released, err)
	}
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "R"}}, Limit: 10, Lease: time.Minute}); len(got) != 8 {
		t.Fatalf("claimed %d after the limit was removed, want the 8 it held", len(got))
	}
	if _, err := e.s.RateLimitsDelete(e.ctx, "ns", "api"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// A limit set too low holds runs far ahead; setting it again gives them
// their due time back, and the new limit spreads them over its windows.
// A run sleeping with the key is not woken by it.
func TestRateLimitChangeReleasesHeldRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.RateLimitsSet(e.ctx, "ns", "crm", 1, store.MaxRatePeriod); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.create(store.RunsCreateParams{Type: "R", RateLimitKey: "crm"})
	}
	wake := time.Now().Add(time.Hour)
	sleeper := e.create(store.RunsCreateParams{Type: "R", RateLimitKey: "crm", AvailableAt: &wake})
	claim := func() int {
		return len(e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "R"}}, Limit: 10, Lease: time.Minute}))
	}
	if n := claim(); n != 1 {
		t.Fatalf("claimed %d under 1 per day", n)
	}
	var far int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.workflow_runs
WHERE status = 'PENDING' AND available_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day'
	AND rate_due_at IS NOT NULL`).Scan(&far); err != nil || far != 4 {
		t.Fatalf("%d runs held in the days ahead (want 4), %v", far, err)
	}
	r, err := e.s.RateLimitsSet(e.ctx, "ns", "crm", 2, time.Hour)
	if err != nil || r.Released != 4 {
		t.Fatalf("set: released %d (want 4), %v", r.Released, err)
	}
	// 2 per hour: 2 now (its window is new), the other 2 an hour ahead.
	if n := claim(); n != 2 {
		t.Fatalf("claimed %d under 2 per hour, want 2", n)
	}
	var next time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT max(available_at) FROM kagzi.workflow_runs
WHERE status = 'PENDING' AND run_id <> $1`, sleeper.ID).Scan(&next); err != nil {
		t.Fatal(err)
	}
	if want := time.Now().Truncate(time.Hour).Add(time.Hour); !next.Equal(want) {
		t.Fatalf("the rest due %v, want the next hour %v", next, want)
	}
	got, err := e.s.RunsGet(e.ctx, "ns", sleeper.ID)
	if err != nil || got.AvailableAt == nil || !got.AvailableAt.Equal(wake.Truncate(time.Microsecond)) {
		t.Fatalf("the run due in an hour is due %v (%v), want %v", got.AvailableAt, err, wake)
	}
}

// A rate key without a limit, and keys on the plain path, claim as usual;
// the plain statement stays the claim when nothing has a key.
func TestFlowClaimWithoutLimitsClaimsEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.create(store.RunsCreateParams{Type: "T", RateLimitKey: "free", ConcurrencyKey: "c"})
		e.create(store.RunsCreateParams{Type: "T"})
	}
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 100, Lease: time.Minute}); len(got) != 10 {
		t.Fatalf("claimed %d of 10", len(got))
	}
	if _, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T",
		ConcurrencyKey: strings.Repeat("x", 256)}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("long key: %v", err)
	}
	e.create(store.RunsCreateParams{Type: "T"})
	plan, err := e.s.RunsClaimExplain(e.ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil || strings.Contains(plan, "claim_flow") || !strings.Contains(plan, "workflow_runs_claim_started_idx") {
		t.Fatalf("plain claim plan:\n%s\n%v", plan, err)
	}
}

// The flow claim's plan is its claim statement's, run after its pick in
// the explain's transaction (rolled back: the run stays claimable).
func TestFlowClaimExplain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, ctx := e.s, e.ctx
	if _, err := s.LimitsSetPerKey(ctx, "ns", "q", "T", 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ConcurrencyKey: "c"}); err != nil {
		t.Fatal(err)
	}
	p := store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(), Types: []store.TypeVersion{{Type: "T"}}, Limit: 5, Lease: time.Minute}
	plan, err := s.RunsClaimExplain(ctx, p)
	if err != nil || !strings.Contains(plan, "json_array_elements") || !strings.Contains(plan, "rows=1") {
		t.Fatalf("flow claim plan:\n%s\n%v", plan, err)
	}
	if got, err := s.RunsClaim(ctx, p); err != nil || len(got) != 1 {
		t.Fatalf("claim after the explain: %d %v", len(got), err)
	}
}
