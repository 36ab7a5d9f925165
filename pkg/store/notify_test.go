package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
	"github.com/kagzi/kagzi/tests/testdb"
)

// handler is a pgxlisten handler that reports each new session that
// listens (onBacklog) and each payload (onPayload).
type handler struct {
	onBacklog func()
	onPayload func(string)
}

func (h handler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	if h.onBacklog != nil {
		h.onBacklog()
	}
	return nil
}

func (h handler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	if h.onPayload != nil {
		h.onPayload(n.Payload)
	}
	return nil
}

// lockedListener is a pgxlisten listener on NotifyChannel whose session
// holds advisory lock key (pgsession.LockedConnect), as the relay's.
func lockedListener(url string, key int64, h handler) *pgxlisten.Listener {
	l := &pgxlisten.Listener{Connect: pgsession.LockedConnect(url, key), ReconnectDelay: 50 * time.Millisecond}
	l.Handle(store.NotifyChannel, h)
	return l
}

// listen starts a listener on url and returns a channel of its payloads
// once it is listening.
func listen(t *testing.T, url string, key int64) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 10000)
	ready := make(chan struct{})
	var once sync.Once
	l := lockedListener(url, key, handler{
		onBacklog: func() { once.Do(func() { close(ready) }) },
		onPayload: func(p string) { ch <- p },
	})
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Listen(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not start")
	}
	return ch
}

// listening returns a store on a fresh database and the payloads of a
// Listener on it.
func listening(t *testing.T) (*store.Store, <-chan string) {
	t.Helper()
	pool, url := testdb.Pool(t)
	return store.New(pool, store.Options{}), listen(t, url, 1)
}

// untilMarker creates a run in queue "marker" and returns the
// notifications that arrive before its own, which tells that every earlier
// one arrived.
func untilMarker(t *testing.T, s *store.Store, ch <-chan string) []store.Notification {
	t.Helper()
	if _, _, err := s.RunsCreate(context.Background(), store.RunsCreateParams{Namespace: "ns", Queue: "marker", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	var got []store.Notification
	for {
		select {
		case p := <-ch:
			n, err := store.ParseNotification(p)
			if err != nil {
				t.Fatalf("parse %q: %v", p, err)
			}
			if n.Queue == "marker" {
				return got
			}
			got = append(got, n)
		case <-time.After(10 * time.Second):
			t.Fatal("no marker notification")
		}
	}
}

func TestNotifyBatchInsertSendsFewNotifications(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	ps := make([]store.RunsCreateParams, 1000)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: fmt.Sprintf("q%d", i%3), Type: "T"}
	}
	if _, err := s.RunsCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	got := untilMarker(t, s, ch)
	if len(got) != 3 {
		t.Fatalf("1,000 inserts over 3 queues sent %d notifications, want 3: %+v", len(got), got)
	}
	for _, n := range got {
		if n.Kind != store.NotifyReady || n.Namespace != "ns" || n.At == nil {
			t.Fatalf("unexpected notification %+v", n)
		}
	}
}

func TestNotifyDoneAndCancel(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	var ids []store.Lease
	for i := 0; i < 150; i++ {
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
			t.Fatal(err)
		}
	}
	w := uuid.New()
	claimed, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: w,
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 150, Lease: time.Minute})
	if err != nil || len(claimed) != 150 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	for _, c := range claimed {
		ids = append(ids, store.Lease{Namespace: "ns", RunID: c.ID, Token: c.LeaseToken})
	}
	// Terminate one running run and ask another to cancel: each holder
	// must be told, and which it is.
	if _, err := s.RunsTerminate(ctx, "ns", ids[0].RunID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunsCancel(ctx, "ns", ids[1].RunID); err != nil {
		t.Fatal(err)
	}
	// Complete the other 149 (the one asked to cancel included, its lease
	// holds) one statement each: each statement notifies on its own.
	for _, l := range ids[1:] {
		if err := s.RunsComplete(ctx, l, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	done := map[string]bool{}
	var cancelled, asked bool
	deadline := time.After(10 * time.Second)
	for len(done) < 150 || !cancelled || !asked {
		select {
		case p := <-ch:
			n, err := store.ParseNotification(p)
			if err != nil {
				t.Fatal(err)
			}
			switch n.Kind {
			case store.NotifyDone:
				for _, f := range n.Finished {
					done[f.RunID.String()] = true
				}
			case store.NotifyCancel:
				switch {
				case n.RunID == ids[0].RunID && n.WorkerID == w && n.Terminate:
					cancelled = true
				case n.RunID == ids[1].RunID && n.WorkerID == w && !n.Terminate:
					asked = true
				default:
					t.Fatalf("cancel notification %+v", n)
				}
			}
		case <-deadline:
			t.Fatalf("got %d done, terminated %v, asked %v", len(done), cancelled, asked)
		}
	}
}

func TestListenerFailover(t *testing.T) {
	t.Parallel()
	pool, url := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	const key = 42
	became := make(chan int, 10)
	for i := 0; i < 2; i++ {
		lctx, cancel := context.WithCancel(ctx)
		l := lockedListener(url, key, handler{onBacklog: func() { became <- i }})
		done := make(chan struct{})
		go func() { defer close(done); _ = l.Listen(lctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	first := <-became
	n, err := s.LockHolderTerminate(ctx, key)
	if err != nil || n != 1 {
		t.Fatalf("terminate: %d %v", n, err)
	}
	start := time.Now()
	select {
	case next := <-became:
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("takeover took %v", took)
		}
		_ = next // either replica may win the lock again
	case <-time.After(2 * time.Second):
		t.Fatalf("no listener took over within 2 s after leader %d died", first)
	}
}

// Raising or removing a concurrency limit announces its queue as claimable
// (runs waiting for a slot may be claimed now); setting a new limit,
// lowering one or setting the same value announces nothing.
func TestNotifyLimitRaisedOrRemoved(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	next := func() []store.Notification { return untilMarker(t, s, ch) }
	wantReady := func(what string, got []store.Notification, queues ...string) {
		t.Helper()
		if len(got) != len(queues) {
			t.Fatalf("%s: notifications %+v, want ready for %v", what, got, queues)
		}
		for i, n := range got {
			if n.Kind != store.NotifyReady || n.Namespace != "ns" || n.Queue != queues[i] || n.At == nil || time.Since(*n.At) > time.Minute {
				t.Fatalf("%s: notification %+v, want ready for %s now", what, n, queues[i])
			}
		}
	}
	set := func(queue, typ string, n int) {
		t.Helper()
		if _, err := s.LimitsSet(ctx, "ns", queue, typ, n); err != nil {
			t.Fatal(err)
		}
	}
	set("q", "A", 1)
	set("q", "B", 1)
	wantReady("new limits", next())
	set("q", "A", 1)
	set("q", "A", 0)
	wantReady("same and lowered limit", next())
	set("q", "A", 3)
	wantReady("raised limit", next(), "q")
	if err := s.LimitsDelete(ctx, "ns", "q", "B"); err != nil {
		t.Fatal(err)
	}
	wantReady("removed limit", next(), "q")
	if err := s.LimitsDelete(ctx, "ns", "q", "B"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove an absent limit: %v", err)
	}
	wantReady("absent limit", next())
	perKey := func(typ string, n int) {
		t.Helper()
		if _, err := s.LimitsSetPerKey(ctx, "ns", "q", typ, n); err != nil {
			t.Fatal(err)
		}
	}
	perKey("C", 2)
	perKey("C", 1)
	wantReady("new and lowered per-key limit", next())
	perKey("C", 4)
	wantReady("raised per-key limit", next(), "q")
	set("q", "C", 5)
	perKey("C", 0)
	wantReady("per-key limit removed, total kept", next(), "q")
}

func TestNotifyProgressSteps(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	run, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	l := store.Lease{Namespace: "ns", RunID: run.ID, Token: claimed[0].LeaseToken}
	record := func(id string, st store.StepStatus) {
		t.Helper()
		if err := s.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: id, Attempt: 1, Kind: store.StepFunction,
			Status: st, Output: []byte(`1`)}); err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
	}
	// Only completed progress steps notify: a plain step does not, nor
	// does an attempt that failed.
	record("charge", store.StepCompleted)
	record("state:total", store.StepFailed)
	record("state:total#2", store.StepCompleted)
	record("stream:tokens#1", store.StepCompleted)
	record("update:add#1", store.StepCompleted)
	var got []string
	for _, n := range untilMarker(t, s, ch) {
		if n.Kind == store.NotifyProgress {
			if n.RunID != run.ID || n.Namespace != "ns" {
				t.Fatalf("progress notification %+v", n)
			}
			got = append(got, n.StepID)
		}
	}
	if fmt.Sprint(got) != "[state:total#2 stream:tokens#1 update:add#1]" {
		t.Fatalf("progress notifications %v", got)
	}
}

// A statement ending many runs announces each once, in notifications of at
// most 100 runs, after statements of one run each: the triggers' joins are
// planned per statement, not with the counts of the first that ran them.
func TestNotifyDoneOfOneBigBatch(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	const n = 253
	for i := 0; i < n; i++ {
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, items := claimToComplete(t, s, n)
	// Six statements of one run each: past the point where a cached plan
	// would be kept for the remaining ones.
	for _, it := range items[:6] {
		if _, err := s.RunsCompleteBatch(ctx, []store.RunsCompleteItem{it}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RunsCompleteBatch(ctx, items[6:]); err != nil {
		t.Fatal(err)
	}
	// A second report of the same runs ends nothing and announces nothing.
	if _, err := s.RunsCompleteBatch(ctx, items[6:]); err != nil {
		t.Fatal(err)
	}
	seen := map[uuid.UUID]int{}
	for _, got := range untilMarker(t, s, ch) {
		if got.Kind != store.NotifyDone {
			continue
		}
		if len(got.Finished) > 100 {
			t.Fatalf("one notification named %d runs, want at most 100", len(got.Finished))
		}
		for _, f := range got.Finished {
			seen[f.RunID]++
		}
	}
	for _, c := range claimed {
		if seen[c.ID] != 1 {
			t.Fatalf("run %s announced %d times, want once", c.ID, seen[c.ID])
		}
	}
	if len(seen) != n {
		t.Fatalf("%d runs announced, want %d", len(seen), n)
	}
}

// claimToComplete claims the n due runs of type T in namespace ns, queue
// q, and returns them with the items that complete each.
func claimToComplete(t *testing.T, s *store.Store, n int) ([]store.ClaimedRun, []store.RunsCompleteItem) {
	t.Helper()
	claimed, err := s.RunsClaim(context.Background(), store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	items := make([]store.RunsCompleteItem, n)
	for i, c := range claimed {
		items[i] = store.RunsCompleteItem{Lease: store.Lease{Namespace: "ns", RunID: c.ID, Token: c.LeaseToken}, Output: []byte(`1`)}
	}
	return claimed, items
}

// A run claimed under a concurrency limit that stops running announces its
// queue as claimable (a slot is free for the runs waiting for one); a run
// of a type without a limit announces nothing when it ends.
func TestNotifyFreedSlot(t *testing.T) {
	t.Parallel()
	s, ch := listening(t)
	ctx := context.Background()
	if _, err := s.LimitsSet(ctx, "ns", "q", "T", 1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "free", Type: "U"}); err != nil {
		t.Fatal(err)
	}
	_ = untilMarker(t, s, ch)
	_, items := claimToComplete(t, s, 1) // one slot: one of the two
	free, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: "free", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "U"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(free) != 1 {
		t.Fatalf("claim: %d %v", len(free), err)
	}
	items = append(items, store.RunsCompleteItem{Lease: store.Lease{Namespace: "ns", RunID: free[0].ID, Token: free[0].LeaseToken}, Output: []byte(`1`)})
	if _, err := s.RunsCompleteBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	ready := map[string]int{}
	for _, n := range untilMarker(t, s, ch) {
		if n.Kind == store.NotifyReady {
			ready[n.Queue]++
		}
	}
	if ready["q"] != 1 || ready["free"] != 0 {
		t.Fatalf("ready notifications by queue %v: want one for q, whose limited run ended, none for free", ready)
	}
}
