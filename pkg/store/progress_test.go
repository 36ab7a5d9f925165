package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// recordDone records step id as a completed FUNCTION step with output out.
func recordDone(t *testing.T, s *store.Store, l store.Lease, id, out string) {
	t.Helper()
	if err := s.StepsRecord(context.Background(), store.StepsRecordParams{Lease: l, StepID: id, Attempt: 1,
		Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte(out)}); err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
}

func TestStepsStreamOrdersByIndexBeyondNine(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	// Recorded out of text order and of index order: #10 sorts before #9
	// as text; the read must order by number.
	for _, n := range []int{10, 2, 1, 9, 12, 11, 3, 4, 5, 6, 7, 8} {
		recordDone(t, s, l, protocol.StreamStepID("tok", n), fmt.Sprintf("%d", n))
	}
	// Another stream whose name extends this one, a failed entry and
	// other steps are not entries of "tok".
	recordDone(t, s, l, protocol.StreamStepID("tok2", 1), `"other"`)
	recordDone(t, s, l, "stream:tok#x", `"bad"`)
	recordDone(t, s, l, "plain", `"step"`)
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: protocol.StreamStepID("tok", 13), Attempt: 1,
		Kind: store.StepFunction, Status: store.StepFailed, Error: "too large"}); err != nil {
		t.Fatal(err)
	}
	r, err := s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != 12 || r.Closed || r.More || r.Ended() || r.Status != store.StatusRunning {
		t.Fatalf("read: %+v", r)
	}
	for i, e := range r.Entries {
		if e.Index != i+1 || string(e.Value) != fmt.Sprint(i+1) || e.RecordedAt == nil {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	// From an index, in pages.
	r, err = s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "tok", After: 8, Limit: 3})
	if err != nil || len(r.Entries) != 3 || r.Entries[0].Index != 9 || r.Entries[2].Index != 11 || !r.More {
		t.Fatalf("page after 8: %+v %v", r, err)
	}
	recordDone(t, s, l, protocol.StreamEndStepID("tok"), `{}`)
	r, err = s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "tok", After: 8, Limit: 3})
	if err != nil || len(r.Entries) != 3 || !r.More || !r.Closed || r.Ended() {
		t.Fatalf("closed, page after 8: %+v %v", r, err)
	}
	r, err = s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "tok", After: 11, Limit: 3})
	if err != nil || len(r.Entries) != 1 || r.Entries[0].Index != 12 || r.More || !r.Closed || !r.Ended() {
		t.Fatalf("closed, last page: %+v %v", r, err)
	}
	infos, err := s.StepsStreams(ctx, "ns", l.RunID)
	if err != nil || len(infos) != 2 || infos[0] != (store.StreamInfo{Name: "tok", Entries: 12, Last: 12, Closed: true}) ||
		infos[1] != (store.StreamInfo{Name: "tok2", Entries: 1, Last: 1}) {
		t.Fatalf("streams: %+v %v", infos, err)
	}
	// A stream never written is empty, and ends with its run.
	r, err = s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "none"})
	if err != nil || len(r.Entries) != 0 || r.Ended() {
		t.Fatalf("unwritten stream: %+v %v", r, err)
	}
	if err := s.RunsComplete(ctx, l, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	r, err = s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "none"})
	if err != nil || len(r.Entries) != 0 || !r.Ended() || r.Status != store.StatusCompleted {
		t.Fatalf("unwritten stream of a finished run: %+v %v", r, err)
	}
}

func TestStepsStateLatestByNumber(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	for n := 1; n <= 11; n++ {
		recordDone(t, s, l, protocol.StateStepID("progress", n), fmt.Sprint(n*10))
	}
	recordDone(t, s, l, protocol.StateStepID("phase", 1), `"load"`)
	recordDone(t, s, l, protocol.StateStepID("phase", 2), `"train"`)
	recordDone(t, s, l, protocol.StreamStepID("progress", 20), `"a stream"`)
	r, err := s.StepsState(ctx, store.StepsStateParams{Namespace: "ns", RunID: l.RunID})
	if err != nil || r.Status != store.StatusRunning || len(r.Values) != 2 {
		t.Fatalf("state: %+v %v", r, err)
	}
	if v := r.Values[0]; v.Key != "phase" || v.Version != 2 || string(v.Value) != `"train"` || v.RecordedAt == nil {
		t.Fatalf("phase: %+v", v)
	}
	if v := r.Values[1]; v.Key != "progress" || v.Version != 11 || string(v.Value) != "110" {
		t.Fatalf("progress (text order would give #9): %+v", v)
	}
	r, err = s.StepsState(ctx, store.StepsStateParams{Namespace: "ns", RunID: l.RunID, Key: "progress"})
	if err != nil || len(r.Values) != 1 || r.Values[0].Version != 11 {
		t.Fatalf("one key: %+v %v", r, err)
	}
	r, err = s.StepsState(ctx, store.StepsStateParams{Namespace: "ns", RunID: l.RunID, Key: "never"})
	if err != nil || len(r.Values) != 0 || r.Status != store.StatusRunning {
		t.Fatalf("unset key: %+v %v", r, err)
	}
	// Another namespace does not see the run.
	if _, err := s.StepsState(ctx, store.StepsStateParams{Namespace: "other", RunID: l.RunID}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other namespace: %v", err)
	}
}

func TestStepsProgressBounds(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	bad := []store.StepsStreamParams{
		{Namespace: "ns", RunID: uuid.Nil, Name: "tok"},
		{Namespace: "ns", RunID: l.RunID, Name: ""},
		{Namespace: "ns", RunID: l.RunID, Name: "a#1"},
		{Namespace: "ns", RunID: l.RunID, Name: "tok", After: -1},
		{Namespace: "ns", RunID: l.RunID, Name: "tok", Limit: -1},
		{Namespace: "ns", RunID: l.RunID, Name: "tok", Limit: store.MaxStreamRead + 1},
	}
	for _, p := range bad {
		if _, err := s.StepsStream(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%+v: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if _, err := s.StepsState(ctx, store.StepsStateParams{Namespace: "ns", RunID: l.RunID, Key: "k#2"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("state key with #: %v", err)
	}
	if _, err := s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: uuid.New(), Name: "tok"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	// The longest name fits a step id with the highest index; a longer one
	// is refused.
	long := make([]byte, protocol.MaxProgressNameLen)
	for i := range long {
		long[i] = 'a'
	}
	if id := protocol.StreamStepID(string(long), protocol.MaxStreamEntries); len(id) > protocol.MaxNameLen {
		t.Fatalf("step id of the longest name is %d bytes", len(id))
	}
	if _, err := s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: string(long) + "a"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("name too long: %v", err)
	}
	// A read is bounded: MaxStreamRead entries at most, the rest More.
	recordDone(t, s, l, protocol.StreamStepID("tok", 1), `1`)
	recordDone(t, s, l, protocol.StreamStepID("tok", 2), `2`)
	r, err := s.StepsStream(ctx, store.StepsStreamParams{Namespace: "ns", RunID: l.RunID, Name: "tok", Limit: 1})
	if err != nil || len(r.Entries) != 1 || !r.More {
		t.Fatalf("limit 1: %+v %v", r, err)
	}
}
