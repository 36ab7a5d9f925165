package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// backOff records a failed attempt of step s of the claimed run, to be
// tried again in an hour, and suspends the run until then.
func (e *env) backOff(c store.ClaimedRun, attempt int) {
	e.t.Helper()
	at := time.Now().Add(time.Hour)
	if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: leaseOf(c), StepID: "s", Attempt: attempt, Kind: store.StepFunction,
		Status: store.StepFailed, Error: "down", RetryAt: &at}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.RunsSleep(e.ctx, leaseOf(c), &at); err != nil {
		e.t.Fatal(err)
	}
}

// New retry options given with RunsRetryStepNow are checked, kept with
// the step's latest failed attempt and delivered with it by the claim,
// merged over the earlier ones, and still delivered after later attempts.
func TestRunsRetryStepNowOverride(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Type: "R"})
	c := e.claimRun(r.ID, "R")
	e.backOff(c, 1)

	for _, bad := range []retry.Policy{
		{MaxAttempts: retry.MaxOverrideAttempts + 1},
		{MaxAttempts: -1},
		{InitialInterval: -time.Second},
		{InitialInterval: retry.MaxOverrideInterval + time.Hour},
		{MaxInterval: retry.MaxOverrideInterval + time.Hour},
		{InitialInterval: time.Minute, MaxInterval: time.Second},
		{BackoffCoefficient: 0.5},
		{BackoffCoefficient: retry.MaxOverrideBackoff * 2},
		{Jitter: 0.5},
		{NonRetryable: []string{"Fatal"}},
	} {
		if _, err := e.s.RunsRetryStepNow(e.ctx, "ns", r.ID, &bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("override %+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if got := e.claimAll("q", "R"); len(got) != 0 {
		t.Fatal("a refused override made the run due")
	}
	if _, err := e.s.RunsRetryStepNow(e.ctx, "ns", uuid.New(), &retry.Policy{MaxAttempts: 2}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}

	res, err := e.s.RunsRetryStepNow(e.ctx, "ns", r.ID, &retry.Policy{MaxAttempts: 5, InitialInterval: 10 * time.Millisecond})
	if err != nil || !reflect.DeepEqual(res.Steps, []string{"s"}) {
		t.Fatalf("retry with options: %+v %v", res, err)
	}
	c = e.claimRun(r.ID, "R")
	want := &retry.Policy{MaxAttempts: 5, InitialIntervalMS: 10}
	if s := stepOf(c, "s"); s == nil || s.Tries != 1 || !reflect.DeepEqual(s.RetryOverride, want) {
		t.Fatalf("delivered step %+v, want override %+v", s, want)
	}

	// A second override keeps the fields it does not set.
	e.backOff(c, 2)
	if _, err := e.s.RunsRetryStepNow(e.ctx, "ns", r.ID, &retry.Policy{BackoffCoefficient: 3}); err != nil {
		t.Fatal(err)
	}
	c = e.claimRun(r.ID, "R")
	want = &retry.Policy{MaxAttempts: 5, InitialIntervalMS: 10, BackoffCoefficient: 3}
	if s := stepOf(c, "s"); s == nil || s.Attempt != 2 || s.Tries != 2 || !reflect.DeepEqual(s.RetryOverride, want) {
		t.Fatalf("after a second override: %+v, want override %+v", s, want)
	}

	// Later attempts, and a retry without options, keep it.
	e.backOff(c, 3)
	if _, err := e.s.RunsRetryStepNow(e.ctx, "ns", r.ID, nil); err != nil {
		t.Fatal(err)
	}
	c = e.claimRun(r.ID, "R")
	if s := stepOf(c, "s"); s == nil || s.Attempt != 3 || s.Tries != 3 || !reflect.DeepEqual(s.RetryOverride, want) {
		t.Fatalf("after attempt 3: %+v, want override %+v", s, want)
	}

	// A step never given options is delivered without.
	r2 := e.create(store.RunsCreateParams{Type: "R"})
	c2 := e.claimRun(r2.ID, "R")
	e.backOff(c2, 1)
	if _, err := e.s.RunsRetryStepNow(e.ctx, "ns", r2.ID, &retry.Policy{}); err != nil {
		t.Fatal(err)
	}
	if s := stepOf(e.claimRun(r2.ID, "R"), "s"); s == nil || s.RetryOverride != nil {
		t.Fatalf("step without options: %+v", s)
	}
}
