package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// RunsWaiting names what holds each waiting run, and until when.
func TestRunsWaitingSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	why := func(id uuid.UUID, want store.WaitReason, until bool, detail string) {
		t.Helper()
		w, ok, err := e.s.RunsWaiting(e.ctx, "ns", id)
		if err != nil || !ok {
			t.Fatalf("waiting: %v %v", ok, err)
		}
		if w.Reason != want || (w.Until != nil) != until || !strings.Contains(w.Detail, detail) {
			t.Fatalf("waiting: %+v, want %s (until: %v) saying %q", w, want, until, detail)
		}
	}
	// Due, and no worker serves it; then one does.
	due := e.create(store.RunsCreateParams{Type: "W"})
	why(due.ID, store.WaitNoWorker, false, "no live worker serves W on queue q")
	if _, err := e.s.WorkersRegister(e.ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "ns", Queue: "q",
		Types: []store.TypeVersion{{Type: "W"}, {Type: "K"}, {Type: "R"}}, MaxConcurrency: 10}); err != nil {
		t.Fatal(err)
	}
	why(due.ID, store.WaitDue, false, "1 live workers serving W")

	// Deferred, debounced.
	later := time.Now().Add(time.Hour)
	why(e.create(store.RunsCreateParams{Type: "W", AvailableAt: &later}).ID, store.WaitScheduled, true, "deferred")
	d, _ := e.mustStart(store.RunsCreateParams{Type: "W", Debounce: &store.Debounce{Key: "k", Window: time.Minute}})
	why(d.ID, store.WaitDebounced, true, "debounced")

	// Per-key limit full.
	if _, err := e.s.LimitsSetPerKey(e.ctx, "ns", "q", "K", 1); err != nil {
		t.Fatal(err)
	}
	a := e.create(store.RunsCreateParams{Type: "K", ConcurrencyKey: "cust-7"})
	b := e.create(store.RunsCreateParams{Type: "K", ConcurrencyKey: "cust-7"})
	e.claimRun(a.ID, "K")
	why(b.ID, store.WaitKeyLimit, false, "1 of the 1 runs concurrency key cust-7")

	// Held by a rate limit.
	if _, err := e.s.RateLimitsSet(e.ctx, "ns", "api", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	r1 := e.create(store.RunsCreateParams{Type: "R", RateLimitKey: "api"})
	r2 := e.create(store.RunsCreateParams{Type: "R", RateLimitKey: "api"})
	got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "R"}}, Limit: 10, Lease: time.Minute})
	if len(got) != 1 {
		t.Fatalf("claimed %d under 1 per hour", len(got))
	}
	held := r2.ID
	if got[0].ID == r2.ID {
		held = r1.ID
	}
	why(held, store.WaitRateLimited, true, "rate limit of key api")

	// Asleep in a step.
	sl := e.create(store.RunsCreateParams{Type: "W"})
	c := e.claimRun(sl.ID, "W")
	l := store.Lease{Namespace: "ns", RunID: sl.ID, Token: c.LeaseToken}
	now := time.Now()
	wake := now.Add(time.Minute)
	out, _ := wake.MarshalJSON()
	if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: l, StepID: "nap", Attempt: 1, Kind: store.StepSleep,
		Status: store.StepCompleted, Output: out, StartedAt: &now, FinishedAt: &now}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsSleep(e.ctx, l, &wake); err != nil {
		t.Fatal(err)
	}
	why(sl.ID, store.WaitSleeping, true, "sleeping (step nap)")

	// A running run does not wait.
	if _, ok, err := e.s.RunsWaiting(e.ctx, "ns", a.ID); ok || err != nil {
		t.Fatalf("a running run: %v %v", ok, err)
	}
}
