package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
	"github.com/kagzi/kagzi/tests/testdb"
)

// Retention of the ways in: events fanned out go with their firings and
// webhook deliveries once published before the cutoff, oldest first and
// a batch at a time; a pending event never goes; wait tokens go once used
// or expired before the cutoff, and a deleted one is refused.
func TestWaysInRetention(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	count := func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM kagzi."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.TriggersCreate(ctx, store.Trigger{Namespace: "ns", Name: "t", Pattern: "job.*", Type: "T", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	publish := func(name string) uuid.UUID {
		t.Helper()
		p, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: name, Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	fanOut := func(id uuid.UUID) {
		t.Helper()
		if out, err := s.PublishedEventsFanOut(ctx, id); err != nil || len(out.Started) != 1 {
			t.Fatalf("fan out %s: %+v %v", id, out, err)
		}
	}
	old := publish("job.a")
	fanOut(old)
	src, err := s.WebhookSourcesCreate(ctx, store.WebhookSource{Namespace: "ns", Name: "gh",
		Source: webhook.Source{Kind: webhook.GitHub, Secret: []byte("s3cret-s3cret-s3cret"), Template: "job.{event}"}})
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := s.WebhookDeliveriesAdd(ctx, src, "d-1", "job.push", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	fanOut(hooked)
	pending := publish("job.c")

	l, _ := leasedRun(t, s, "ns")
	used := mintToken(t, s, l, "token:used", time.Hour)
	if _, err := s.WaitTokensComplete(ctx, used.Token, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	open := mintToken(t, s, l, "token:open", time.Hour)

	// Everything is younger than the cutoff: nothing goes.
	now := time.Now()
	if n, err := s.PublishedEventsDeleteExpired(ctx, now.Add(-time.Minute), 0); err != nil || n != 0 {
		t.Fatalf("events before a minute ago: %d %v", n, err)
	}
	if n, err := s.WaitTokensDeleteExpired(ctx, now.Add(-time.Minute), 0); err != nil || n != 0 {
		t.Fatalf("tokens before a minute ago: %d %v", n, err)
	}
	// A batch of one takes the oldest event.
	if n, err := s.PublishedEventsDeleteExpired(ctx, now.Add(time.Minute), 1); err != nil || n != 1 {
		t.Fatalf("a batch of one: %d %v", n, err)
	}
	if _, err := s.PublishedEventsGet(ctx, "ns", old); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the oldest event after a batch of one: %v", err)
	}
	if n, err := s.PublishedEventsDeleteExpired(ctx, now.Add(time.Minute), 0); err != nil || n != 1 {
		t.Fatalf("the rest: %d %v", n, err)
	}
	// The pending one stays, whatever its age; the firings and the
	// delivery went with their events.
	if n, err := s.PublishedEventsDeleteExpired(ctx, now.Add(100*24*time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("a pending event: %d deleted, %v", n, err)
	}
	if ev, err := s.PublishedEventsGet(ctx, "ns", pending); err != nil || ev.FannedOutAt != nil {
		t.Fatalf("the pending event: %+v %v", ev, err)
	}
	if f, d := count("trigger_firings"), count("webhook_deliveries"); f != 0 || d != 0 {
		t.Fatalf("%d firings and %d deliveries left", f, d)
	}
	// Its firings gone, the pending event still fans out once.
	fanOut(pending)
	// A GitHub delivery's replay is refused only while its row lives.
	if _, err := s.WebhookDeliveriesAdd(ctx, src, "d-1", "job.push", []byte(`{}`)); err != nil {
		t.Fatalf("a delivery id past retention: %v", err)
	}

	// Tokens: the used one goes a minute on, the open one once expired.
	if n, err := s.WaitTokensDeleteExpired(ctx, now.Add(time.Minute), 0); err != nil || n != 1 {
		t.Fatalf("used tokens: %d %v", n, err)
	}
	if _, err := s.WaitTokensComplete(ctx, used.Token, []byte(`2`)); !errors.Is(err, store.ErrWaitTokenForged) {
		t.Fatalf("a deleted token: %v", err)
	}
	if _, err := s.WaitTokensComplete(ctx, open.Token, []byte(`3`)); err != nil {
		t.Fatalf("the open token was kept: %v", err)
	}
	if n, err := s.WaitTokensDeleteExpired(ctx, now.Add(2*time.Minute), 0); err != nil || n != 1 {
		t.Fatalf("the token used now: %d %v", n, err)
	}
	if c := count("wait_tokens"); c != 0 {
		t.Fatalf("%d tokens left", c)
	}

	if _, err := s.PublishedEventsDeleteExpired(ctx, now, store.MaxDeleteBatch+1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a batch above the maximum: %v", err)
	}
	for d, ok := range map[time.Duration]bool{0: true, store.MinKeepEvents: true, store.MaxKeep: true,
		time.Hour: false, store.MaxKeep + time.Hour: false, -time.Hour: false} {
		if err := store.CheckKeepEvents(d); (err == nil) != ok || (err != nil && !errors.Is(err, store.ErrInvalidArgument)) {
			t.Errorf("CheckKeepEvents(%v): %v", d, err)
		}
	}
}

// A failed fan-out counts an attempt and keeps its error; the last
// allowed one gives the event up: no longer pending, marked failed, no
// run. An event fanned out records nothing.
func TestPublishedEventsFanOutFailed(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	p, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: "job.a"})
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("refused: " + strings.Repeat("x", 10000))
	for i := 1; i <= store.MaxFanOutAttempts; i++ {
		f, err := s.PublishedEventsFanOutFailed(ctx, p.ID, cause)
		if err != nil || f.Attempts != i || f.GivenUp != (i == store.MaxFanOutAttempts) {
			t.Fatalf("failure %d: %+v %v", i, f, err)
		}
		ev, err := s.PublishedEventsGet(ctx, "ns", p.ID)
		if err != nil || ev.FanOutAttempts != i || !strings.HasPrefix(ev.FanOutError, "refused: x") || len(ev.FanOutError) > 8<<10 {
			t.Fatalf("after failure %d: attempts %d, error %d bytes, %v", i, ev.FanOutAttempts, len(ev.FanOutError), err)
		}
		if (ev.FailedAt != nil) != f.GivenUp || (ev.FannedOutAt != nil) != f.GivenUp {
			t.Fatalf("after failure %d: failed %v, fanned out %v", i, ev.FailedAt, ev.FannedOutAt)
		}
	}
	if pend, err := s.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 0 {
		t.Fatalf("pending after giving up: %v %v", pend, err)
	}
	if f, err := s.PublishedEventsFanOutFailed(ctx, p.ID, cause); err != nil || f != (store.FanOutFailure{}) {
		t.Fatalf("a failure of an event given up: %+v %v", f, err)
	}
	if out, err := s.PublishedEventsFanOut(ctx, p.ID); err != nil || !out.Done {
		t.Fatalf("fan-out of an event given up: %+v %v", out, err)
	}
}
