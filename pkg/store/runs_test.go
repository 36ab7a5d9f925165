package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// ---- helpers ---------------------------------------------------------------

// env is one test's database: a store and the pool under it (for direct
// SQL: setting up rows no repository makes yet, and reading raw rows).
type env struct {
	t    *testing.T
	ctx  context.Context
	s    *store.Store
	pool *pgxpool.Pool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, _ := testdb.Pool(t)
	return &env{t: t, ctx: t.Context(), s: store.New(pool, store.Options{}), pool: pool}
}

// with returns e for a subtest.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func (e *env) create(p store.RunsCreateParams) store.Run {
	e.t.Helper()
	if p.Namespace == "" {
		p.Namespace = "ns"
	}
	if p.Queue == "" {
		p.Queue = "q"
	}
	if p.Type == "" {
		p.Type = "T"
	}
	r, created, err := e.s.RunsCreate(e.ctx, p)
	if err != nil {
		e.t.Fatalf("create run: %v", err)
	}
	if !created {
		e.t.Fatalf("create run: created=false for %+v", p)
	}
	return r
}

func (e *env) get(ns string, id uuid.UUID) store.Run {
	e.t.Helper()
	r, err := e.s.RunsGet(e.ctx, ns, id)
	if err != nil {
		e.t.Fatalf("get run %s: %v", id, err)
	}
	return r
}

func claimParams(w uuid.UUID, limit int, types ...store.TypeVersion) store.RunsClaimParams {
	if len(types) == 0 {
		types = []store.TypeVersion{{Type: "T", Version: "v1"}}
	}
	return store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: w, Types: types, Limit: limit, Lease: time.Minute}
}

func (e *env) claim(p store.RunsClaimParams) []store.ClaimedRun {
	e.t.Helper()
	got, err := e.s.RunsClaim(e.ctx, p)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return got
}

// claimOne claims exactly one run and fails unless it is want (uuid.Nil: any).
func (e *env) claimOne(p store.RunsClaimParams, want uuid.UUID) store.ClaimedRun {
	e.t.Helper()
	p.Limit = 1
	got := e.claim(p)
	if len(got) != 1 {
		e.t.Fatalf("claim: got %d runs, want 1", len(got))
	}
	if want != uuid.Nil && got[0].ID != want {
		e.t.Fatalf("claim: got run %s, want %s", got[0].ID, want)
	}
	return got[0]
}

// hold persists a heartbeat of worker w listing runs, as the reaper does:
// the runs are known received (held), so a lost attempt of theirs counts.
// Its time is the epoch, so no lease is extended and nothing is released.
func (e *env) hold(w uuid.UUID, runs ...uuid.UUID) {
	e.t.Helper()
	ext, rel, err := e.s.RunsExtendLeases(e.ctx, []store.RunsExtendLeasesParams{{WorkerID: w, RunIDs: runs, Until: time.Unix(0, 0)}}, time.Hour)
	if err != nil || ext != int64(len(runs)) || rel != 0 {
		e.t.Fatalf("hold %d runs: extended %d, released %d, %v", len(runs), ext, rel, err)
	}
}

func leaseOf(c store.ClaimedRun) store.Lease {
	return store.Lease{Namespace: c.Namespace, RunID: c.ID, Token: c.LeaseToken}
}

// rawRow is the whole stored state of a run (its row, payloads included),
// for "nothing changed" comparisons.
func (e *env) rawRow(id uuid.UUID) string {
	e.t.Helper()
	var s string
	err := e.pool.QueryRow(e.ctx, `SELECT row_to_json(r)::text FROM kagzi.workflow_runs r WHERE r.run_id = $1`, id).Scan(&s)
	if err != nil {
		e.t.Fatalf("raw row %s: %v", id, err)
	}
	return s
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

func (e *env) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		e.t.Fatal(err)
	}
	return now
}

// insertTemplate inserts a schedule template row directly (the schedules
// repository is not this file's subject).
func (e *env) insertTemplate(ns, queue, typ string) uuid.UUID {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	e.exec(`INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, cron_expr, available_at)
VALUES ($1, $2, $3, $4, 'SCHEDULED', '* * * * *', now() - interval '1 minute')`, id, ns, queue, typ)
	return id
}

// insertFinished bulk-inserts n COMPLETED runs into ns/q.
func insertFinished(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, ns, queue string, n int) {
	tb.Helper()
	_, err := pool.Exec(ctx, `
INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, version, status, attempts,
	available_at, lease_token, created_at, started_at, finished_at)
SELECT gen_random_uuid(), $1, $2, 'T', 'v1', 'COMPLETED', 1, NULL, 1,
	now() - g * interval '1 second', now() - g * interval '1 second', now() - g * interval '1 second' + interval '10 milliseconds'
FROM generate_series(1, $3::int) g`, ns, queue, n)
	if err != nil {
		tb.Fatalf("insert finished runs: %v", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE kagzi.workflow_runs`); err != nil {
		tb.Fatalf("analyze: %v", err)
	}
}

func ids(runs []store.Run) []uuid.UUID {
	out := make([]uuid.UUID, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func sameSet(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	x := slices.Clone(a)
	y := slices.Clone(b)
	less := func(p, q uuid.UUID) int { return bytes.Compare(p[:], q[:]) }
	slices.SortFunc(x, less)
	slices.SortFunc(y, less)
	return slices.Equal(x, y)
}

func wantErr(t *testing.T, err, target error, contains ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not mention %q", err, c)
		}
	}
}

func within(t *testing.T, what string, got *time.Time, lo, hi time.Time) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s is nil, want within [%v, %v]", what, lo, hi)
	}
	if got.Before(lo) || got.After(hi) {
		t.Fatalf("%s = %v, want within [%v, %v]", what, *got, lo, hi)
	}
}

// ---- create ----------------------------------------------------------------

func TestRunsCreateDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.dbNow()
	r, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Input: []byte(`{"a":1}`)})
	after := e.dbNow()
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if r.ID == uuid.Nil || r.ID.Version() != 7 {
		t.Errorf("run id %s is not a UUID v7", r.ID)
	}
	if r.Namespace != "ns" || r.Queue != "q" || r.Type != "T" || r.Version != "" || r.ExternalID != "" {
		t.Errorf("identity: %+v", r)
	}
	if r.Status != store.StatusPending || r.Attempts != 0 || r.LeaseToken != 0 || r.LockedBy != nil ||
		r.LeaseExpiresAt != nil || r.Priority != 0 || r.Error != "" || r.StartedAt != nil || r.FinishedAt != nil ||
		r.DeadlineAt != nil || r.RetryPolicy != nil || r.ParentRunID != nil || r.ScheduleID != nil || r.CronExpr != "" {
		t.Errorf("defaults: %+v", r)
	}
	within(t, "available_at", r.AvailableAt, before.Add(-time.Millisecond), after)
	within(t, "created_at", &r.CreatedAt, before.Add(-time.Millisecond), after)
	if string(r.Input) != `{"a":1}` {
		t.Errorf("input %q", r.Input)
	}
	if p := r.Policy(); p.MaxAttempts != retry.DefaultMaxAttempts {
		t.Errorf("default policy %+v", p)
	}
	got := e.get("ns", r.ID)
	if string(got.Input) != `{"a":1}` || got.Output != nil || got.Status != store.StatusPending {
		t.Errorf("get after create: %+v", got)
	}

	// Every optional field is stored and returned.
	id := uuid.Must(uuid.NewV7())
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	dl := time.Now().Add(2 * time.Hour).Truncate(time.Microsecond)
	pol := retry.Policy{
		MaxAttempts:        3,
		InitialInterval:    2 * time.Second,
		BackoffCoefficient: 3,
		MaxInterval:        time.Minute,
		Jitter:             0.5,
		NonRetryable:       []string{"Bad"},
	}
	parent := r.ID
	full, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{
		RunID: id, Namespace: "ns", ExternalID: "ext-1", Queue: "q2", Type: "T2", Version: "v9",
		AvailableAt: &at, DeadlineAt: &dl, RetryPolicy: &pol, Priority: 7, ParentRunID: &parent, ParentStepID: "step-1",
		TraceContext: "00-abc-def-01",
	})
	if err != nil || !created {
		t.Fatalf("create full: %v %v", created, err)
	}
	got = e.get("ns", id)
	for _, r := range []store.Run{full, got} {
		if r.ID != id || r.ExternalID != "ext-1" || r.Queue != "q2" || r.Type != "T2" || r.Version != "v9" ||
			!r.AvailableAt.Equal(at) || !r.DeadlineAt.Equal(dl) || r.Priority != 7 || *r.ParentRunID != parent ||
			r.ParentStepID != "step-1" || r.TraceContext != "00-abc-def-01" || r.Input != nil {
			t.Errorf("full run: %+v", r)
		}
		want := pol.WithDefaults()
		if r.RetryPolicy == nil || r.RetryPolicy.MaxAttempts != 3 || r.RetryPolicy.InitialInterval != 2*time.Second ||
			r.RetryPolicy.BackoffCoefficient != 3 || r.RetryPolicy.MaxInterval != time.Minute || r.RetryPolicy.Jitter != 0.5 ||
			!slices.Equal(r.RetryPolicy.NonRetryable, want.NonRetryable) {
			t.Errorf("retry policy %+v, want %+v", r.RetryPolicy, want)
		}
	}
}

func TestRunsCreateValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := strings.Repeat("x", 201)
	fireAt := time.Now()
	tpl := uuid.New()
	cases := []struct {
		name  string
		p     store.RunsCreateParams
		field string
	}{
		{"empty namespace", store.RunsCreateParams{Queue: "q", Type: "T"}, "namespace"},
		{"empty queue", store.RunsCreateParams{Namespace: "ns", Type: "T"}, "queue"},
		{"empty type", store.RunsCreateParams{Namespace: "ns", Queue: "q"}, "workflow type"},
		{"namespace with space", store.RunsCreateParams{Namespace: "n s", Queue: "q", Type: "T"}, "namespace"},
		{"namespace with star", store.RunsCreateParams{Namespace: "ns*", Queue: "q", Type: "T"}, "namespace"},
		{"queue with >", store.RunsCreateParams{Namespace: "ns", Queue: "q>", Type: "T"}, "queue"},
		{"queue with tab", store.RunsCreateParams{Namespace: "ns", Queue: "q\t", Type: "T"}, "queue"},
		{"type with @", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T@v1"}, "workflow type"},
		{"type with newline", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T\n"}, "workflow type"},
		{"version with @", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Version: "v@1"}, "version"},
		{"namespace too long", store.RunsCreateParams{Namespace: long, Queue: "q", Type: "T"}, "namespace"},
		{"external id too long", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: long}, "external id"},
		{"schedule id without fire time", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ScheduleID: &tpl}, "schedule"},
		{"fire time without schedule id", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ScheduleFireAt: &fireAt}, "schedule"},
		{"bad retry policy", store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", RetryPolicy: &retry.Policy{Jitter: 2}}, "jitter"},
	}
	for _, c := range cases {
		_, created, err := e.s.RunsCreate(e.ctx, c.p)
		if created || !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: created=%v err=%v, want ErrInvalidArgument naming %q", c.name, created, err, c.field)
		}
		_, err = e.s.RunsCreateMany(e.ctx, []store.RunsCreateParams{{Namespace: "ns", Queue: "q", Type: "T"}, c.p})
		if c.p.ScheduleID == nil && (!errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "row 1")) {
			t.Errorf("%s (many): err=%v, want ErrInvalidArgument naming row 1", c.name, err)
		}
	}
	n, err := e.s.RunsCount(e.ctx, "ns")
	if err != nil || len(n) != 0 {
		t.Fatalf("invalid creates left rows: %v %v", n, err)
	}
}

func TestRunsCreateIdempotentExternalID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, created, err := e.s.RunsCreate(
		e.ctx,
		store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "order-1", Input: []byte("first")},
	)
	if err != nil || !created {
		t.Fatalf("first create: %v %v", created, err)
	}
	second, created, err := e.s.RunsCreate(
		e.ctx,
		store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "order-1", Input: []byte("second")},
	)
	if err != nil {
		t.Fatalf("second create: %v", err)
	}
	if created || second.ID != first.ID || string(second.Input) != "first" || second.Status != store.StatusPending {
		t.Fatalf("second create: created=%v run=%+v, want the first run %s", created, second, first.ID)
	}
	// The same external id in another namespace is another run.
	other, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns2", Queue: "q", Type: "T", ExternalID: "order-1"})
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("other namespace: created=%v id=%s err=%v", created, other.ID, err)
	}
	// Still a duplicate while running.
	c := e.claimOne(claimParams(uuid.New(), 1), first.ID)
	dup, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "order-1"})
	if err != nil || created || dup.ID != first.ID || dup.Status != store.StatusRunning {
		t.Fatalf("while running: created=%v run=%+v err=%v", created, dup, err)
	}
	if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("done")); err != nil {
		t.Fatal(err)
	}
	// Once the first finished, the external id starts a new run.
	third, created, err := e.s.RunsCreate(
		e.ctx,
		store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "order-1", Input: []byte("third")},
	)
	if err != nil || !created || third.ID == first.ID || string(third.Input) != "third" {
		t.Fatalf("after completion: created=%v run=%+v err=%v", created, third, err)
	}
	byExt, err := e.s.RunsGetByExternalID(e.ctx, "ns", "order-1")
	if err != nil || byExt.ID != third.ID {
		t.Fatalf("get by external id: %s %v, want the live run %s", byExt.ID, err, third.ID)
	}
	// Explicit run ids are idempotent too.
	id := uuid.Must(uuid.NewV7())
	a, created1, err1 := e.s.RunsCreate(e.ctx, store.RunsCreateParams{RunID: id, Namespace: "ns", Queue: "q", Type: "T"})
	b, created2, err2 := e.s.RunsCreate(e.ctx, store.RunsCreateParams{RunID: id, Namespace: "ns", Queue: "q", Type: "T"})
	if err1 != nil || err2 != nil || !created1 || created2 || a.ID != id || b.ID != id {
		t.Fatalf("explicit run id: %v %v %v %v", created1, created2, err1, err2)
	}
}

func TestRunsCreateFiredScheduleDedup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := e.insertTemplate("ns", "q", "T")
	fire := time.Now().Truncate(time.Minute)
	p := store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ScheduleID: &tpl, ScheduleFireAt: &fire}
	a, created, err := e.s.RunsCreate(e.ctx, p)
	if err != nil || !created || *a.ScheduleID != tpl || !a.ScheduleFireAt.Equal(fire) {
		t.Fatalf("fire: %v %+v %v", created, a, err)
	}
	b, created, err := e.s.RunsCreate(e.ctx, p)
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("second fire of the same time: created=%v id=%s err=%v, want %s", created, b.ID, err, a.ID)
	}
	next := fire.Add(time.Minute)
	p.ScheduleFireAt = &next
	if _, created, err := e.s.RunsCreate(e.ctx, p); err != nil || !created {
		t.Fatalf("next fire time: %v %v", created, err)
	}
	if _, err := e.s.RunsCreateMany(e.ctx, []store.RunsCreateParams{p}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("create many of a fired instance: %v, want ErrInvalidArgument", err)
	}
}

func TestRunsCreateMany(t *testing.T) {
	t.Parallel()
	tally := stmtcount.NewTally()
	pool, err := store.ConnectTraced(t.Context(), testdb.New(t), tally)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool, store.Options{})
	e := &env{t: t, ctx: t.Context(), s: s, pool: pool}

	if res, err := s.RunsCreateMany(e.ctx, nil); err != nil || res != nil {
		t.Fatalf("empty batch: %v %v", res, err)
	}

	// A fresh batch is one statement, results in the order given.
	const n = 200
	pol := &retry.Policy{MaxAttempts: 2}
	ps := make([]store.RunsCreateParams, n)
	for i := range ps {
		ps[i] = store.RunsCreateParams{
			Namespace: "ns",
			Queue:     "q",
			Type:      fmt.Sprintf("T%d", i%3),
			Input:     []byte(fmt.Sprint("in-", i)),
			Priority:  i % 5,
		}
		if i%2 == 0 {
			ps[i].ExternalID = fmt.Sprint("ext-", i)
			ps[i].RetryPolicy = pol
		}
	}
	// The payload limits are read once per store, before its first check.
	if _, err := s.Limits(e.ctx); err != nil {
		t.Fatal(err)
	}
	before := tally.Snapshot()
	res, err := s.RunsCreateMany(e.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	// The insert travels with its planner setting, in its round trip.
	if stmts, settings := withoutPlannerSettings(statementsSince(tally, before)); len(stmts) != 1 || settings != 2 {
		t.Fatalf("a batch of %d new runs sent %v and %d planner settings, want one statement and 2", n, stmts, settings)
	}
	if len(res) != n {
		t.Fatalf("%d results for %d rows", len(res), n)
	}
	seen := map[uuid.UUID]bool{}
	for i, r := range res {
		if !r.Created || seen[r.RunID] {
			t.Fatalf("row %d: %+v", i, r)
		}
		seen[r.RunID] = true
		got, err := s.RunsGet(e.ctx, "ns", r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Input) != fmt.Sprint("in-", i) || got.Type != fmt.Sprintf("T%d", i%3) || got.Priority != i%5 ||
			got.Status != store.StatusPending || got.AvailableAt == nil {
			t.Fatalf("row %d is not in order: %+v", i, got)
		}
		if (i%2 == 0) != (got.RetryPolicy != nil) || (got.RetryPolicy != nil && got.RetryPolicy.MaxAttempts != 2) {
			t.Fatalf("row %d retry policy %+v", i, got.RetryPolicy)
		}
	}

	// Idempotent per external id: against live runs and inside the batch.
	live := res[0].RunID // ext-0
	batch := []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "new-a", Input: []byte("a1")},
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "ext-0", Input: []byte("dup-of-live")},
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "new-a", Input: []byte("a2")},
		{Namespace: "ns", Queue: "q", Type: "T", Input: []byte("plain")},
		{Namespace: "other", Queue: "q", Type: "T", ExternalID: "new-a"},
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "new-a"},
	}
	res, err = s.RunsCreateMany(e.ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created || res[1].Created || res[1].RunID != live || res[2].Created || res[2].RunID != res[0].RunID ||
		!res[3].Created || !res[4].Created || res[4].RunID == res[0].RunID || res[5].Created || res[5].RunID != res[0].RunID {
		t.Fatalf("idempotent batch: %+v (live ext-0 is %s)", res, live)
	}
	if got := e.get("ns", res[0].RunID); string(got.Input) != "a1" {
		t.Fatalf("in-batch duplicate overwrote the first: %q", got.Input)
	}
	if got := e.get("ns", live); string(got.Input) != "in-0" {
		t.Fatalf("duplicate of a live run overwrote it: %q", got.Input)
	}
	cnt, err := s.RunsCount(e.ctx, "ns")
	if err != nil || cnt[store.StatusPending] != n+2 {
		t.Fatalf("count after idempotent batch: %v %v, want %d", cnt, err, n+2)
	}
}

// ---- read ------------------------------------------------------------------

func TestRunsGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Input: []byte("in")})
	c := e.claimOne(claimParams(uuid.New(), 1), r.ID)
	if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("out")); err != nil {
		t.Fatal(err)
	}
	got := e.get("ns", r.ID)
	if string(got.Input) != "in" || string(got.Output) != "out" || got.Status != store.StatusCompleted ||
		got.FinishedAt == nil || got.StartedAt == nil || got.Version != "v1" || got.Attempts != 1 {
		t.Fatalf("get: %+v", got)
	}
	_, err := e.s.RunsGet(e.ctx, "ns", uuid.New())
	wantErr(t, err, store.ErrNotFound)
}

func TestRunsGetByExternalID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.s.RunsGetByExternalID(e.ctx, "ns", "x")
	wantErr(t, err, store.ErrNotFound)

	a := e.create(store.RunsCreateParams{ExternalID: "x"})
	if _, err := e.s.RunsCancel(e.ctx, "ns", a.ID); err != nil {
		t.Fatal(err)
	}
	b := e.create(store.RunsCreateParams{ExternalID: "x"})
	if _, err := e.s.RunsCancel(e.ctx, "ns", b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.RunsGetByExternalID(e.ctx, "ns", "x")
	if err != nil || got.ID != b.ID {
		t.Fatalf("newest finished: %s %v, want %s", got.ID, err, b.ID)
	}
	live := e.create(store.RunsCreateParams{ExternalID: "x"})
	// A finished run created later than the live one does not hide it.
	e.exec(`UPDATE kagzi.workflow_runs SET created_at = now() + interval '1 hour' WHERE run_id = $1`, b.ID)
	got, err = e.s.RunsGetByExternalID(e.ctx, "ns", "x")
	if err != nil || got.ID != live.ID {
		t.Fatalf("live run: %s %v, want %s", got.ID, err, live.ID)
	}
	_, err = e.s.RunsGetByExternalID(e.ctx, "other", "x")
	wantErr(t, err, store.ErrNotFound)
}

func TestRunsListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(store.RunsCreateParams{Type: "A", Queue: "q1"})
	b := e.create(store.RunsCreateParams{Type: "B", Queue: "q1"})
	c := e.create(store.RunsCreateParams{Type: "A", Queue: "q2", ParentRunID: &a.ID, ParentStepID: "child-1"})
	d := e.create(store.RunsCreateParams{Type: "A", Queue: "q1"})
	if _, err := e.s.RunsCancel(e.ctx, "ns", d.ID); err != nil {
		t.Fatal(err)
	}
	tpl := e.insertTemplate("ns", "q1", "A")
	fire := time.Now()
	f := e.create(store.RunsCreateParams{Type: "A", Queue: "q1", ScheduleID: &tpl, ScheduleFireAt: &fire})
	e.create(store.RunsCreateParams{Namespace: "elsewhere", Type: "A", Queue: "q1"})

	list := func(p store.RunsListParams) []uuid.UUID {
		t.Helper()
		p.Namespace = "ns"
		runs, next, err := e.s.RunsList(e.ctx, p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		if next != nil {
			t.Fatalf("list %+v: unexpected next page", p)
		}
		for i := 1; i < len(runs); i++ {
			x, y := runs[i-1], runs[i]
			if x.CreatedAt.Before(y.CreatedAt) || (x.CreatedAt.Equal(y.CreatedAt) && bytes.Compare(x.ID[:], y.ID[:]) < 0) {
				t.Fatalf("list %+v is not newest first", p)
			}
			if x.Input != nil || x.Output != nil {
				t.Fatalf("list returned payloads")
			}
		}
		return ids(runs)
	}
	check := func(name string, p store.RunsListParams, want ...uuid.UUID) {
		t.Helper()
		if got := list(p); !sameSet(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	check("default excludes templates", store.RunsListParams{}, a.ID, b.ID, c.ID, d.ID, f.ID)
	check("status", store.RunsListParams{Statuses: []store.RunStatus{store.StatusCancelled}}, d.ID)
	check("statuses", store.RunsListParams{Statuses: []store.RunStatus{store.StatusPending, store.StatusCancelled}}, a.ID, b.ID, c.ID, d.ID, f.ID)
	check("templates on request", store.RunsListParams{Statuses: []store.RunStatus{store.StatusScheduled}}, tpl)
	check("type", store.RunsListParams{Type: "A"}, a.ID, c.ID, d.ID, f.ID)
	check("queue", store.RunsListParams{Queue: "q2"}, c.ID)
	check("schedule", store.RunsListParams{ScheduleID: &tpl}, f.ID)
	check("parent", store.RunsListParams{ParentID: &a.ID}, c.ID)
	check("combined", store.RunsListParams{Type: "A", Queue: "q1", Statuses: []store.RunStatus{store.StatusPending}}, a.ID, f.ID)
	check("no match", store.RunsListParams{Type: "Z"})

	for _, p := range []store.RunsListParams{
		{Namespace: "ns", Limit: 1001},
		{Namespace: "ns", Statuses: []store.RunStatus{"BOGUS"}},
		{Namespace: ""},
	} {
		if _, _, err := e.s.RunsList(e.ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("list %+v: %v, want ErrInvalidArgument", p, err)
		}
	}
}

func TestRunsListPaginationWithConcurrentInserts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Several batches so some rows share created_at (one statement) and the
	// cursor has to break ties by run id.
	var pre []uuid.UUID
	for b := 0; b < 4; b++ {
		ps := make([]store.RunsCreateParams, 13)
		for i := range ps {
			ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
		}
		res, err := e.s.RunsCreateMany(e.ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			pre = append(pre, r.RunID)
		}
		pre = append(pre, e.create(store.RunsCreateParams{}).ID)
	}
	isPre := map[uuid.UUID]bool{}
	for _, id := range pre {
		isPre[id] = true
	}
	seen := map[uuid.UUID]int{}
	var after *store.Cursor
	pages := 0
	for {
		runs, next, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Limit: 5, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range runs {
			seen[r.ID]++
		}
		if next == nil {
			break
		}
		if len(runs) != 5 {
			t.Fatalf("page %d has %d rows", pages, len(runs))
		}
		// New runs arrive between pages, also with a token round trip.
		e.create(store.RunsCreateParams{})
		twice := []store.RunsCreateParams{{Namespace: "ns", Queue: "q", Type: "T"}, {Namespace: "ns", Queue: "q", Type: "T"}}
		if _, err := e.s.RunsCreateMany(e.ctx, twice); err != nil {
			t.Fatal(err)
		}
		c, err := store.ParseCursor(next.String())
		if err != nil {
			t.Fatal(err)
		}
		after = &c
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
	}
	for _, id := range pre {
		if seen[id] != 1 {
			t.Errorf("pre-existing run %s seen %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if !isPre[id] {
			t.Errorf("run %s inserted after the first page was listed (%d times)", id, n)
		}
	}
	if want := (len(pre) + 4) / 5; pages != want {
		t.Errorf("%d pages, want %d", pages, want)
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	c := store.Cursor{CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600)), ID: uuid.New()}
	got, err := store.ParseCursor(c.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || !got.CreatedAt.Equal(c.CreatedAt.Truncate(time.Microsecond)) {
		t.Fatalf("round trip: %+v, want %+v", got, c)
	}
	if strings.ContainsAny(c.String(), "/+= ") {
		t.Fatalf("token %q is not URL safe", c.String())
	}
	for _, tok := range []string{
		"", "!!!", "bm9wZQ", // "nope"
		"MTIzL25vdC1hLXV1aWQ", // "123/not-a-uuid"
		"YWJjLzAxOGY0ZjQyLTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMA", // "abc/<uuid>"
		c.String() + "!",
	} {
		if _, err := store.ParseCursor(tok); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("ParseCursor(%q): %v, want ErrInvalidArgument", tok, err)
		}
	}
}

func TestRunsCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	got, err := e.s.RunsCount(e.ctx, "ns")
	if err != nil || len(got) != 0 {
		t.Fatalf("empty count: %v %v", got, err)
	}
	for i := 0; i < 4; i++ {
		e.create(store.RunsCreateParams{})
	}
	c := e.claimOne(claimParams(uuid.New(), 1), uuid.Nil)
	if err := e.s.RunsFail(e.ctx, leaseOf(c), "boom"); err != nil {
		t.Fatal(err)
	}
	e.claimOne(claimParams(uuid.New(), 1), uuid.Nil)
	x := e.create(store.RunsCreateParams{})
	if _, err := e.s.RunsCancel(e.ctx, "ns", x.ID); err != nil {
		t.Fatal(err)
	}
	e.insertTemplate("ns", "q", "T")
	e.create(store.RunsCreateParams{Namespace: "other"})
	got, err = e.s.RunsCount(e.ctx, "ns")
	want := map[store.RunStatus]int64{
		store.StatusPending:   2,
		store.StatusRunning:   1,
		store.StatusFailed:    1,
		store.StatusCancelled: 1,
		store.StatusScheduled: 1,
	}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("count: %v %v, want %v", got, err, want)
	}
}

// ---- cancel ----------------------------------------------------------------

func TestRunsCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := uuid.New()
	pending := e.create(store.RunsCreateParams{})
	sleeping := e.create(store.RunsCreateParams{Priority: 3})
	running := e.create(store.RunsCreateParams{Priority: 2})
	handles := e.create(store.RunsCreateParams{Priority: 1})
	cs := e.claimOne(claimParams(w, 1), sleeping.ID)
	future := time.Now().Add(time.Hour)
	if err := e.s.RunsSleep(e.ctx, leaseOf(cs), &future); err != nil {
		t.Fatal(err)
	}
	cr := e.claimOne(claimParams(w, 1), running.ID)
	ch := e.claimOne(claimParams(w, 1), handles.ID)

	// A run that never started is cancelled at once.
	r, err := e.s.RunsCancel(e.ctx, "ns", pending.ID)
	if err != nil || r.Status != store.StatusCancelled || r.FinishedAt == nil || r.AvailableAt != nil || r.CancelRequestedAt == nil {
		t.Fatalf("cancelled unstarted run: %+v %v", r, err)
	}
	// A sleeping run is asked, and due at once so its workflow sees it.
	r, err = e.s.RunsCancel(e.ctx, "ns", sleeping.ID)
	if err != nil || r.Status != store.StatusSleeping || r.CancelRequestedAt == nil || r.AvailableAt == nil || r.AvailableAt.After(time.Now()) {
		t.Fatalf("asked a sleeping run: %+v %v", r, err)
	}
	// A running run is asked; its lease holds, and so does a second request.
	for range 2 {
		r, err = e.s.RunsCancel(e.ctx, "ns", running.ID)
		if err != nil || r.Status != store.StatusRunning || r.CancelRequestedAt == nil || r.LeaseToken != cr.LeaseToken {
			t.Fatalf("asked a running run: %+v %v", r, err)
		}
	}
	if _, err := e.s.RunsCancel(e.ctx, "ns", handles.ID); err != nil {
		t.Fatal(err)
	}
	// A workflow that returns an error after the request ends CANCELLED,
	// whatever attempts are left; one that returns a result completes.
	res, err := e.s.RunsFailAttempt(e.ctx, leaseOf(cr), "stopped: workflow: run cancelled", "errorString", false)
	if err != nil || res.Status != store.StatusCancelled {
		t.Fatalf("fail after the request: %+v %v", res, err)
	}
	if got := e.get("ns", running.ID); got.Status != store.StatusCancelled || got.FinishedAt == nil ||
		got.Error != "stopped: workflow: run cancelled" {
		t.Fatalf("run that stopped after the request: %+v", got)
	}
	if err := e.s.RunsComplete(e.ctx, leaseOf(ch), []byte(`"cleaned up"`)); err != nil {
		t.Fatal(err)
	}
	if got := e.get("ns", handles.ID); got.Status != store.StatusCompleted {
		t.Fatalf("run that completed after the request is %s", got.Status)
	}
	// A run delivered with the request has seen it: its suspensions (a
	// cleanup that sleeps) wait as they say.
	cs = e.claimOne(claimParams(w, 1), sleeping.ID)
	if cs.CancelRequestedAt == nil {
		t.Fatal("the claim does not say the run was asked to cancel")
	}
	if err := e.s.RunsSleep(e.ctx, leaseOf(cs), &future); err != nil {
		t.Fatal(err)
	}
	if got := e.get("ns", sleeping.ID); got.AvailableAt == nil || got.AvailableAt.Before(future.Add(-time.Second)) {
		t.Fatalf("a run delivered with the request was made due at %v, want %v", got.AvailableAt, future)
	}
	// One asked while it ran, which suspends without having been delivered
	// the request (the pushed notice may have been lost), is due at once.
	busy := e.create(store.RunsCreateParams{Priority: 9})
	cb := e.claimOne(claimParams(w, 1), busy.ID)
	if _, err := e.s.RunsCancel(e.ctx, "ns", busy.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsSleep(e.ctx, leaseOf(cb), &future); err != nil {
		t.Fatal(err)
	}
	if got := e.get("ns", busy.ID); got.AvailableAt == nil || got.AvailableAt.After(time.Now()) {
		t.Fatalf("a run asked while running slept until %v", got.AvailableAt)
	}

	// Finished runs conflict; unknown ones are not found.
	_, err = e.s.RunsCancel(e.ctx, "ns", pending.ID)
	wantErr(t, err, store.ErrConflict, "CANCELLED")
	_, err = e.s.RunsCancel(e.ctx, "ns", handles.ID)
	wantErr(t, err, store.ErrConflict, "COMPLETED")
	tpl := e.insertTemplate("ns", "q", "T")
	_, err = e.s.RunsCancel(e.ctx, "ns", tpl)
	wantErr(t, err, store.ErrConflict)
	_, err = e.s.RunsCancel(e.ctx, "ns", uuid.New())
	wantErr(t, err, store.ErrNotFound)
}

func TestRunsTerminate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := uuid.New()
	sleeping := e.create(store.RunsCreateParams{Priority: 2})
	running := e.create(store.RunsCreateParams{Priority: 1})
	pending := e.create(store.RunsCreateParams{})
	cs := e.claimOne(claimParams(w, 1), sleeping.ID)
	future := time.Now().Add(time.Hour)
	if err := e.s.RunsSleep(e.ctx, leaseOf(cs), &future); err != nil {
		t.Fatal(err)
	}
	cr := e.claimOne(claimParams(w, 1), running.ID)
	for _, id := range []uuid.UUID{pending.ID, sleeping.ID, running.ID} {
		r, err := e.s.RunsTerminate(e.ctx, "ns", id, "bad input")
		if err != nil {
			t.Fatalf("terminate %s: %v", id, err)
		}
		if r.Status != store.StatusCancelled || r.FinishedAt == nil || r.AvailableAt != nil || r.LeaseExpiresAt != nil ||
			r.Error != "terminated: bad input" {
			t.Fatalf("terminated run: %+v", r)
		}
	}
	// The running run keeps its holder (to be told) and its lease is void.
	if got := e.get("ns", running.ID); got.LockedBy == nil || *got.LockedBy != w {
		t.Fatalf("terminated running run lost locked_by: %+v", got.LockedBy)
	}
	before := e.rawRow(running.ID)
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(cr), []byte("late")), store.ErrLeaseLost)
	if e.rawRow(running.ID) != before {
		t.Fatal("late report changed a terminated run")
	}
	if got := e.claim(claimParams(w, 10)); len(got) != 0 {
		t.Fatalf("claimed a terminated run: %v", got)
	}
	_, err := e.s.RunsTerminate(e.ctx, "ns", running.ID, "")
	wantErr(t, err, store.ErrConflict, "CANCELLED")
	_, err = e.s.RunsTerminate(e.ctx, "ns", uuid.New(), "")
	wantErr(t, err, store.ErrNotFound)
}

// ---- namespaces and payloads -----------------------------------------------

func TestRunsNamespaceIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(store.RunsCreateParams{Namespace: "A", ExternalID: "x", Input: []byte("a")})
	before := e.rawRow(a.ID)

	_, err := e.s.RunsGet(e.ctx, "B", a.ID)
	wantErr(t, err, store.ErrNotFound)
	_, err = e.s.RunsGetByExternalID(e.ctx, "B", "x")
	wantErr(t, err, store.ErrNotFound)
	runs, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "B"})
	if err != nil || len(runs) != 0 {
		t.Fatalf("list in B: %v %v", runs, err)
	}
	cnt, err := e.s.RunsCount(e.ctx, "B")
	if err != nil || len(cnt) != 0 {
		t.Fatalf("count in B: %v %v", cnt, err)
	}
	_, err = e.s.RunsCancel(e.ctx, "B", a.ID)
	wantErr(t, err, store.ErrNotFound)
	pB := claimParams(uuid.New(), 10)
	pB.Namespace = "B"
	if got := e.claim(pB); len(got) != 0 {
		t.Fatalf("claim in B got %v", got)
	}
	if due, past, err := e.s.RunsNextDue(e.ctx, "B", "q"); err != nil || due != nil || past {
		t.Fatalf("next due in B: %v %v %v", due, past, err)
	}
	if e.rawRow(a.ID) != before {
		t.Fatal("namespace B changed a run of A")
	}
	// The same external id in B is a new run, not A's.
	b, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "B", Queue: "q", Type: "T", ExternalID: "x"})
	if err != nil || !created || b.ID == a.ID {
		t.Fatalf("create in B: %v %v", created, err)
	}
	// A lease report naming the wrong namespace does not touch the run.
	pA := claimParams(uuid.New(), 10)
	pA.Namespace = "A"
	c := e.claimOne(pA, a.ID)
	running := e.rawRow(a.ID)
	l := leaseOf(c)
	l.Namespace = "B"
	if err := e.s.RunsComplete(e.ctx, l, nil); err == nil {
		t.Fatal("complete under namespace B succeeded")
	}
	if e.rawRow(a.ID) != running {
		t.Fatal("a report in namespace B changed a run of A")
	}
}

func TestRunsPayloadLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := bytes.Repeat([]byte("x"), protocol.DefaultPayloadMaxBytes+1)
	_, created, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Input: big})
	if created {
		t.Fatal("created a run with an oversized input")
	}
	wantErr(t, err, store.ErrPayloadTooLarge, "input")
	_, err = e.s.RunsCreateMany(
		e.ctx,
		[]store.RunsCreateParams{{Namespace: "ns", Queue: "q", Type: "T"}, {Namespace: "ns", Queue: "q", Type: "T", Input: big}},
	)
	wantErr(t, err, store.ErrPayloadTooLarge, "row 1")
	// Exactly the limit is accepted.
	atLimit := e.create(store.RunsCreateParams{Input: big[:protocol.DefaultPayloadMaxBytes]})
	if got := e.get("ns", atLimit.ID); len(got.Input) != protocol.DefaultPayloadMaxBytes {
		t.Fatalf("stored input of %d bytes", len(got.Input))
	}
	// A claim returns an input that large by size; it is read in parts.
	c := e.claimOne(claimParams(uuid.New(), 1), atLimit.ID)
	if len(c.Input) != 0 || c.InputSize != protocol.DefaultPayloadMaxBytes {
		t.Fatalf("claimed %d input bytes, input size %d", len(c.Input), c.InputSize)
	}
	var read []byte
	for len(read) < c.InputSize {
		part, err := e.s.PayloadsRead(e.ctx, store.PayloadsReadParams{Lease: leaseOf(c), Offset: len(read), Length: 700 << 10})
		if err != nil || part.Total != c.InputSize || len(part.Data) == 0 {
			t.Fatalf("read input at %d: %d bytes of %d, %v", len(read), len(part.Data), part.Total, err)
		}
		read = append(read, part.Data...)
	}
	if !bytes.Equal(read, big[:protocol.DefaultPayloadMaxBytes]) {
		t.Fatal("the input read in parts differs from the one stored")
	}
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(c), big), store.ErrPayloadTooLarge, "output")
	if got := e.get("ns", atLimit.ID); got.Status != store.StatusRunning || got.Output != nil {
		t.Fatalf("rejected output changed the run: %s", got.Status)
	}
	if cnt, _ := e.s.RunsCount(e.ctx, "ns"); cnt[store.StatusPending]+cnt[store.StatusRunning] != 1 {
		t.Fatalf("rejected creates left rows: %v", cnt)
	}

	// A custom, smaller limit, and the large-payload hook.
	var mu sync.Mutex
	var calls []string
	s := withLimits(t, store.New(e.pool, store.Options{OnLargePayload: func(what string, size int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%s:%d", what, size))
	}}), 100, 1000)
	_, _, err = s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "small", Queue: "q", Type: "T", Input: make([]byte, 1001)})
	wantErr(t, err, store.ErrPayloadTooLarge, "1000")
	if _, _, err := s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "small", Queue: "q", Type: "T", Input: make([]byte, 100)}); err != nil {
		t.Fatal(err)
	}
	r, _, err := s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "small", Queue: "q", Type: "T", Input: make([]byte, 500), Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := claimParams(uuid.New(), 1)
	p.Namespace = "small"
	got, err := s.RunsClaim(e.ctx, p)
	if err != nil || len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("claim: %v %v", got, err)
	}
	wantErr(t, s.RunsComplete(e.ctx, leaseOf(got[0]), make([]byte, 1001)), store.ErrPayloadTooLarge)
	if err := s.RunsComplete(e.ctx, leaseOf(got[0]), make([]byte, 200)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"input:500", "output:200"}; !slices.Equal(calls, want) {
		t.Fatalf("OnLargePayload calls %v, want %v", calls, want)
	}
}

// ---- claim -----------------------------------------------------------------

func TestRunsClaimConcurrentNoDoubleClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const total = 5000
	ps := make([]store.RunsCreateParams, total)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Priority: i % 3}
	}
	if _, err := e.s.RunsCreateMany(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	const claimers = 8
	got := make([][]store.ClaimedRun, claimers)
	var wg sync.WaitGroup
	for g := 0; g < claimers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := claimParams(uuid.New(), 50)
			for {
				batch, err := e.s.RunsClaim(e.ctx, p)
				if err != nil {
					t.Errorf("claimer %d: %v", g, err)
					return
				}
				if len(batch) == 0 {
					return
				}
				if len(batch) > 50 {
					t.Errorf("claimer %d got %d runs with limit 50", g, len(batch))
				}
				got[g] = append(got[g], batch...)
			}
		}()
	}
	wg.Wait()
	byRun := map[uuid.UUID]uuid.UUID{}
	n := 0
	for g := range got {
		for _, c := range got[g] {
			n++
			if prev, dup := byRun[c.ID]; dup {
				t.Fatalf("run %s claimed twice (by %s and %s)", c.ID, prev, *c.LockedBy)
			}
			byRun[c.ID] = *c.LockedBy
			if c.Status != store.StatusRunning || c.LeaseToken != 1 || c.Attempts != 1 {
				t.Fatalf("claimed run %+v", c.Run)
			}
		}
	}
	if n != total || len(byRun) != total {
		t.Fatalf("claimed %d runs (%d distinct), want %d", n, len(byRun), total)
	}
	busy := 0
	for g := range got {
		if len(got[g]) > 0 {
			busy++
		}
	}
	t.Logf("%d of %d claimers got work", busy, claimers)
	cnt, err := e.s.RunsCount(e.ctx, "ns")
	if err != nil || cnt[store.StatusRunning] != total || len(cnt) != 1 {
		t.Fatalf("count after claiming: %v %v", cnt, err)
	}
}

func TestRunsClaimOrderAndFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := time.Now().Add(-time.Hour)
	at := func(d time.Duration) *time.Time { x := base.Add(d); return &x }
	r1 := e.create(store.RunsCreateParams{AvailableAt: at(time.Minute)})
	r2 := e.create(store.RunsCreateParams{AvailableAt: at(0)})
	r3 := e.create(store.RunsCreateParams{AvailableAt: at(2 * time.Minute), Priority: 5})
	r4 := e.create(store.RunsCreateParams{AvailableAt: at(3 * time.Minute), Priority: 5})
	r5 := e.create(store.RunsCreateParams{AvailableAt: at(-time.Minute), Priority: -1})
	future := time.Now().Add(time.Hour)
	rf := e.create(store.RunsCreateParams{AvailableAt: &future, Priority: 100})
	ro := e.create(store.RunsCreateParams{Type: "Other", Priority: 100})
	rq := e.create(store.RunsCreateParams{Queue: "q2", Priority: 100})
	e.insertTemplate("ns", "q", "T")

	w := uuid.New()
	p := claimParams(w, 1)
	before := e.dbNow()
	for _, want := range []store.Run{r3, r4, r2, r1, r5} {
		c := e.claimOne(p, want.ID)
		if c.Status != store.StatusRunning || *c.LockedBy != w || c.LeaseToken != 1 || c.Attempts != 1 ||
			c.AvailableAt != nil || c.StartedAt == nil || c.Version != "v1" {
			t.Fatalf("claimed run %+v", c.Run)
		}
		within(t, "lease expiry", c.LeaseExpiresAt, before.Add(time.Minute-time.Millisecond), e.dbNow().Add(time.Minute))
	}
	if got := e.claim(claimParams(w, 100)); len(got) != 0 {
		t.Fatalf("claimed a future, unregistered, other-queue or template run: %v", got[0].Run)
	}
	for _, id := range []uuid.UUID{rf.ID, ro.ID, rq.ID} {
		if got := e.get("ns", id); got.Status != store.StatusPending {
			t.Fatalf("run %s is %s", id, got.Status)
		}
	}
	// Registering the other type makes its run claimable; several types at once.
	got := e.claim(claimParams(w, 100, store.TypeVersion{Type: "T", Version: "v1"}, store.TypeVersion{Type: "Other", Version: "v1"}))
	if len(got) != 1 || got[0].ID != ro.ID {
		t.Fatalf("claim with Other registered: %v", got)
	}
	q2 := claimParams(w, 100)
	q2.Queue = "q2"
	if got := e.claim(q2); len(got) != 1 || got[0].ID != rq.ID {
		t.Fatalf("claim on q2: %v", got)
	}
}

// A run that has begun and is due again (after a sleep, a retry) is
// claimed before every run not yet started, however long those have
// waited; priority still comes first. The same with a concurrency limit
// on the type (the limited claim statement) and with a per-key limit
// (kagzi.claim_flow, for runs without a key). Runs with a rate key keep
// priority, then age.
func TestRunsClaimBegunBeforeBacklog(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"plain", "limited", "per-key", "rate"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t).with(t)
			queue := "begun-" + mode
			var err error
			switch mode {
			case "limited":
				_, err = e.s.LimitsSet(e.ctx, "ns", queue, "T", 100)
			case "per-key":
				_, err = e.s.LimitsSetPerKey(e.ctx, "ns", queue, "T", 100)
			case "rate":
				_, err = e.s.RateLimitsSet(e.ctx, "ns", "begun", 1000, time.Hour)
			}
			if err != nil {
				t.Fatal(err)
			}
			rateKey := ""
			if mode == "rate" {
				rateKey = "begun"
			}
			p := claimParams(uuid.New(), 1)
			p.Queue = queue
			base := time.Now().Add(-time.Hour)
			at := func(d time.Duration) *time.Time { x := base.Add(d); return &x }
			// Two runs begin first, and sleep or retry until now: due after
			// the whole backlog below.
			sleeper := e.create(store.RunsCreateParams{Queue: queue, AvailableAt: at(-2 * time.Minute), RateLimitKey: rateKey})
			retried := e.create(store.RunsCreateParams{Queue: queue, AvailableAt: at(-time.Minute), RateLimitKey: rateKey})
			cs := e.claimOne(p, sleeper.ID)
			cr := e.claimOne(p, retried.ID)
			var backlog []store.Run
			for i := range 20 {
				backlog = append(backlog, e.create(store.RunsCreateParams{Queue: queue, AvailableAt: at(time.Duration(i) * time.Second),
					RateLimitKey: rateKey}))
			}
			now := e.dbNow()
			wake := now.Add(-2 * time.Millisecond)
			if err := e.s.RunsSleep(e.ctx, store.Lease{Namespace: "ns", RunID: sleeper.ID, Token: cs.LeaseToken}, &wake); err != nil {
				t.Fatal(err)
			}
			if err := e.s.RunsRetryAt(e.ctx, store.Lease{Namespace: "ns", RunID: retried.ID, Token: cr.LeaseToken}, now.Add(-time.Millisecond), "boom"); err != nil {
				t.Fatal(err)
			}
			urgent := e.create(store.RunsCreateParams{Queue: queue, AvailableAt: &now, Priority: 1, RateLimitKey: rateKey})
			want := append([]store.Run{urgent, sleeper, retried}, backlog...)
			if mode == "rate" {
				want = append(append([]store.Run{urgent}, backlog...), sleeper, retried)
			}
			for _, w := range want {
				e.claimOne(p, w.ID)
			}
			// In one claim, too: the claim's whole batch is in that order.
			for _, w := range want[1:] {
				if err := e.s.RunsRelease(e.ctx, store.Lease{Namespace: "ns", RunID: w.ID, Token: e.get("ns", w.ID).LeaseToken}); err != nil {
					t.Fatal(err)
				}
			}
			// The backlog, not started and due an hour before the others.
			ids := make([]uuid.UUID, len(backlog))
			for i, r := range backlog {
				ids[i] = r.ID
			}
			e.exec(`UPDATE kagzi.workflow_runs SET started_at = NULL, available_at = available_at - interval '1 hour'
				WHERE run_id = ANY($1)`, ids)
			p.Limit = 3
			got := e.claim(p)
			first := []uuid.UUID{sleeper.ID, retried.ID, backlog[0].ID}
			if mode == "rate" {
				first = []uuid.UUID{backlog[0].ID, backlog[1].ID, backlog[2].ID}
			}
			// Which runs one claim takes is the order's doing; the order
			// of the rows it returns is not promised.
			gotIDs := claimedIDs(got)
			slices.SortFunc(gotIDs, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
			slices.SortFunc(first, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
			if !slices.Equal(gotIDs, first) {
				t.Fatalf("claim of 3 after release: %v, want %v", gotIDs, first)
			}
		})
	}
}

func TestRunsClaimVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	unversioned := e.create(store.RunsCreateParams{Priority: 1})
	v1 := e.create(store.RunsCreateParams{Version: "v1"})
	v2 := func(w uuid.UUID) store.RunsClaimParams {
		return claimParams(w, 10, store.TypeVersion{Type: "T", Version: "v2"})
	}

	wa := uuid.New()
	got := e.claim(v2(wa))
	if len(got) != 1 || got[0].ID != unversioned.ID || got[0].Version != "v2" {
		t.Fatalf("v2 worker claimed %v, want only the unversioned run pinned to v2", got)
	}
	if r := e.get("ns", unversioned.ID); r.Version != "v2" {
		t.Fatalf("pinned version not stored: %q", r.Version)
	}
	if r := e.get("ns", v1.ID); r.Status != store.StatusPending {
		t.Fatalf("v1 run claimed by a v2-only worker: %s", r.Status)
	}
	if err := e.s.RunsRelease(e.ctx, leaseOf(got[0])); err != nil {
		t.Fatal(err)
	}
	// Once pinned to v2, a v3 worker cannot take it; neither can it take v1.
	if got := e.claim(claimParams(uuid.New(), 10, store.TypeVersion{Type: "T", Version: "v3"})); len(got) != 0 {
		t.Fatalf("v3 worker claimed %v", got[0].Run)
	}
	got = e.claim(claimParams(uuid.New(), 10, store.TypeVersion{Type: "T", Version: "v1"}))
	if len(got) != 1 || got[0].ID != v1.ID || got[0].Version != "v1" {
		t.Fatalf("v1 worker claimed %v, want the v1 run", got)
	}
	got = e.claim(v2(uuid.New()))
	if len(got) != 1 || got[0].ID != unversioned.ID || got[0].Version != "v2" || got[0].LeaseToken != 2 {
		t.Fatalf("v2 worker re-claimed %v", got)
	}
	// Each type is pinned to the version the claimer registered for it.
	a := e.create(store.RunsCreateParams{Type: "A"})
	b := e.create(store.RunsCreateParams{Type: "B"})
	got = e.claim(claimParams(uuid.New(), 10, store.TypeVersion{Type: "B", Version: "b7"}, store.TypeVersion{Type: "A", Version: "a3"}))
	if len(got) != 2 {
		t.Fatalf("claimed %d", len(got))
	}
	for _, c := range got {
		if (c.ID == a.ID && c.Version != "a3") || (c.ID == b.ID && c.Version != "b7") {
			t.Fatalf("run of type %s pinned to %q", c.Type, c.Version)
		}
	}
}

func TestRunsClaimReturnsSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Input: []byte("in"), Priority: 1})
	other := e.create(store.RunsCreateParams{})
	// The first attempt records its steps, then gives the runs back.
	first := e.claim(claimParams(uuid.New(), 2))
	if len(first) != 2 {
		t.Fatalf("claimed %d", len(first))
	}
	for _, c := range first {
		if c.Steps != nil {
			t.Fatalf("steps before any were recorded: %+v", c.Steps)
		}
		run, l := c.Run, leaseOf(c)
		steps := []store.StepsRecordParams{
			{StepID: "b-charge", Attempt: 1, Status: store.StepFailed, Error: "first try"},
			{StepID: "b-charge", Attempt: 2, Status: store.StepCompleted, Output: []byte(`"receipt"`)},
			{StepID: "a-fetch", Attempt: 1, Status: store.StepCompleted, Output: []byte(`{"n":1}`)},
			{StepID: "c-ship", Attempt: 1, Status: store.StepFailed, Error: "e1"},
			{StepID: "c-ship", Attempt: 2, Status: store.StepFailed, Error: "e2"},
		}
		if run.ID == other.ID {
			steps = []store.StepsRecordParams{{StepID: "x", Attempt: 1, Status: store.StepCompleted, Output: []byte("other")}}
		}
		for _, sp := range steps {
			sp.Lease, sp.Kind = l, store.StepFunction
			if err := e.s.StepsRecord(e.ctx, sp); err != nil {
				t.Fatalf("record step %s/%d: %v", sp.StepID, sp.Attempt, err)
			}
		}
		if err := e.s.RunsRelease(e.ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	got := e.claim(claimParams(uuid.New(), 1))
	if len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("claim: %v", got)
	}
	c := got[0]
	if string(c.Input) != "in" {
		t.Fatalf("input %q", c.Input)
	}
	want := []store.StepState{
		{StepID: "a-fetch", Status: store.StepCompleted, Attempt: 1, Output: []byte(`{"n":1}`)},
		{StepID: "b-charge", Status: store.StepCompleted, Attempt: 2, Output: []byte(`"receipt"`)},
		{StepID: "c-ship", Status: store.StepFailed, Attempt: 2, Error: "e2"},
	}
	if len(c.Steps) != len(want) {
		t.Fatalf("steps %+v, want %+v", c.Steps, want)
	}
	for i := range want {
		g, w := c.Steps[i], want[i]
		if g.StepID != w.StepID || g.Status != w.Status || g.Attempt != w.Attempt || !bytes.Equal(g.Output, w.Output) || g.Error != w.Error {
			t.Fatalf("step %d: %+v, want %+v", i, g, w)
		}
	}
	got = e.claim(claimParams(uuid.New(), 1))
	if len(got) != 1 || got[0].ID != other.ID || len(got[0].Steps) != 1 || string(got[0].Steps[0].Output) != "other" {
		t.Fatalf("other run's steps: %+v", got)
	}
	// A run without steps has none.
	e.create(store.RunsCreateParams{})
	if got := e.claim(claimParams(uuid.New(), 1)); len(got) != 1 || got[0].Steps != nil {
		t.Fatalf("run without steps: %+v", got)
	}
}

func TestRunsClaimValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(store.RunsCreateParams{})
	w := uuid.New()
	bad := []store.RunsClaimParams{
		{Namespace: "ns", Queue: "q", WorkerID: w, Types: []store.TypeVersion{{Type: "T"}}, Limit: 0, Lease: time.Minute},
		{Namespace: "ns", Queue: "q", WorkerID: w, Limit: 1, Lease: time.Minute},
		{Namespace: "ns", Queue: "q", WorkerID: w, Types: []store.TypeVersion{{Type: "T"}}, Limit: 1},
		{
			Namespace: "ns",
			Queue:     "q",
			WorkerID:  w,
			Types:     []store.TypeVersion{{Type: "T", Version: "1"}, {Type: "T", Version: "1"}},
			Limit:     1,
			Lease:     time.Minute,
		},
	}
	for _, p := range bad {
		if _, err := e.s.RunsClaim(e.ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("claim %+v: %v, want ErrInvalidArgument", p, err)
		}
		if _, err := e.s.RunsClaimExplain(e.ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("explain %+v: %v, want ErrInvalidArgument", p, err)
		}
	}
	if cnt, _ := e.s.RunsCount(e.ctx, "ns"); cnt[store.StatusPending] != 1 {
		t.Fatalf("invalid claims changed runs: %v", cnt)
	}
}

// TestRunsClaimPlanUsesPartialIndex guards the claim's plan: with finished
// runs in the table it must walk the claim index, never scan the table.
func TestRunsClaimPlanUsesPartialIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	insertFinished(e.ctx, t, e.pool, "ns", "q", 20000)
	ps := make([]store.RunsCreateParams, 300)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}
	}
	if _, err := e.s.RunsCreateMany(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	e.exec(`ANALYZE kagzi.workflow_runs`)
	plan, err := e.s.RunsClaimExplain(e.ctx, claimParams(uuid.New(), 100))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim plan:\n%s", plan)
	checkClaimPlan(t, plan)
	if !regexp.MustCompile(`Update on workflow_runs\b[^\n]*\(actual [^)]*rows=100 `).MatchString(plan) {
		t.Errorf("the explained claim did not claim 100 runs")
	}
	// EXPLAIN ANALYZE ran the claim, and rolled it back.
	cnt, err := e.s.RunsCount(e.ctx, "ns")
	if err != nil || cnt[store.StatusPending] != 300 || cnt[store.StatusRunning] != 0 {
		t.Fatalf("explain left claimed runs: %v %v", cnt, err)
	}
}

var seqScanRuns = regexp.MustCompile(`Seq Scan on workflow_runs\b`)

func checkClaimPlan(tb testing.TB, plan string) {
	tb.Helper()
	if !strings.Contains(plan, "workflow_runs_claim_started_idx") {
		tb.Errorf("claim plan does not use workflow_runs_claim_started_idx:\n%s", plan)
	}
	if seqScanRuns.MatchString(plan) {
		tb.Errorf("claim plan scans workflow_runs sequentially:\n%s", plan)
	}
}

// ---- due times -------------------------------------------------------------

func TestRunsNextDueAndQueuesDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if due, past, err := e.s.RunsNextDue(e.ctx, "ns", "q"); err != nil || due != nil || past {
		t.Fatalf("empty next due: %v %v %v", due, past, err)
	}
	if qs, err := e.s.RunsQueuesDue(e.ctx); err != nil || len(qs) != 0 {
		t.Fatalf("empty queues due: %v %v", qs, err)
	}
	soon := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	later := soon.Add(time.Hour)
	past := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	e.create(store.RunsCreateParams{AvailableAt: &later})
	s1 := e.create(store.RunsCreateParams{AvailableAt: &soon})
	running := e.create(store.RunsCreateParams{AvailableAt: &past})
	c := e.claimOne(claimParams(uuid.New(), 1), running.ID)
	e.create(store.RunsCreateParams{Queue: "q2", AvailableAt: &later})
	e.create(store.RunsCreateParams{Namespace: "ns2", AvailableAt: &past})
	e.insertTemplate("ns", "q3", "T")

	due, pastDue, err := e.s.RunsNextDue(e.ctx, "ns", "q")
	if err != nil || due == nil || !due.Equal(soon) || pastDue {
		t.Fatalf("next due: %v %v %v, want %v", due, pastDue, err, soon)
	}
	// A sleeping run with a wake-up time counts; one without does not.
	wake := soon.Add(-time.Minute)
	if err := e.s.RunsSleep(e.ctx, leaseOf(c), &wake); err != nil {
		t.Fatal(err)
	}
	if due, _, _ := e.s.RunsNextDue(e.ctx, "ns", "q"); due == nil || !due.Equal(wake) {
		t.Fatalf("next due with a sleeper: %v, want %v", due, wake)
	}
	if _, err := e.s.RunsCancel(e.ctx, "ns", s1.ID); err != nil {
		t.Fatal(err)
	}
	if due, _, _ := e.s.RunsNextDue(e.ctx, "ns", "q"); due == nil || !due.Equal(wake) {
		t.Fatalf("next due after cancel: %v", due)
	}
	qs, err := e.s.RunsQueuesDue(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Namespace+"/"+qs[i].Queue < qs[j].Namespace+"/"+qs[j].Queue })
	want := []store.QueueDue{
		{Namespace: "ns", Queue: "q", DueAt: wake},
		{Namespace: "ns", Queue: "q2", DueAt: later},
		{Namespace: "ns2", Queue: "q", DueAt: past},
	}
	if len(qs) != len(want) {
		t.Fatalf("queues due %v, want %v", qs, want)
	}
	for i := range want {
		if qs[i].Namespace != want[i].Namespace || qs[i].Queue != want[i].Queue || !qs[i].DueAt.Equal(want[i].DueAt) {
			t.Fatalf("queues due %v, want %v", qs, want)
		}
	}
	// A run due already is reported apart from the next future due time.
	e.create(store.RunsCreateParams{Queue: "q4", AvailableAt: &past})
	e.create(store.RunsCreateParams{Queue: "q4", AvailableAt: &soon})
	if due, pastDue, _ := e.s.RunsNextDue(e.ctx, "ns", "q4"); due == nil || !due.Equal(soon) || !pastDue {
		t.Fatalf("next due with a past-due run: %v %v", due, pastDue)
	}
	// Priorities are read one by one: the earliest future time of any of
	// them is next, and a due run of any of them is past due.
	e.create(store.RunsCreateParams{Queue: "q5", AvailableAt: &later, Priority: 5})
	e.create(store.RunsCreateParams{Queue: "q5", AvailableAt: &soon, Priority: -2})
	if due, pastDue, _ := e.s.RunsNextDue(e.ctx, "ns", "q5"); due == nil || !due.Equal(soon) || pastDue {
		t.Fatalf("next due over priorities: %v %v, want %v", due, pastDue, soon)
	}
	e.create(store.RunsCreateParams{Queue: "q5", AvailableAt: &past, Priority: 1})
	e.create(store.RunsCreateParams{Queue: "q5", AvailableAt: &wake, Priority: 1})
	if due, pastDue, _ := e.s.RunsNextDue(e.ctx, "ns", "q5"); due == nil || !due.Equal(wake) || !pastDue {
		t.Fatalf("next due over priorities with a past-due run: %v %v, want %v", due, pastDue, wake)
	}
}

// ---- lease-guarded transitions ---------------------------------------------

func TestRunsLeaseTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := uuid.New()
	p := claimParams(w, 1)

	t.Run("complete", func(t *testing.T) {
		e := e.with(t)
		r := e.create(store.RunsCreateParams{Queue: "complete"})
		p := p
		p.Queue = "complete"
		c := e.claimOne(p, r.ID)
		if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("out")); err != nil {
			t.Fatal(err)
		}
		got := e.get("ns", r.ID)
		if got.Status != store.StatusCompleted || string(got.Output) != "out" || got.FinishedAt == nil ||
			got.LeaseExpiresAt != nil || got.Error != "" || got.LeaseToken != c.LeaseToken {
			t.Fatalf("completed run %+v", got)
		}
		row := e.rawRow(r.ID)
		if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("out")); err != nil {
			t.Fatalf("retried complete: %v", err)
		}
		if e.rawRow(r.ID) != row {
			t.Fatal("retried complete changed the run")
		}
		wantErr(t, e.s.RunsFail(e.ctx, leaseOf(c), "x"), store.ErrLeaseLost)
		wantErr(t, e.s.RunsRelease(e.ctx, leaseOf(c)), store.ErrLeaseLost)
		if e.rawRow(r.ID) != row {
			t.Fatal("a conflicting report changed a completed run")
		}
	})

	t.Run("fail", func(t *testing.T) {
		e := e.with(t)
		r := e.create(store.RunsCreateParams{Queue: "fail"})
		p := p
		p.Queue = "fail"
		c := e.claimOne(p, r.ID)
		long := strings.Repeat("e", 20000)
		if err := e.s.RunsFail(e.ctx, leaseOf(c), long); err != nil {
			t.Fatal(err)
		}
		got := e.get("ns", r.ID)
		if got.Status != store.StatusFailed || got.FinishedAt == nil || got.LeaseExpiresAt != nil ||
			len(got.Error) != 8<<10 || !strings.HasPrefix(long, got.Error) {
			t.Fatalf("failed run: status %s, error of %d bytes", got.Status, len(got.Error))
		}
		row := e.rawRow(r.ID)
		if err := e.s.RunsFail(e.ctx, leaseOf(c), long); err != nil {
			t.Fatalf("retried fail: %v", err)
		}
		wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(c), nil), store.ErrLeaseLost)
		if e.rawRow(r.ID) != row {
			t.Fatal("a later report changed a failed run")
		}
	})

	t.Run("sleep", func(t *testing.T) {
		e := e.with(t)
		r := e.create(store.RunsCreateParams{Queue: "sleep"})
		p := p
		p.Queue = "sleep"
		c := e.claimOne(p, r.ID)
		until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		if err := e.s.RunsSleep(e.ctx, leaseOf(c), &until); err != nil {
			t.Fatal(err)
		}
		got := e.get("ns", r.ID)
		if got.Status != store.StatusSleeping || !got.AvailableAt.Equal(until) || got.LockedBy != nil ||
			got.LeaseExpiresAt != nil || got.FinishedAt != nil || got.Attempts != 1 {
			t.Fatalf("sleeping run %+v", got)
		}
		row := e.rawRow(r.ID)
		if err := e.s.RunsSleep(e.ctx, leaseOf(c), &until); err != nil {
			t.Fatalf("retried sleep: %v", err)
		}
		if e.rawRow(r.ID) != row {
			t.Fatal("retried sleep changed the run")
		}
		if got := e.claim(p); len(got) != 0 {
			t.Fatal("claimed a sleeping run before its wake-up time")
		}
		// Woken (due in the past), it is claimed as the same attempt under a new lease.
		e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() - interval '1 second' WHERE run_id = $1`, r.ID)
		c2 := e.claimOne(p, r.ID)
		if c2.LeaseToken != c.LeaseToken+1 || c2.Attempts != 1 || c2.Status != store.StatusRunning {
			t.Fatalf("re-claimed sleeper %+v", c2.Run)
		}
		wantErr(t, e.s.RunsSleep(e.ctx, leaseOf(c), &until), store.ErrLeaseLost)
		// Sleep without a wake-up time: not due at all.
		if err := e.s.RunsSleep(e.ctx, leaseOf(c2), nil); err != nil {
			t.Fatal(err)
		}
		if got := e.get("ns", r.ID); got.Status != store.StatusSleeping || got.AvailableAt != nil {
			t.Fatalf("indefinite sleep %+v", got)
		}
		if due, _, _ := e.s.RunsNextDue(e.ctx, "ns", "sleep"); due != nil {
			t.Fatalf("an indefinite sleeper is due at %v", due)
		}
	})

	t.Run("retry", func(t *testing.T) {
		e := e.with(t)
		r := e.create(store.RunsCreateParams{Queue: "retry"})
		p := p
		p.Queue = "retry"
		c := e.claimOne(p, r.ID)
		at := time.Now().Add(time.Minute).Truncate(time.Microsecond)
		if err := e.s.RunsRetryAt(e.ctx, leaseOf(c), at, "flaky"); err != nil {
			t.Fatal(err)
		}
		got := e.get("ns", r.ID)
		if got.Status != store.StatusPending || got.Attempts != 2 || !got.AvailableAt.Equal(at) || got.Error != "flaky" ||
			got.LockedBy != nil || got.LeaseExpiresAt != nil || got.FinishedAt != nil {
			t.Fatalf("retried run %+v", got)
		}
		row := e.rawRow(r.ID)
		if err := e.s.RunsRetryAt(e.ctx, leaseOf(c), at, "flaky"); err != nil {
			t.Fatalf("retried retry report: %v", err)
		}
		if e.rawRow(r.ID) != row {
			t.Fatal("a retried retry report counted another attempt")
		}
		if got := e.claim(p); len(got) != 0 {
			t.Fatal("claimed a run before its retry time")
		}
		e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, r.ID)
		if c2 := e.claimOne(p, r.ID); c2.Attempts != 2 || c2.LeaseToken != 2 {
			t.Fatalf("second attempt %+v", c2.Run)
		}
	})

	t.Run("release", func(t *testing.T) {
		e := e.with(t)
		r := e.create(store.RunsCreateParams{Queue: "release"})
		p := p
		p.Queue = "release"
		c := e.claimOne(p, r.ID)
		before := e.dbNow()
		if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
			t.Fatal(err)
		}
		got := e.get("ns", r.ID)
		if got.Status != store.StatusPending || got.Attempts != 1 || got.LockedBy != nil || got.LeaseExpiresAt != nil {
			t.Fatalf("released run %+v", got)
		}
		within(t, "available_at", got.AvailableAt, before.Add(-time.Millisecond), e.dbNow())
		row := e.rawRow(r.ID)
		if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
			t.Fatalf("retried release: %v", err)
		}
		if e.rawRow(r.ID) != row {
			t.Fatal("retried release changed the run")
		}
		if c2 := e.claimOne(p, r.ID); c2.Attempts != 1 {
			t.Fatalf("a release counted an attempt: %d", c2.Attempts)
		}
	})

	t.Run("unknown run", func(t *testing.T) {
		e := e.with(t)
		l := store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}
		wantErr(t, e.s.RunsComplete(e.ctx, l, nil), store.ErrNotFound)
		wantErr(t, e.s.RunsFail(e.ctx, l, "x"), store.ErrNotFound)
		wantErr(t, e.s.RunsRelease(e.ctx, l), store.ErrNotFound)
	})
}

func TestRunsStaleLeaseTokenChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Input: []byte("in")})
	p := claimParams(uuid.New(), 1)
	first := e.claimOne(p, r.ID)
	if err := e.s.RunsRelease(e.ctx, leaseOf(first)); err != nil {
		t.Fatal(err)
	}
	second := e.claimOne(claimParams(uuid.New(), 1), r.ID)
	if second.LeaseToken == first.LeaseToken {
		t.Fatalf("re-claim kept lease token %d", first.LeaseToken)
	}
	stale := leaseOf(first)
	row := e.rawRow(r.ID)
	later := time.Now().Add(time.Hour)
	reports := map[string]func() error{
		"complete": func() error { return e.s.RunsComplete(e.ctx, stale, []byte("stale")) },
		"fail":     func() error { return e.s.RunsFail(e.ctx, stale, "stale") },
		"sleep":    func() error { return e.s.RunsSleep(e.ctx, stale, &later) },
		"retry":    func() error { return e.s.RunsRetryAt(e.ctx, stale, later, "stale") },
		"release":  func() error { return e.s.RunsRelease(e.ctx, stale) },
	}
	for name, report := range reports {
		err := report()
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s under a stale lease: %v, want ErrLeaseLost", name, err)
		}
		if got := e.rawRow(r.ID); got != row {
			t.Fatalf("%s under a stale lease changed the run:\nbefore %s\nafter  %s", name, row, got)
		}
	}
	// The current holder is unaffected.
	if err := e.s.RunsComplete(e.ctx, leaseOf(second), []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if got := e.get("ns", r.ID); got.Status != store.StatusCompleted || string(got.Output) != "ok" {
		t.Fatalf("current holder's completion: %+v", got)
	}
	// A stale report matching the run's new state is still not "retried":
	// it names another lease.
	row = e.rawRow(r.ID)
	wantErr(t, e.s.RunsComplete(e.ctx, stale, []byte("stale")), store.ErrLeaseLost)
	if e.rawRow(r.ID) != row {
		t.Fatal("a stale completion changed a completed run")
	}
}

// ---- recovery --------------------------------------------------------------

// backoffBounds is where a retry after failed attempt n may land, measured
// from the recovery statement's start and end.
func backoffBounds(p retry.Policy, attempt int, start, end time.Time) (time.Time, time.Time) {
	return start.Add(p.Delay(attempt, 0) - time.Millisecond), end.Add(p.Delay(attempt, 1) + time.Millisecond)
}

func TestRunsRecoverWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	once := &retry.Policy{MaxAttempts: 1}
	custom := &retry.Policy{MaxAttempts: 4, InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaxInterval: 15 * time.Second, Jitter: 0.1}
	a := e.create(store.RunsCreateParams{RetryPolicy: once, Priority: 3})
	b := e.create(store.RunsCreateParams{Priority: 2})
	c := e.create(store.RunsCreateParams{RetryPolicy: custom, Priority: 1})
	d := e.create(store.RunsCreateParams{})
	w, x := uuid.New(), uuid.New()
	if got := e.claim(claimParams(w, 3)); len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	e.claimOne(claimParams(x, 1), d.ID)
	e.hold(w, a.ID, b.ID, c.ID)
	e.hold(x, d.ID)
	dRow := e.rawRow(d.ID)

	start := e.dbNow()
	rec, err := e.s.RunsRecoverWorker(e.ctx, w)
	end := e.dbNow()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uuid.UUID]store.RecoveredRun{}
	for _, rr := range rec {
		byID[rr.RunID] = rr
		if rr.Namespace != "ns" || rr.Queue != "q" {
			t.Fatalf("recovered %+v", rr)
		}
	}
	if len(rec) != 3 || len(byID) != 3 {
		t.Fatalf("recovered %+v, want a, b, c", rec)
	}
	if rr := byID[a.ID]; rr.Status != store.StatusFailed || rr.AvailableAt != nil {
		t.Fatalf("exhausted run recovered as %+v", rr)
	}
	ga := e.get("ns", a.ID)
	if ga.Status != store.StatusFailed || ga.Attempts != 1 || ga.FinishedAt == nil || ga.LockedBy != nil ||
		ga.LeaseExpiresAt != nil || ga.AvailableAt != nil || !strings.Contains(ga.Error, w.String()) {
		t.Fatalf("exhausted run %+v", ga)
	}
	for _, tc := range []struct {
		run store.Run
		pol retry.Policy
	}{{b, retry.Default()}, {c, custom.WithDefaults()}} {
		rr := byID[tc.run.ID]
		lo, hi := backoffBounds(tc.pol, 1, start, end)
		if rr.Status != store.StatusPending {
			t.Fatalf("run with attempts left recovered as %+v", rr)
		}
		within(t, "recovered available_at", rr.AvailableAt, lo, hi)
		g := e.get("ns", tc.run.ID)
		if g.Status != store.StatusPending || g.Attempts != 2 || g.LockedBy != nil || g.LeaseExpiresAt != nil ||
			g.FinishedAt != nil || !g.AvailableAt.Equal(*rr.AvailableAt) || g.Error == "" {
			t.Fatalf("retried run %+v", g)
		}
	}
	if e.rawRow(d.ID) != dRow {
		t.Fatal("recovering worker w changed worker x's run")
	}
	// Nothing left to recover for w.
	if rec, err := e.s.RunsRecoverWorker(e.ctx, w); err != nil || len(rec) != 0 {
		t.Fatalf("second recovery: %v %v", rec, err)
	}
	// The next failure of c backs off further (capped at its max interval).
	// (b is pushed out of the way so that only c is due.)
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() + interval '1 hour' WHERE run_id = $1`, b.ID)
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, c.ID)
	cc := e.claimOne(claimParams(w, 1), c.ID)
	if cc.Attempts != 2 {
		t.Fatalf("second attempt claimed with attempts %d", cc.Attempts)
	}
	e.hold(w, c.ID)
	start = e.dbNow()
	rec, err = e.s.RunsRecoverWorker(e.ctx, w)
	end = e.dbNow()
	if err != nil || len(rec) != 1 || rec[0].RunID != c.ID || rec[0].Status != store.StatusPending {
		t.Fatalf("recover second attempt: %+v %v", rec, err)
	}
	lo, hi := backoffBounds(custom.WithDefaults(), 2, start, end)
	within(t, "second backoff", rec[0].AvailableAt, lo, hi)
	if lo.Sub(start) < 13*time.Second {
		t.Fatalf("bad test bounds %v", lo.Sub(start))
	}
	// The stale holder's late report is refused.
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(cc), nil), store.ErrLeaseLost)
}

// Runs their holder never received (no heartbeat listed them since the
// claim) are taken back without counting an attempt and are never failed as
// exhausted, in the same statement that counts the received ones; a claim
// forgets that an earlier holder had the run.
func TestRunsRecoverUndelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	once := &retry.Policy{MaxAttempts: 1}
	recvOnce := e.create(store.RunsCreateParams{RetryPolicy: once, Priority: 4})
	lostOnce := e.create(store.RunsCreateParams{RetryPolicy: once, Priority: 3})
	lostThird := e.create(store.RunsCreateParams{Priority: 2})
	recv := e.create(store.RunsCreateParams{Priority: 1})
	w := uuid.New()
	if got := e.claim(claimParams(w, 4)); len(got) != 4 {
		t.Fatalf("claimed %d", len(got))
	}
	e.exec(`UPDATE kagzi.workflow_runs SET attempts = 3, error = 'earlier attempt' WHERE run_id = $1`, lostThird.ID)
	e.hold(w, recvOnce.ID, recv.ID)

	start := e.dbNow()
	rec, err := e.s.RunsRecoverWorker(e.ctx, w)
	end := e.dbNow()
	if err != nil || len(rec) != 4 {
		t.Fatalf("recover: %+v %v", rec, err)
	}
	byID := map[uuid.UUID]store.RecoveredRun{}
	for _, rr := range rec {
		byID[rr.RunID] = rr
	}
	for _, c := range []struct {
		run         store.Run
		status      store.RunStatus
		attempts    int
		undelivered bool
		err         string
	}{
		{recvOnce, store.StatusFailed, 1, false, "worker " + w.String() + " lost"},
		{lostOnce, store.StatusPending, 1, true, ""},
		{lostThird, store.StatusPending, 3, true, "earlier attempt"},
		{recv, store.StatusPending, 2, false, "worker " + w.String() + " lost"},
	} {
		rr, g := byID[c.run.ID], e.get("ns", c.run.ID)
		if rr.Status != c.status || rr.Undelivered != c.undelivered || g.Status != c.status || g.Attempts != c.attempts ||
			g.Error != c.err || g.LockedBy != nil || g.LeaseExpiresAt != nil {
			t.Fatalf("run %s recovered as %+v: %s attempts %d error %q; want %s, attempts %d, undelivered %v, error %q",
				c.run.ID, rr, g.Status, g.Attempts, g.Error, c.status, c.attempts, c.undelivered, c.err)
		}
		if c.undelivered {
			// Claimable at once, not after a backoff.
			within(t, "undelivered run due", g.AvailableAt, start.Add(-time.Millisecond), end.Add(time.Millisecond))
		}
	}
	if g := e.get("ns", recv.ID); !g.AvailableAt.After(end) {
		t.Fatalf("received run retried at %v, want after a backoff", g.AvailableAt)
	}

	// Claimed again and lost again before delivery, by lease expiry: still
	// its first attempt. Then received, and lost: exhausted.
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() + interval '1 hour' WHERE run_id IN ($1, $2)`, lostThird.ID, recv.ID)
	x := uuid.New()
	c1 := e.claimOne(claimParams(x, 1), lostOnce.ID)
	if c1.Attempts != 1 {
		t.Fatalf("claimed again with attempts %d", c1.Attempts)
	}
	rec, err = e.s.RunsExpireLeases(e.ctx, time.Now().Add(time.Hour))
	if err != nil || len(rec) != 1 || !rec[0].Undelivered || rec[0].Status != store.StatusPending {
		t.Fatalf("expire an undelivered lease: %+v %v", rec, err)
	}
	if g := e.get("ns", lostOnce.ID); g.Attempts != 1 || g.Status != store.StatusPending {
		t.Fatalf("after an expired undelivered lease: %s attempts %d", g.Status, g.Attempts)
	}
	c2 := e.claimOne(claimParams(x, 1), lostOnce.ID)
	e.hold(x, lostOnce.ID)
	// Released (a drain) and claimed again: the new claim is not held.
	if err := e.s.RunsRelease(e.ctx, leaseOf(c2)); err != nil {
		t.Fatal(err)
	}
	e.claimOne(claimParams(x, 1), lostOnce.ID)
	rec, err = e.s.RunsRecoverWorker(e.ctx, x)
	if err != nil || len(rec) != 1 || !rec[0].Undelivered {
		t.Fatalf("recover a run held under an earlier claim: %+v %v", rec, err)
	}
	e.claimOne(claimParams(x, 1), lostOnce.ID)
	e.hold(x, lostOnce.ID)
	rec, err = e.s.RunsExpireLeases(e.ctx, time.Now().Add(time.Hour))
	if err != nil || len(rec) != 1 || rec[0].Undelivered || rec[0].Status != store.StatusFailed {
		t.Fatalf("expire a received lease with no attempts left: %+v %v", rec, err)
	}
	if g := e.get("ns", lostOnce.ID); g.Attempts != 1 || g.Status != store.StatusFailed || g.Error != "lease expired" {
		t.Fatalf("exhausted: %s attempts %d error %q", g.Status, g.Attempts, g.Error)
	}

	// A run the caller knows the worker received (its last heartbeat,
	// which no flush marked) counts as received.
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, lostThird.ID)
	e.claimOne(claimParams(x, 1), lostThird.ID)
	rec, err = e.s.RunsRecoverWorker(e.ctx, x, lostThird.ID, uuid.New())
	if err != nil || len(rec) != 1 || rec[0].Undelivered || rec[0].Status != store.StatusPending {
		t.Fatalf("recover a run the caller heard listed: %+v %v", rec, err)
	}
	if g := e.get("ns", lostThird.ID); g.Attempts != 4 {
		t.Fatalf("a received run recovered with attempts %d, want 4", g.Attempts)
	}
}

func TestRunsExpireLeasesAndNextLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if next, err := e.s.RunsNextLeaseExpiry(e.ctx); err != nil || next != nil {
		t.Fatalf("next lease expiry with nothing running: %v %v", next, err)
	}
	short := e.create(store.RunsCreateParams{Priority: 2})
	long := e.create(store.RunsCreateParams{Priority: 1})
	once := e.create(store.RunsCreateParams{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	p := claimParams(uuid.New(), 1)
	cs := e.claimOne(p, short.ID)
	p.Lease = time.Hour
	cl := e.claimOne(p, long.ID)
	p.Lease = 2 * time.Minute
	co := e.claimOne(p, once.ID)
	e.hold(p.WorkerID, short.ID, long.ID, once.ID)

	next, err := e.s.RunsNextLeaseExpiry(e.ctx)
	if err != nil || next == nil || !next.Equal(*cs.LeaseExpiresAt) {
		t.Fatalf("next lease expiry %v %v, want %v", next, err, cs.LeaseExpiresAt)
	}
	if rec, err := e.s.RunsExpireLeases(e.ctx, time.Now()); err != nil || len(rec) != 0 {
		t.Fatalf("expired live leases: %v %v", rec, err)
	}
	// Exactly at the expiry counts as expired.
	start := e.dbNow()
	rec, err := e.s.RunsExpireLeases(e.ctx, *cs.LeaseExpiresAt)
	end := e.dbNow()
	if err != nil || len(rec) != 1 || rec[0].RunID != short.ID || rec[0].Status != store.StatusPending {
		t.Fatalf("expire at the first expiry: %+v %v", rec, err)
	}
	rec, err = e.s.RunsExpireLeases(e.ctx, time.Now().Add(10*time.Minute))
	if err != nil || len(rec) != 1 || rec[0].RunID != once.ID || rec[0].Status != store.StatusFailed || rec[0].AvailableAt != nil {
		t.Fatalf("expire in 10 minutes: %+v %v", rec, err)
	}
	if g := e.get("ns", once.ID); g.Status != store.StatusFailed || g.Error != "lease expired" || g.FinishedAt == nil {
		t.Fatalf("exhausted expired run %+v", g)
	}
	g := e.get("ns", short.ID)
	if g.Status != store.StatusPending || g.Attempts != 2 || g.LockedBy != nil || g.Error != "lease expired" {
		t.Fatalf("expired run %+v", g)
	}
	lo, hi := backoffBounds(retry.Default(), 1, start, end)
	within(t, "retry of expired run", g.AvailableAt, lo, hi)
	if g := e.get("ns", long.ID); g.Status != store.StatusRunning {
		t.Fatalf("unexpired lease taken back: %s", g.Status)
	}
	next, err = e.s.RunsNextLeaseExpiry(e.ctx)
	if err != nil || next == nil || !next.Equal(*cl.LeaseExpiresAt) {
		t.Fatalf("next lease expiry %v %v, want %v", next, err, cl.LeaseExpiresAt)
	}
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(cs), nil), store.ErrLeaseLost)
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(co), nil), store.ErrLeaseLost)
}

// TestRunsLeasesOfSeveralWorkers: the next expiry and the expired leases
// are read holder by holder (a loose scan of the lease index), so the
// earliest lease of any holder counts, and every holder's expired runs are
// taken back and only those.
func TestRunsLeasesOfSeveralWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	w2 := uuid.MustParse("00000000-0000-0000-0000-000000000002")
	w3 := uuid.MustParse("00000000-0000-0000-0000-000000000003")
	claim := func(w uuid.UUID, lease time.Duration) store.ClaimedRun {
		r := e.create(store.RunsCreateParams{})
		p := claimParams(w, 1)
		p.Lease = lease
		c := e.claimOne(p, r.ID)
		e.hold(w, r.ID)
		return c
	}
	a := claim(w1, time.Hour)
	b := claim(w1, 3*time.Minute)
	c := claim(w2, 2*time.Minute)
	d := claim(w2, 2*time.Hour)
	f := claim(w3, 30*time.Minute)
	next, err := e.s.RunsNextLeaseExpiry(e.ctx)
	if err != nil || next == nil || !next.Equal(*c.LeaseExpiresAt) {
		t.Fatalf("next lease expiry %v %v, want %v (the second holder's first)", next, err, c.LeaseExpiresAt)
	}
	rec, err := e.s.RunsExpireLeases(e.ctx, time.Now().Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]bool{}
	for _, r := range rec {
		got[r.RunID] = true
	}
	if len(rec) != 2 || !got[b.ID] || !got[c.ID] {
		t.Fatalf("expired %+v, want the runs %s and %s", rec, b.ID, c.ID)
	}
	for _, r := range []store.ClaimedRun{a, d, f} {
		if g := e.get("ns", r.ID); g.Status != store.StatusRunning {
			t.Fatalf("unexpired lease of %s taken back: %s", r.ID, g.Status)
		}
	}
	next, err = e.s.RunsNextLeaseExpiry(e.ctx)
	if err != nil || next == nil || !next.Equal(*f.LeaseExpiresAt) {
		t.Fatalf("next lease expiry %v %v, want %v (the third holder's)", next, err, f.LeaseExpiresAt)
	}
	// A running run has a holder: the walk of holders sees every lease.
	if _, err := e.pool.Exec(e.ctx, `UPDATE kagzi.workflow_runs SET locked_by = NULL WHERE run_id = $1`, a.ID); err == nil {
		t.Fatal("a running run without a holder was accepted")
	}
}

// TestRunsRecoverManyAttempts: a run that retries forever and has failed
// many times backs off by its max interval; computing its delay must not
// overflow and break the recovery of the whole batch.
func TestRunsRecoverManyAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	forever := &retry.Policy{MaxAttempts: -1, InitialInterval: time.Second, MaxInterval: 30 * time.Second, BackoffCoefficient: 10}
	a := e.create(store.RunsCreateParams{RetryPolicy: forever, Priority: 1})
	b := e.create(store.RunsCreateParams{})
	w := uuid.New()
	if got := e.claim(claimParams(w, 2)); len(got) != 2 {
		t.Fatalf("claimed %d", len(got))
	}
	e.hold(w, a.ID, b.ID)
	e.exec(`UPDATE kagzi.workflow_runs SET attempts = 5000 WHERE run_id = $1`, a.ID)
	start := e.dbNow()
	rec, err := e.s.RunsExpireLeases(e.ctx, time.Now().Add(time.Hour))
	end := e.dbNow()
	if err != nil || len(rec) != 2 {
		t.Fatalf("expire: %+v %v", rec, err)
	}
	ga := e.get("ns", a.ID)
	if ga.Status != store.StatusPending || ga.Attempts != 5001 {
		t.Fatalf("run retrying forever %+v", ga)
	}
	lo, hi := backoffBounds(forever.WithDefaults(), 5000, start, end)
	within(t, "capped backoff", ga.AvailableAt, lo, hi)
	if gb := e.get("ns", b.ID); gb.Status != store.StatusPending || gb.Attempts != 2 {
		t.Fatalf("other run of the batch %+v", gb)
	}
}

func TestRunsFailPastDeadlineAndNextDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if dl, err := e.s.RunsNextDeadline(e.ctx); err != nil || dl != nil {
		t.Fatalf("next deadline of nothing: %v %v", dl, err)
	}
	now := time.Now().Truncate(time.Microsecond)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	pending := e.create(store.RunsCreateParams{DeadlineAt: at(time.Hour)})
	sleeping := e.create(store.RunsCreateParams{DeadlineAt: at(2 * time.Hour), Priority: 10})
	running := e.create(store.RunsCreateParams{DeadlineAt: at(30 * time.Minute), Priority: 9})
	done := e.create(store.RunsCreateParams{DeadlineAt: at(10 * time.Minute), Priority: 8})
	later := e.create(store.RunsCreateParams{DeadlineAt: at(5 * time.Hour), Namespace: "other"})
	none := e.create(store.RunsCreateParams{})
	w := uuid.New()
	cs := e.claimOne(claimParams(w, 1), sleeping.ID)
	cr := e.claimOne(claimParams(w, 1), running.ID)
	cd := e.claimOne(claimParams(w, 1), done.ID)
	if err := e.s.RunsSleep(e.ctx, leaseOf(cs), at(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsComplete(e.ctx, leaseOf(cd), nil); err != nil {
		t.Fatal(err)
	}

	dl, err := e.s.RunsNextDeadline(e.ctx)
	if err != nil || dl == nil || !dl.Equal(*running.DeadlineAt) {
		t.Fatalf("next deadline %v %v, want %v", dl, err, running.DeadlineAt)
	}
	if runs, err := e.s.RunsFailPastDeadline(e.ctx, now); err != nil || len(runs) != 0 {
		t.Fatalf("failed runs before their deadline: %v %v", runs, err)
	}
	runs, err := e.s.RunsFailPastDeadline(e.ctx, now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !sameSet(ids(runs), []uuid.UUID{pending.ID, sleeping.ID, running.ID}) {
		t.Fatalf("failed %v, want pending, sleeping and running", ids(runs))
	}
	for _, r := range runs {
		if r.Status != store.StatusFailed || r.Error != store.DeadlineError || r.FinishedAt == nil || r.AvailableAt != nil ||
			r.LeaseExpiresAt != nil {
			t.Fatalf("run past deadline %+v", r)
		}
		if g := e.get("ns", r.ID); g.Status != store.StatusFailed || g.Error != store.DeadlineError {
			t.Fatalf("stored run past deadline %+v", g)
		}
	}
	if g := e.get("ns", done.ID); g.Status != store.StatusCompleted || g.Error != "" {
		t.Fatalf("a completed run past its deadline was touched: %+v", g)
	}
	if g := e.get("ns", none.ID); g.Status != store.StatusPending {
		t.Fatalf("a run without deadline was touched: %s", g.Status)
	}
	dl, err = e.s.RunsNextDeadline(e.ctx)
	if err != nil || dl == nil || !dl.Equal(*later.DeadlineAt) {
		t.Fatalf("next deadline %v %v, want %v", dl, err, later.DeadlineAt)
	}
	// The holder of the run that missed its deadline may no longer complete it.
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(cr), nil), store.ErrLeaseLost)
	if got := e.claim(claimParams(w, 10)); len(got) != 1 || got[0].ID != none.ID {
		t.Fatalf("claimable after deadlines: %v", got)
	}
}

func TestRunsExtendLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(store.RunsCreateParams{Priority: 4})
	b := e.create(store.RunsCreateParams{Priority: 3})
	c := e.create(store.RunsCreateParams{Priority: 2})
	d := e.create(store.RunsCreateParams{Priority: 1})
	w, x := uuid.New(), uuid.New()
	if got := e.claim(claimParams(w, 3)); len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	cd := e.claimOne(claimParams(x, 1), d.ID)
	const grace = 30 * time.Second

	if ext, rel, err := e.s.RunsExtendLeases(e.ctx, nil, grace); err != nil || ext != 0 || rel != 0 {
		t.Fatalf("no heartbeats: %d %d %v", ext, rel, err)
	}

	// A heartbeat sent now, listing a and b: c was delivered within the
	// grace period (maybe still in flight), so it is left alone.
	until := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	cRow := e.rawRow(c.ID)
	ext, rel, err := e.s.RunsExtendLeases(e.ctx, []store.RunsExtendLeasesParams{{WorkerID: w, RunIDs: []uuid.UUID{a.ID, b.ID}, Until: until}}, grace)
	if err != nil || ext != 2 || rel != 0 {
		t.Fatalf("heartbeat now: extended %d released %d err %v, want 2 0", ext, rel, err)
	}
	for _, id := range []uuid.UUID{a.ID, b.ID} {
		if g := e.get("ns", id); g.Status != store.StatusRunning || !g.LeaseExpiresAt.Equal(until) {
			t.Fatalf("extended lease %v, want %v", g.LeaseExpiresAt, until)
		}
	}
	if e.rawRow(c.ID) != cRow {
		t.Fatal("a run delivered within the grace period was touched")
	}

	// A lease is never shortened.
	ext, rel, err = e.s.RunsExtendLeases(
		e.ctx,
		[]store.RunsExtendLeasesParams{{WorkerID: w, RunIDs: []uuid.UUID{a.ID, b.ID, c.ID}, Until: until.Add(-time.Hour)}},
		grace,
	)
	if err != nil || ext != 3 || rel != 0 {
		t.Fatalf("earlier until: %d %d %v", ext, rel, err)
	}
	if g := e.get("ns", a.ID); !g.LeaseExpiresAt.Equal(until) {
		t.Fatalf("lease shortened to %v", g.LeaseExpiresAt)
	}

	// Five minutes later w lists only a (and x's d, which is not its own):
	// b and c were lost on the way and are released; d is left alone.
	dRow := e.rawRow(d.ID)
	until = time.Now().Add(6 * time.Minute).Truncate(time.Microsecond)
	before := e.dbNow()
	ext, rel, err = e.s.RunsExtendLeases(e.ctx, []store.RunsExtendLeasesParams{{WorkerID: w, RunIDs: []uuid.UUID{a.ID, d.ID}, Until: until}}, grace)
	if err != nil || ext != 1 || rel != 2 {
		t.Fatalf("later heartbeat: extended %d released %d err %v, want 1 2", ext, rel, err)
	}
	if g := e.get("ns", a.ID); g.Status != store.StatusRunning || !g.LeaseExpiresAt.Equal(until) || *g.LockedBy != w {
		t.Fatalf("a: %+v", g)
	}
	for _, id := range []uuid.UUID{b.ID, c.ID} {
		g := e.get("ns", id)
		if g.Status != store.StatusPending || g.LockedBy != nil || g.LeaseExpiresAt != nil || g.Attempts != 1 || g.LeaseToken != 1 {
			t.Fatalf("released run %+v", g)
		}
		within(t, "released available_at", g.AvailableAt, before.Add(-time.Millisecond), e.dbNow())
	}
	if e.rawRow(d.ID) != dRow {
		t.Fatal("w's heartbeat touched x's run")
	}

	// One statement for several workers: x no longer lists d, even though
	// w (wrongly) still does, so d is released; w's a is extended.
	until = until.Add(time.Minute)
	ext, rel, err = e.s.RunsExtendLeases(e.ctx, []store.RunsExtendLeasesParams{
		{WorkerID: w, RunIDs: []uuid.UUID{a.ID, d.ID}, Until: until},
		{WorkerID: x, Until: until},
	}, grace)
	if err != nil || ext != 1 || rel != 1 {
		t.Fatalf("two workers: extended %d released %d err %v, want 1 1", ext, rel, err)
	}
	if g := e.get("ns", d.ID); g.Status != store.StatusPending || g.LockedBy != nil {
		t.Fatalf("d: %+v", g)
	}
	wantErr(t, e.s.RunsComplete(e.ctx, leaseOf(cd), nil), store.ErrLeaseLost)
	// Released runs are claimable at once.
	if got := e.claim(claimParams(uuid.New(), 10)); !sameSet(claimedIDs(got), []uuid.UUID{b.ID, c.ID, d.ID}) {
		t.Fatalf("claimable after release: %v", claimedIDs(got))
	}
}

func claimedIDs(cs []store.ClaimedRun) []uuid.UUID {
	out := make([]uuid.UUID, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// ---- transactions ----------------------------------------------------------

func TestRunsCreateInCallerTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var id uuid.UUID
	sentinel := errors.New("roll back")
	err := e.s.InTx(e.ctx, func(tx *store.Store) error {
		r, _, err := tx.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "tx"})
		if err != nil {
			return err
		}
		id = r.ID
		if _, err := tx.RunsGet(e.ctx, "ns", id); err != nil {
			return err
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatal(err)
	}
	_, err = e.s.RunsGet(e.ctx, "ns", id)
	wantErr(t, err, store.ErrNotFound)
	err = e.s.InTx(e.ctx, func(tx *store.Store) error {
		_, _, err := tx.RunsCreate(e.ctx, store.RunsCreateParams{RunID: id, Namespace: "ns", Queue: "q", Type: "T", ExternalID: "tx"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.RunsGetByExternalID(e.ctx, "ns", "tx"); err != nil || got.ID != id {
		t.Fatalf("committed run: %v %v", got.ID, err)
	}
}

// A failed attempt is retried after its policy's backoff (package retry's
// Delay, jitter included) until its attempts are spent, and fails at once
// with an error type its policy lists as non-retryable.
func TestRunsFailAttemptBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := &retry.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaxInterval: 15 * time.Second,
		Jitter: 0.1, NonRetryable: []string{"Fatal"}}
	r := e.create(store.RunsCreateParams{RetryPolicy: pol})
	w := uuid.New()
	for attempt := 1; attempt <= 3; attempt++ {
		c := e.claimOne(claimParams(w, 1), r.ID)
		if c.Attempts != attempt || c.Epoch != attempt {
			t.Fatalf("attempt %d claimed with attempts %d, epoch %d", attempt, c.Attempts, c.Epoch)
		}
		start := e.dbNow()
		res, err := e.s.RunsFailAttempt(e.ctx, leaseOf(c), "boom", "Boom", false)
		end := e.dbNow()
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 3 {
			if res.Status != store.StatusFailed || res.AvailableAt != nil || res.Type != "T" {
				t.Fatalf("exhausted attempt: %+v", res)
			}
			break
		}
		lo, hi := backoffBounds(pol.WithDefaults(), attempt, start, end)
		if res.Status != store.StatusPending {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		within(t, "retry time", res.AvailableAt, lo, hi)
		// A repeated report finds the attempt already ended.
		again, err := e.s.RunsFailAttempt(e.ctx, leaseOf(c), "boom", "Boom", false)
		if err != nil || again.Status != store.StatusPending || !again.AvailableAt.Equal(*res.AvailableAt) || again.Type != "" {
			t.Fatalf("repeated report: %+v %v", again, err)
		}
		e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, r.ID)
	}

	f := e.create(store.RunsCreateParams{RetryPolicy: pol})
	c := e.claimOne(claimParams(w, 1), f.ID)
	if res, err := e.s.RunsFailAttempt(e.ctx, leaseOf(c), "bad", "Fatal", false); err != nil || res.Status != store.StatusFailed {
		t.Fatalf("non-retryable error type: %+v %v", res, err)
	}
	wantErr(t, func() error {
		_, err := e.s.RunsFailAttempt(e.ctx, store.Lease{Namespace: "ns", RunID: f.ID, Token: c.LeaseToken + 1}, "x", "", false)
		return err
	}(), store.ErrLeaseLost)
}

// A recovery moves only the runs that still qualify when it locks them and
// still show the attempts their backoff was computed for: a run that moved
// on after the recovery's pick read it is left alone.
func TestRunsRecoverWorkerSkipsMovedRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{})
	w, x := uuid.New(), uuid.New()
	c := e.claimOne(claimParams(w, 1), r.ID)
	e.hold(w, r.ID)
	row := e.rawRow(r.ID)
	if rec, err := e.s.RunsRecoverWorkerAsPicked(e.ctx, w, []uuid.UUID{r.ID}, []int32{int32(c.Attempts) + 1}); err != nil || len(rec) != 0 {
		t.Fatalf("recovery with other attempts: %+v %v", rec, err)
	}
	if e.rawRow(r.ID) != row {
		t.Fatal("a recovery computed for other attempts changed the run")
	}
	rec, err := e.s.RunsRecoverWorkerAsPicked(e.ctx, w, []uuid.UUID{r.ID}, []int32{int32(c.Attempts)})
	if err != nil || len(rec) != 1 || rec[0].Status != store.StatusPending || rec[0].Undelivered {
		t.Fatalf("recovery: %+v %v", rec, err)
	}
	// Taken by another worker since: not w's to recover.
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, r.ID)
	c = e.claimOne(claimParams(x, 1), r.ID)
	row = e.rawRow(r.ID)
	if rec, err := e.s.RunsRecoverWorkerAsPicked(e.ctx, w, []uuid.UUID{r.ID}, []int32{int32(c.Attempts)}); err != nil || len(rec) != 0 {
		t.Fatalf("recovery of a run another worker holds: %+v %v", rec, err)
	}
	if e.rawRow(r.ID) != row {
		t.Fatal("recovering w changed a run x holds")
	}
}
