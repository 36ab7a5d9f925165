package store_test

import (
	"bytes"
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

func sendEvent(t *testing.T, s *store.Store, ns string, runID uuid.UUID, name, payload string) store.SentEvent {
	t.Helper()
	ev, err := s.EventsSend(context.Background(), store.EventsSendParams{Namespace: ns, RunID: runID, Name: name, Payload: []byte(payload)})
	if err != nil {
		t.Fatalf("send %s: %v", name, err)
	}
	return ev
}

func TestEventsSentBeforeConsumptionConsumedOnce(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, q := leasedRun(t, s, "ns")
	sent := sendEvent(t, s, "ns", l.RunID, "paid", `{"amount":5}`)
	if sent.ID.Version() != 7 || sent.RunID != l.RunID || sent.Namespace != "ns" || sent.Name != "paid" || sent.CreatedAt.IsZero() ||
		sent.RunStatus != store.StatusRunning || sent.Queue != q || sent.Woken || sent.ConsumedAt != nil {
		t.Fatalf("sent: %+v", sent)
	}
	ev, err := s.EventsConsume(ctx, l, "paid", "wait-payment")
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != sent.ID || string(ev.Payload) != `{"amount":5}` || ev.ConsumedAt == nil || ev.ConsumedBy != "wait-payment" {
		t.Fatalf("consumed: %+v", ev)
	}
	// The same step asking again (a retried request) gets the same event.
	again, err := s.EventsConsume(ctx, l, "paid", "wait-payment")
	if err != nil || again.ID != sent.ID || !again.ConsumedAt.Equal(*ev.ConsumedAt) || again.ConsumedBy != "wait-payment" {
		t.Fatalf("retried consume: %+v %v", again, err)
	}
	// Another step does not get it a second time.
	if _, err := s.EventsConsume(ctx, l, "paid", "wait-payment-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second consumer: want ErrNotFound, got %v", err)
	}
	list, err := s.EventsList(ctx, "ns", l.RunID)
	if err != nil || len(list) != 1 || list[0].ConsumedBy != "wait-payment" || list[0].ConsumedAt == nil {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestEventsConsumedOldestFirstByName(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	first := sendEvent(t, s, "ns", l.RunID, "tick", "1")
	sendEvent(t, s, "ns", l.RunID, "other", "x")
	second := sendEvent(t, s, "ns", l.RunID, "tick", "2")
	a, err := s.EventsConsume(ctx, l, "tick", "a")
	if err != nil || a.ID != first.ID {
		t.Fatalf("first consume: %+v %v", a, err)
	}
	b, err := s.EventsConsume(ctx, l, "tick", "b")
	if err != nil || b.ID != second.ID || string(b.Payload) != "2" {
		t.Fatalf("second consume: %+v %v", b, err)
	}
	if _, err := s.EventsConsume(ctx, l, "tick", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("third consume: %v", err)
	}
	list, err := s.EventsList(ctx, "ns", l.RunID)
	if err != nil || len(list) != 3 || list[0].ID != first.ID || list[1].Name != "other" || list[1].ConsumedAt != nil || list[2].ConsumedBy != "b" {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestEventsConcurrentConsumersGetDistinctEvents(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	const n = 6
	for i := 0; i < n; i++ {
		sendEvent(t, s, "ns", l.RunID, "job", "p")
	}
	var wg sync.WaitGroup
	got := make([]uuid.UUID, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := s.EventsConsume(ctx, l, "job", "step-"+string(rune('a'+i)))
			got[i], errs[i] = ev.ID, err
		}()
	}
	wg.Wait()
	seen := map[uuid.UUID]bool{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("consumer %d: %v", i, errs[i])
		}
		if seen[got[i]] {
			t.Fatalf("event %s consumed twice", got[i])
		}
		seen[got[i]] = true
	}
}

func TestEventsSendErrors(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := withLimits(t, store.New(pool, store.Options{}), 16, 32)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", RunID: uuid.New(), Name: "e"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: want ErrNotFound, got %v", err)
	}
	_, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", RunID: l.RunID, Name: "e", Payload: bytes.Repeat([]byte("x"), 33)})
	if !errors.Is(err, store.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "event payload") {
		t.Fatalf("big payload: want ErrPayloadTooLarge, got %v", err)
	}
	for _, p := range []store.EventsSendParams{
		{Namespace: "ns", Name: "e"},
		{Namespace: "ns", RunID: l.RunID, ExternalID: "x", Name: "e"},
		{Namespace: "ns", RunID: l.RunID},
		{Namespace: "ns", RunID: l.RunID, Name: "has space"},
		{RunID: l.RunID, Name: "e"},
	} {
		if _, err := s.EventsSend(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%+v: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if err := s.RunsComplete(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", RunID: l.RunID, Name: "e"})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "finished") {
		t.Fatalf("finished run: want ErrConflict saying it is finished, got %v", err)
	}
	sc, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "@daily"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", RunID: sc.ID, Name: "e"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("schedule template: want ErrConflict, got %v", err)
	}
	if list, err := s.EventsList(ctx, "ns", l.RunID); err != nil || len(list) != 0 {
		t.Fatalf("rejected events stored: %+v %v", list, err)
	}
}

func TestEventsSendByExternalID(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, q := leasedRun(t, s, "ns") // external id "ext-"+q
	ev, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", ExternalID: "ext-" + q, Name: "go"})
	if err != nil || ev.RunID != l.RunID {
		t.Fatalf("send by external id: %+v %v", ev, err)
	}
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", ExternalID: "nobody", Name: "go"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown external id: %v", err)
	}
	if err := s.RunsFail(ctx, l, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", ExternalID: "ext-" + q, Name: "go"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("external id of a finished run: %v", err)
	}
	// A new live run with the same external id receives the events.
	run, created, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: q, Type: "T", ExternalID: "ext-" + q})
	if err != nil || !created {
		t.Fatal(err)
	}
	ev, err = s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", ExternalID: "ext-" + q, Name: "go"})
	if err != nil || ev.RunID != run.ID || ev.RunStatus != store.StatusPending {
		t.Fatalf("send to the new run: %+v %v", ev, err)
	}
}

func TestEventsNamespaceIsolation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, q := leasedRun(t, s, "a")
	sendEvent(t, s, "a", l.RunID, "e", "p")
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "b", RunID: l.RunID, Name: "e"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("send from b: %v", err)
	}
	if _, err := s.EventsSend(ctx, store.EventsSendParams{Namespace: "b", ExternalID: "ext-" + q, Name: "e"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("send from b by external id: %v", err)
	}
	if _, err := s.EventsList(ctx, "b", l.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("list from b: %v", err)
	}
	wrongNS := l
	wrongNS.Namespace = "b"
	if _, err := s.EventsConsume(ctx, wrongNS, "e", "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("consume from b: %v", err)
	}
	if list, _ := s.EventsList(ctx, "a", l.RunID); len(list) != 1 || list[0].ConsumedAt != nil {
		t.Fatalf("a's events: %+v", list)
	}
	if _, err := s.EventsList(ctx, "a", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("list unknown run: %v", err)
	}
}

func TestEventsConsumeStaleLease(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	old, q := leasedRun(t, s, "ns")
	sendEvent(t, s, "ns", old.RunID, "e", "p")
	if err := s.RunsRelease(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := claimAgain(t, s, "ns", q, old.RunID)
	if _, err := s.EventsConsume(ctx, old, "e", "s"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale lease: want ErrLeaseLost, got %v", err)
	}
	if list, _ := s.EventsList(ctx, "ns", old.RunID); list[0].ConsumedAt != nil {
		t.Fatal("a stale lease consumed the event")
	}
	if ev, err := s.EventsConsume(ctx, cur, "e", "s"); err != nil || string(ev.Payload) != "p" {
		t.Fatalf("current lease: %+v %v", ev, err)
	}
}

// runAvailableAt reads a run's status and due time.
func runAvailableAt(t *testing.T, s *store.Store, ns string, id uuid.UUID) (store.RunStatus, *time.Time) {
	t.Helper()
	r, err := s.RunsGet(context.Background(), ns, id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status, r.AvailableAt
}

func TestEventsWaitThenSendWakes(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, q := leasedRun(t, s, "ns")
	timeout := time.Now().Add(24 * time.Hour)
	wp := store.EventsReceiveParams{Lease: l, StepID: "wait-approval", Attempt: 1, Name: "approved", Until: &timeout, Suspend: true}
	res, err := s.EventsReceive(ctx, wp)
	if err != nil || res.Status != store.EventWaiting || res.Ready {
		t.Fatalf("wait: %+v %v", res, err)
	}
	st, at := runAvailableAt(t, s, "ns", l.RunID)
	if st != store.StatusSleeping || at == nil || !at.Equal(timeout.Truncate(time.Microsecond)) {
		t.Fatalf("after wait: %s %v", st, at)
	}
	if res, err := s.EventsReceive(ctx, wp); err != nil || res.Status != store.EventWaiting {
		t.Fatalf("retried wait: %+v %v", res, err)
	}
	steps, _ := s.StepsList(ctx, "ns", l.RunID)
	if len(steps) != 1 || steps[0].Kind != store.StepEvent || steps[0].Status != store.StepPending || string(steps[0].Input) != "approved" {
		t.Fatalf("wait step: %+v", steps)
	}
	// Another name does not wake it.
	if ev := sendEvent(t, s, "ns", l.RunID, "rejected", ""); ev.Woken || ev.RunStatus != store.StatusSleeping {
		t.Fatalf("other name: %+v", ev)
	}
	ev := sendEvent(t, s, "ns", l.RunID, "approved", `"yes"`)
	if !ev.Woken || ev.RunStatus != store.StatusSleeping || ev.Queue != q {
		t.Fatalf("awaited name: %+v", ev)
	}
	if _, at := runAvailableAt(t, s, "ns", l.RunID); at == nil || at.After(time.Now()) {
		t.Fatalf("woken run due at %v", at)
	}
	// The replay receives the event under the same attempt.
	cur := claimAgain(t, s, "ns", q, l.RunID)
	wp.Lease = cur
	if res, err := s.EventsReceive(ctx, wp); err != nil || res.Status != store.EventReceived || string(res.Payload) != `"yes"` {
		t.Fatalf("receive after wake: %+v %v", res, err)
	}
	latest, _ := s.StepsLatest(ctx, "ns", []uuid.UUID{l.RunID})
	if st := latest[l.RunID]; len(st) != 1 || st[0].Status != store.StepCompleted || string(st[0].Output) != `"yes"` {
		t.Fatalf("wait step after replay: %+v", st)
	}
	// The old lease is gone.
	wp.Lease = l
	if _, err := s.EventsReceive(ctx, wp); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("wait under the old lease: want ErrLeaseLost, got %v", err)
	}
}

func TestEventsWaitWithEventAlreadyThere(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	sendEvent(t, s, "ns", l.RunID, "go", "")
	res, err := s.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: "w", Attempt: 1, Name: "go", Suspend: true})
	if err != nil || res.Status != store.EventReceived || string(res.Payload) != "null" {
		t.Fatalf("wait: %+v %v", res, err)
	}
	if st, _ := runAvailableAt(t, s, "ns", l.RunID); st != store.StatusRunning {
		t.Fatalf("a wait that received at once suspended the run: %s", st)
	}
}

func TestEventsDoNotWakePlainSleep(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	until := time.Now().Add(time.Hour)
	if err := s.RunsSleep(ctx, l, &until); err != nil {
		t.Fatal(err)
	}
	if ev := sendEvent(t, s, "ns", l.RunID, "go", ""); ev.Woken {
		t.Fatalf("woke a plain sleep: %+v", ev)
	}
	if _, at := runAvailableAt(t, s, "ns", l.RunID); at == nil || !at.Equal(until.Truncate(time.Microsecond)) {
		t.Fatalf("sleep moved to %v", at)
	}
}

func TestEventsWaitValidation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	for _, p := range []store.EventsReceiveParams{
		{Lease: l, StepID: "w", Attempt: 1},
		{Lease: l, StepID: "", Attempt: 1, Name: "e"},
		{Lease: l, StepID: "w", Attempt: 0, Name: "e"},
	} {
		if _, err := s.EventsReceive(ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%+v: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if _, err := s.EventsConsume(ctx, l, "", "s"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("consume without name: %v", err)
	}
	if _, err := s.EventsConsume(ctx, l, "e", ""); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("consume without step: %v", err)
	}
	if st, _ := runAvailableAt(t, s, "ns", l.RunID); st != store.StatusRunning {
		t.Fatalf("invalid waits moved the run to %s", st)
	}
}

// A send racing a wait must never leave the run asleep with the event
// unseen: either the wait receives the event, or it sees it arrived while
// it suspended the run (which is then due at once), or the send sees the
// wait and wakes the run.
func TestEventsSendRacingWaitLosesNoWakeup(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	for i := 0; i < 25; i++ {
		l, _ := leasedRun(t, s, "ns")
		var wg sync.WaitGroup
		start := make(chan struct{})
		var sendErr, waitErr error
		var res store.EventsReceiveResult
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, sendErr = s.EventsSend(ctx, store.EventsSendParams{Namespace: "ns", RunID: l.RunID, Name: "go"})
		}()
		go func() {
			defer wg.Done()
			<-start
			res, waitErr = s.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: "w", Attempt: 1, Name: "go", Suspend: true})
		}()
		close(start)
		wg.Wait()
		if sendErr != nil || waitErr != nil {
			t.Fatalf("round %d: send %v, wait %v", i, sendErr, waitErr)
		}
		st, at := runAvailableAt(t, s, "ns", l.RunID)
		switch {
		case res.Status == store.EventReceived && st == store.StatusRunning:
		case res.Status == store.EventWaiting && st == store.StatusSleeping && at != nil:
		default:
			t.Fatalf("round %d: receive %+v, run left %s with available_at %v: wakeup lost", i, res, st, at)
		}
	}
}
