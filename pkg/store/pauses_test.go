package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// claimAll claims every due run of the queue for types.
func (e *env) claimAll(queue string, types ...string) []store.ClaimedRun {
	e.t.Helper()
	tv := make([]store.TypeVersion, len(types))
	for i, t := range types {
		tv[i] = store.TypeVersion{Type: t}
	}
	return e.claim(store.RunsClaimParams{Namespace: "ns", Queue: queue, WorkerID: uuid.New(), Types: tv, Limit: 100, Lease: time.Minute})
}

// A paused run is not claimed, whatever makes it due meanwhile (an event,
// its wake time), says who paused it and why, and is claimed once
// resumed, with its attempts as they were. Pausing twice keeps the first
// pause; resuming twice makes one claim; a finished run is refused.
func TestRunsPauseHoldsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Type: "P"})
	c := e.claimRun(r.ID, "P")
	l := leaseOf(c)
	timeout := time.Now().Add(time.Hour)
	if _, err := e.s.EventsReceive(e.ctx, store.EventsReceiveParams{Lease: l, StepID: "w", Attempt: 1, Name: "go", Until: &timeout, Suspend: true}); err != nil {
		t.Fatal(err)
	}
	res, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{By: "ops", Reason: "incident 7"})
	if err != nil || !res.Paused || res.Status != store.StatusSleeping || res.Pause.By != "ops" || res.Pause.Reason != "incident 7" {
		t.Fatalf("pause: %+v %v", res, err)
	}
	again, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{By: "other", Reason: "x"})
	if err != nil || again.Paused || again.Pause.By != "ops" || !again.Pause.At.Equal(res.Pause.At) {
		t.Fatalf("pause again: %+v %v", again, err)
	}
	if ids := e.query("paused = true AND paused_by = 'ops'"); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("query paused = true: %v", ids)
	}
	if ids := e.query("paused = false"); len(ids) != 0 {
		t.Fatalf("query paused = false: %v", ids)
	}
	got, err := e.s.RunsGet(e.ctx, "ns", r.ID)
	if err != nil || got.Paused == nil || got.Paused.Reason != "incident 7" || got.AvailableAt != nil {
		t.Fatalf("paused run reads %+v %v", got, err)
	}
	w, ok, err := e.s.RunsWaiting(e.ctx, "ns", r.ID)
	if err != nil || !ok || w.Reason != store.WaitPaused || !strings.Contains(w.Detail, "by ops: incident 7") {
		t.Fatalf("waiting: %+v %v %v", w, ok, err)
	}
	// The event it waits for is stored and wakes it, but the wake waits.
	if ev := sendEvent(t, e.s, "ns", r.ID, "go", `1`); !ev.Woken {
		t.Fatalf("event: %+v", ev)
	}
	if got := e.claimAll("q", "P"); len(got) != 0 {
		t.Fatalf("a paused run was claimed: %d", len(got))
	}
	if st, at := runAvailableAt(t, e.s, "ns", r.ID); st != store.StatusSleeping || at != nil {
		t.Fatalf("paused run after the event: %s due %v", st, at)
	}
	// Resumed twice: one claim, due at the event's arrival.
	res1, err := e.s.RunsResume(e.ctx, "ns", r.ID)
	if err != nil || !res1.Resumed || res1.DueAt == nil || res1.DueAt.After(time.Now()) {
		t.Fatalf("resume: %+v %v", res1, err)
	}
	if res2, err := e.s.RunsResume(e.ctx, "ns", r.ID); err != nil || res2.Resumed {
		t.Fatalf("resume again: %+v %v", res2, err)
	}
	got2 := e.claimAll("q", "P")
	if len(got2) != 1 || got2[0].ID != r.ID || got2[0].Attempts != 1 || got2[0].Paused != nil {
		t.Fatalf("claim after resume: %+v", got2)
	}
	if err := e.complete1(store.RunsCompleteItem{Lease: leaseOf(got2[0]), Output: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	if ids := e.query("paused = true"); len(ids) != 0 {
		t.Fatalf("query paused = true after the resume: %v", ids)
	}
	if _, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{}); !errors.Is(err, store.ErrRunFinished) {
		t.Fatalf("pause of a finished run: want ErrRunFinished, got %v", err)
	}
	if _, err := e.s.RunsPause(e.ctx, "ns", uuid.New(), store.PauseOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pause of an unknown run: want ErrNotFound, got %v", err)
	}
	if _, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{Reason: strings.Repeat("x", store.MaxPauseReasonLen+1)}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("pause with a long reason: want ErrInvalidArgument, got %v", err)
	}
}

// A run paused while it runs records the step it is in; that report's
// answer is ErrLeaseLost (the lease is given back), and the run, due then,
// waits for its resume. A run paused in a retry backoff keeps its
// attempts and its retry time.
func TestRunsPauseRunningAndBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Type: "M"})
	c := e.claimRun(r.ID, "M")
	if _, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: leaseOf(c), StepID: "s1", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted, Output: []byte(`2`), StartedAt: &now})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("step of a paused running run: want ErrLeaseLost, got %v", err)
	}
	steps, _ := e.s.StepsList(e.ctx, "ns", r.ID)
	if len(steps) != 1 || steps[0].Status != store.StepCompleted {
		t.Fatalf("the step was not recorded: %+v", steps)
	}
	if got := e.claimAll("q", "M"); len(got) != 0 {
		t.Fatalf("a paused run was claimed: %d", len(got))
	}
	if _, err := e.s.RunsResume(e.ctx, "ns", r.ID); err != nil {
		t.Fatal(err)
	}
	c2 := e.claimRun(r.ID, "M")
	if c2.Attempts != 1 || len(c2.Steps) != 1 {
		t.Fatalf("claim after resume: attempts %d, %d steps", c2.Attempts, len(c2.Steps))
	}

	// Backing off before a retry of the run.
	at := time.Now().Add(300 * time.Millisecond)
	if err := e.s.RunsRetryAt(e.ctx, leaseOf(c2), at, "boom"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := e.s.RunsResume(e.ctx, "ns", r.ID)
	if err != nil || res.DueAt == nil || !res.DueAt.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("resume in a backoff: %+v %v (want due %v)", res, err, at)
	}
}

// A paused queue or type gets no claims; others do; resuming one lists
// the queues it wakes.
func TestPausesQueueAndType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create(store.RunsCreateParams{Type: "A"})
	b := e.create(store.RunsCreateParams{Type: "B"})
	o := e.create(store.RunsCreateParams{Type: "A", Queue: "other"})
	p, added, err := e.s.PausesAdd(e.ctx, "ns", store.PauseType, "A", store.PauseOptions{By: "ops", Reason: "deploy"})
	if err != nil || !added || p.By != "ops" {
		t.Fatalf("pause type: %+v %v %v", p, added, err)
	}
	if _, added, err := e.s.PausesAdd(e.ctx, "ns", store.PauseType, "A", store.PauseOptions{}); err != nil || added {
		t.Fatalf("pause type again: %v %v", added, err)
	}
	if w, _, _ := e.s.RunsWaiting(e.ctx, "ns", a.ID); w.Reason != store.WaitPaused || !strings.Contains(w.Detail, "type A by ops: deploy") {
		t.Fatalf("waiting of a paused type's run: %+v", w)
	}
	got := e.claimAll("q", "A", "B")
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("claim with type A paused: %+v", got)
	}
	if got := e.claimAll("other", "A"); len(got) != 0 {
		t.Fatalf("type A claimed on another queue: %d", len(got))
	}
	if _, _, err := e.s.PausesAdd(e.ctx, "ns", store.PauseQueue, "other", store.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := e.s.PausesList(e.ctx, "ns")
	if err != nil || len(list) != 2 || list[0].Kind != store.PauseQueue || list[1].Name != "A" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if n, err := e.s.PausesRemove(e.ctx, "ns", store.PauseType, "A"); err != nil || n != 2 {
		t.Fatalf("resume type: %d queues woken, %v", n, err)
	}
	if got := e.claimAll("other", "A"); len(got) != 0 {
		t.Fatalf("a paused queue was claimed: %d", len(got))
	}
	if got := e.claimAll("q", "A"); len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("claim after the type's resume: %+v", got)
	}
	if _, err := e.s.PausesRemove(e.ctx, "ns", store.PauseQueue, "other"); err != nil {
		t.Fatal(err)
	}
	if got := e.claimAll("other", "A"); len(got) != 1 || got[0].ID != o.ID {
		t.Fatalf("claim after the queue's resume: %+v", got)
	}
	if _, err := e.s.PausesRemove(e.ctx, "ns", store.PauseQueue, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resume of a queue not paused: want ErrNotFound, got %v", err)
	}
}

// Any statement that makes a paused run due leaves it held (here a
// release of its lease, as a dispatcher's stop does), and a paused run
// that ends is no longer paused.
func TestRunsPauseHoldsThroughOtherPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Type: "H"})
	c := e.claimRun(r.ID, "H")
	if _, err := e.s.RunsPause(e.ctx, "ns", r.ID, store.PauseOptions{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
		t.Fatal(err)
	}
	if st, at := runAvailableAt(t, e.s, "ns", r.ID); st != store.StatusPending || at != nil {
		t.Fatalf("a released paused run: %s due %v", st, at)
	}
	if got := e.claimAll("q", "H"); len(got) != 0 {
		t.Fatalf("a released paused run was claimed")
	}
	if _, err := e.s.RunsTerminate(e.ctx, "ns", r.ID, "done"); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.RunsGet(e.ctx, "ns", r.ID)
	if err != nil || got.Status != store.StatusCancelled || got.Paused != nil {
		t.Fatalf("a terminated paused run: %s, paused %+v (%v)", got.Status, got.Paused, err)
	}
	if n, err := e.s.RunsPausedCount(e.ctx); err != nil || n["ns"] != 0 {
		t.Fatalf("paused count: %v %v", n, err)
	}
}
