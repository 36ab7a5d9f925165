package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// A run with a history of every kind of step attempt — completed, failed
// and retried later (with new retry options), failed for good, a wait in progress, earlier attempts
// of a previous run attempt — goes through the real dispatcher to a worker
// over NATS, and every field the worker needs arrives with the value
// Postgres holds. (Replay tests that build this state by hand cannot show
// that it survives the trip.)
func TestDeliveryCarriesTheWholeHistory(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1})
	ctx := context.Background()
	st := e.srv.Store
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "history", Type: "Hist", Version: "v7",
		Input: []byte(`{"in":1}`), RetryPolicy: &retry.Policy{MaxAttempts: 4, InitialInterval: time.Millisecond}, DeadlineAt: &deadline,
		TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	if err != nil {
		t.Fatal(err)
	}
	fake := uuid.New()
	claim := func() store.ClaimedRun {
		t.Helper()
		cs, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "history", WorkerID: fake,
			Types: []store.TypeVersion{{Type: "Hist", Version: "v7"}}, Limit: 1, Lease: time.Minute})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %v %d", err, len(cs))
		}
		return cs[0]
	}
	record := func(l store.Lease, p store.StepsRecordParams) {
		t.Helper()
		p.Lease = l
		if p.Kind == "" {
			p.Kind = store.StepFunction
		}
		if err := st.StepsRecord(ctx, p); err != nil {
			t.Fatalf("record %s#%d: %v", p.StepID, p.Attempt, err)
		}
	}
	// Run attempt 1: a step fails once; the run attempt fails and is retried.
	c := claim()
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: c.LeaseToken}
	record(l, store.StepsRecordParams{StepID: "old", Attempt: 1, Status: store.StepFailed, Error: "first", ErrorType: "Boom"})
	if _, err := st.RunsFailAttempt(ctx, l, "attempt failed", "Boom", false); err != nil {
		t.Fatal(err)
	}
	// Run attempt 2 (due a millisecond later): every other kind of
	// attempt, then a sleep that is due at once.
	time.Sleep(5 * time.Millisecond)
	c = claim()
	l.Token = c.LeaseToken
	retryAt := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	waitUntil := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Microsecond)
	record(l, store.StepsRecordParams{StepID: "done", Attempt: 1, Status: store.StepCompleted, Output: []byte(`{"v":42}`)})
	record(l, store.StepsRecordParams{StepID: "flaky", Attempt: 1, Status: store.StepFailed, Error: "e1", ErrorType: "Net", RetryAt: &retryAt})
	record(l, store.StepsRecordParams{StepID: "flaky", Attempt: 2, Status: store.StepFailed, Error: "e2", ErrorType: "Net", RetryAt: &retryAt})
	record(l, store.StepsRecordParams{StepID: "final", Attempt: 1, Status: store.StepFailed, Error: "no", ErrorType: "Declined"})
	record(l, store.StepsRecordParams{StepID: "event:go", Attempt: 1, Kind: store.StepEvent, Status: store.StepPending,
		Input: []byte("go"), RetryAt: &waitUntil})
	due := time.Now()
	if err := st.RunsSleep(ctx, l, &due); err != nil {
		t.Fatal(err)
	}
	// The backing-off step is given new retry options.
	override := &retry.Policy{MaxAttempts: 9, InitialIntervalMS: 5}
	if _, err := st.RunsRetryStepNow(ctx, "default", run.ID, &retry.Policy{MaxAttempts: 9, InitialInterval: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	// A worker asks the real dispatcher for it.
	d := askForWork(t, e.nc, "history", protocol.TypeVersion{Type: "Hist", Version: "v7"})
	if len(d.Runs) != 1 {
		t.Fatalf("%d runs delivered", len(d.Runs))
	}
	got := d.Runs[0]

	// What Postgres holds, read independently of the claim.
	now, err := st.RunsGet(ctx, "default", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.DeliveredRun{RunID: run.ID, Namespace: "default", Queue: "history", Type: "Hist", Version: "v7",
		Attempt: now.Attempts, LeaseToken: now.LeaseToken, Input: json.RawMessage(`{"in": 1}`),
		TraceParent: run.TraceContext, DeadlineAt: &deadline, RetryPolicy: now.RetryPolicy, AvailableAt: got.AvailableAt,
		// No event was sent to the run: its event count is 0.
		EventSeq: new(int64)}
	if now.Attempts != 2 {
		t.Fatalf("run attempts %d, want 2", now.Attempts)
	}
	all, err := st.StepsList(ctx, "default", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	tries := map[string]int{}
	for _, s := range all {
		if s.RunAttempt > 0 {
			tries[fmt.Sprintf("%s@%d", s.StepID, s.RunAttempt)]++
		}
	}
	for _, s := range all {
		if !s.IsLatest {
			continue
		}
		ws := protocol.StepState{StepID: s.StepID, Status: string(s.Status), Attempt: s.Attempt, Error: s.Error,
			ErrorType: s.ErrorType, RetryAt: s.RetryAt, RunAttempt: s.RunAttempt}
		if len(s.Output) > 0 {
			ws.Output = s.Output
		}
		if s.Status == store.StepFailed {
			ws.Tries = tries[fmt.Sprintf("%s@%d", s.StepID, s.RunAttempt)]
		}
		if s.StepID == "flaky" {
			ws.RetryOverride = override
		}
		want.Steps = append(want.Steps, ws)
	}
	// The claim delivers steps by id.
	sort.Slice(want.Steps, func(i, j int) bool { return want.Steps[i].StepID < want.Steps[j].StepID })
	if got.AvailableAt == nil {
		t.Fatal("the delivery does not say when the run became due")
	}
	// Compare as the worker decodes them (JSON), so time zones and raw
	// JSON spacing do not matter.
	norm := func(r protocol.DeliveredRun) map[string]any {
		b, _ := json.Marshal(r)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", "  ")
		wb, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("delivered\n%s\nwant\n%s", gb, wb)
	}
	// The cases that broke replay are all there.
	byID := map[string]protocol.StepState{}
	for _, s := range got.Steps {
		byID[s.StepID] = s
	}
	if s := byID["flaky"]; s.Tries != 2 || s.RetryAt == nil || s.RunAttempt != 2 || s.ErrorType != "Net" ||
		!reflect.DeepEqual(s.RetryOverride, override) {
		t.Fatalf("retried step arrived as %+v", s)
	}
	if s := byID["final"]; s.RetryAt != nil || s.ErrorType != "Declined" || s.RunAttempt != 2 {
		t.Fatalf("final failure arrived as %+v", s)
	}
	if s := byID["old"]; s.RunAttempt != 1 || s.Tries != 1 {
		t.Fatalf("failure of an earlier run attempt arrived as %+v", s)
	}
	if s := byID["event:go"]; s.Status != "PENDING" || s.RetryAt == nil {
		t.Fatalf("wait in progress arrived as %+v", s)
	}
}
