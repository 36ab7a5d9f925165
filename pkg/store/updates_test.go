package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// An update is received like an event, and its answer is the step named
// after the EVENT step that received it; UpdatesAnswer follows the chain.
func TestUpdatesSendReceiveAnswer(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	first, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "ns", RunID: l.RunID, Name: "AddItem", Payload: []byte(`{"price":10}`)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "ns", RunID: l.RunID, Name: "AddItem", Payload: []byte(`{"price":20}`)})
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != "update.AddItem" || first.RunStatus != store.StatusRunning {
		t.Fatalf("sent: %+v", first)
	}
	st, err := s.UpdatesAnswer(ctx, "ns", l.RunID, first.ID)
	if err != nil || st.Name != "AddItem" || st.ReceivedBy != "" || st.Answered || st.RunStatus != store.StatusRunning {
		t.Fatalf("before receipt: %+v %v", st, err)
	}
	// Two handlers receive them in order; only the second answers yet.
	for i, id := range []string{"event:update.AddItem", "event:update.AddItem#2"} {
		res, err := s.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: id, Attempt: 1, Name: "update.AddItem"})
		if err != nil || res.Status != store.EventReceived {
			t.Fatalf("receive %d: %+v %v", i, res, err)
		}
	}
	if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "update:AddItem#2", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted, Output: []byte(`{"result":30}`)}); err != nil {
		t.Fatal(err)
	}
	st, err = s.UpdatesAnswer(ctx, "ns", l.RunID, first.ID)
	if err != nil || st.ReceivedBy != "event:update.AddItem" || st.Answered {
		t.Fatalf("first, received and unanswered: %+v %v", st, err)
	}
	st, err = s.UpdatesAnswer(ctx, "ns", l.RunID, second.ID)
	if err != nil || st.ReceivedBy != "event:update.AddItem#2" || !st.Answered || string(st.Answer) != `{"result":30}` {
		t.Fatalf("second, answered: %+v %v", st, err)
	}
	if id, ok := protocol.UpdateStepID(st.ReceivedBy); !ok || id != "update:AddItem#2" {
		t.Fatalf("answer step of %q: %q", st.ReceivedBy, id)
	}
	// An event that is not an update, or an update of another run, is
	// no update of this run.
	plain := sendEvent(t, s, "ns", l.RunID, "AddItem", `1`)
	other, _ := leasedRun(t, s, "ns")
	for _, c := range []struct {
		run, id uuid.UUID
	}{{l.RunID, plain.ID}, {other.RunID, first.ID}, {l.RunID, uuid.New()}, {uuid.New(), first.ID}} {
		if _, err := s.UpdatesAnswer(ctx, "ns", c.run, c.id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("update %s of run %s: want ErrNotFound, got %v", c.id, c.run, err)
		}
	}
}

// An update to an unknown run is ErrNotFound, to a finished one
// ErrRunFinished (an ErrConflict) at once, and a refused update stores
// nothing.
func TestUpdatesSendRefused(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	if _, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "ns", RunID: uuid.New(), Name: "u"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: want ErrNotFound, got %v", err)
	}
	if _, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "other", RunID: l.RunID, Name: "u"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run of another namespace: want ErrNotFound, got %v", err)
	}
	for _, p := range []store.UpdatesSendParams{
		{Namespace: "ns", Name: "u"},
		{Namespace: "ns", RunID: l.RunID},
		{Namespace: "ns", RunID: l.RunID, Name: "a#b"},
		{Namespace: "ns", RunID: l.RunID, Name: "has space"},
		{Namespace: "ns", RunID: l.RunID, Name: strings.Repeat("x", protocol.MaxUpdateNameLen+1)},
	} {
		if _, err := s.UpdatesSend(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%+v: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if err := s.RunsComplete(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "ns", RunID: l.RunID, Name: "u", Payload: []byte(`1`)})
	if !errors.Is(err, store.ErrRunFinished) || !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "COMPLETED") {
		t.Fatalf("finished run: want ErrRunFinished naming the status, got %v", err)
	}
	sc, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "@daily"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: "ns", RunID: sc.ID, Name: "u"}); !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrRunFinished) {
		t.Fatalf("schedule template: want ErrConflict, got %v", err)
	}
	if list, err := s.EventsList(ctx, "ns", l.RunID); err != nil || len(list) != 0 {
		t.Fatalf("refused updates stored: %+v %v", list, err)
	}
}
