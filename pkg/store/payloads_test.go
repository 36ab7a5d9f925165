package store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// A claim returns outputs above its inline size by size only; the lease
// holder reads them in parts, and nobody else can.
func TestPayloadsRead(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	stale, l := reclaimedRun(t, s, "ns")
	big := bytes.Repeat([]byte("b"), 5000)
	for _, p := range []store.StepsRecordParams{
		{Lease: l, StepID: "big", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: big},
		{Lease: l, StepID: "small", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte(`1`)},
	} {
		if err := s.StepsRecord(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	due := time.Now()
	if err := s.RunsSleep(ctx, l, &due); err != nil {
		t.Fatal(err)
	}
	run, err := s.RunsGet(ctx, "ns", l.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: run.Queue, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: 1, Lease: time.Minute, InlineBytes: 4096})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	c := got[0]
	byID := map[string]store.StepState{}
	for _, st := range c.Steps {
		byID[st.StepID] = st
	}
	if st := byID["big"]; st.Output != nil || st.OutputSize != len(big) {
		t.Fatalf("big output claimed as %d bytes, size %d", len(st.Output), st.OutputSize)
	}
	if st := byID["small"]; string(st.Output) != "1" || st.OutputSize != 0 {
		t.Fatalf("small output claimed as %q, size %d", st.Output, st.OutputSize)
	}
	cur := store.Lease{Namespace: "ns", RunID: c.ID, Token: c.LeaseToken}
	var read []byte
	for len(read) < len(big) {
		part, err := s.PayloadsRead(ctx, store.PayloadsReadParams{Lease: cur, StepID: "big", Attempt: 1, Offset: len(read), Length: 2000})
		if err != nil || part.Total != len(big) {
			t.Fatalf("read at %d: %+v %v", len(read), part, err)
		}
		read = append(read, part.Data...)
	}
	if !bytes.Equal(read, big) {
		t.Fatal("read back a different output")
	}
	if _, err := s.PayloadsRead(ctx, store.PayloadsReadParams{Lease: stale, StepID: "big", Attempt: 1, Length: 10}); !errors.Is(
		err,
		store.ErrLeaseLost,
	) {
		t.Fatalf("a stale lease read: %v", err)
	}
	if _, err := s.PayloadsRead(ctx, store.PayloadsReadParams{Lease: cur, StepID: "nope", Attempt: 1, Length: 10}); !errors.Is(
		err,
		store.ErrNotFound,
	) {
		t.Fatalf("an unknown step: %v", err)
	}
	if part, err := s.PayloadsRead(ctx, store.PayloadsReadParams{Lease: cur, Length: 10}); err != nil || part.Total != 0 {
		t.Fatalf("a run without input: %+v %v", part, err)
	}
	if _, err := s.PayloadsRead(ctx, store.PayloadsReadParams{Lease: cur, StepID: "big", Length: 10}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a step without an attempt: %v", err)
	}
}
