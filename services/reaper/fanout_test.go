package reaper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// publishEvents publishes one event per name in namespace "default" and
// returns their ids.
func (h *harness) publishEvents(names ...string) []uuid.UUID {
	h.t.Helper()
	var ids []uuid.UUID
	for _, n := range names {
		p, err := h.st.PublishedEventsAdd(context.Background(), store.PublishParams{Namespace: "default", Name: n})
		if err != nil {
			h.t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	return ids
}

func (h *harness) event(id uuid.UUID) store.PublishedEvent {
	h.t.Helper()
	ev, err := h.st.PublishedEventsGet(context.Background(), "default", id)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// An event whose fan-out fails every time does not hold up the events
// after it: it is tried again after a backoff that doubles, and given up
// at the last attempt, with its error kept and no run.
func TestFanOutGivesUpPoisonEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.st.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "t", Pattern: "job.*", Type: "T", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	ids := h.publishEvents("job.a", "job.poison", "job.c")
	poison := ids[1]
	refused := errors.New("refused every time")
	kn := reaper.Knobs{Clock: clock.NewFake(time.Now()), FanOut: func(ctx context.Context, tx *store.Store, id uuid.UUID) (store.FanOut, error) {
		if id == poison {
			return store.FanOut{}, refused
		}
		return tx.PublishedEventsFanOut(ctx, id)
	}}
	k := h.clockedOn(kn, testLogger(t), nil)
	waitLeader(t, k.r)
	k.settle()
	for _, id := range []uuid.UUID{ids[0], ids[2]} {
		if ev := h.event(id); ev.FannedOutAt == nil || len(ev.Firings) != 1 {
			t.Fatalf("event %s behind the poison one: %+v", ev.Name, ev)
		}
	}
	at := k.c.Now()
	for i := 1; i <= store.MaxFanOutAttempts; i++ {
		ev := h.event(poison)
		if ev.FanOutAttempts != i || ev.FanOutError == "" || len(ev.Firings) != 0 {
			t.Fatalf("after failure %d: %+v", i, ev)
		}
		if i == store.MaxFanOutAttempts {
			if ev.FailedAt == nil || ev.FannedOutAt == nil {
				t.Fatalf("given up: %+v", ev)
			}
			break
		}
		if ev.FailedAt != nil {
			t.Fatalf("given up after %d failures", i)
		}
		// Not tried again within its backoff; tried at its end.
		next := at.Add(time.Second << (i - 1))
		k.c.Set(next.Add(-time.Millisecond))
		k.settle()
		if got := h.event(poison).FanOutAttempts; got != i {
			t.Fatalf("within backoff %d: %d attempts", i, got)
		}
		k.c.Set(next)
		k.settle()
		at = next
	}
	st := settled(t, k.r, "one event given up, two fanned out", func(s reaper.Stats) bool {
		return s.EventsGivenUp == 1 && s.EventsFannedOut == 2
	})
	if st.TriggerRunsStarted != 2 {
		t.Fatalf("runs started: %d", st.TriggerRunsStarted)
	}
	if pend, err := h.st.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 0 {
		t.Fatalf("pending: %v %v", pend, err)
	}
}

// Retention deletes the events fanned out and the wait tokens used more
// than KAGZI_EVENT_RETENTION ago at its hourly look, not before; a
// pending event and a token not expired stay.
func TestRetentionDeletesEventsAndTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.st.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "t", Pattern: "job.*", Type: "T", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	ids := h.publishEvents("job.a", "job.b")
	run, _, err := h.st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "tq", Type: "W", Input: []byte(`null`)})
	if err != nil {
		t.Fatal(err)
	}
	l := h.claimOnly(run)
	mint := func(step string) string {
		t.Helper()
		o, m, err := h.st.WaitTokensMint(ctx, store.WaitTokensMintParams{Lease: l, StepID: step, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil || o.Err != nil {
			t.Fatal(err, o.Err)
		}
		return m.Token
	}
	used := mint("token:used")
	mint("token:open")
	if _, err := h.st.WaitTokensComplete(ctx, used, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	const keep = 3 * day
	k := h.clocked(func(c *reaper.Config) { c.EventRetention = keep })
	k.settle()
	for _, id := range ids {
		if h.event(id).FannedOutAt == nil {
			t.Fatalf("event %s not fanned out", id)
		}
	}
	// Published without a relay to tell the reaper: it stays pending.
	pending := h.publishEvents("job.pending")[0]
	published := h.event(ids[1]).PublishedAt

	k.c.Set(published.Add(keep - time.Minute))
	k.settle()
	if st := k.r.Stats(); st.EventsDeleted != 0 || st.WaitTokensDeleted != 0 {
		t.Fatalf("a minute before the period: %d events, %d tokens deleted", st.EventsDeleted, st.WaitTokensDeleted)
	}
	// Due now, but retention looks once an hour.
	k.c.Set(published.Add(keep + time.Minute))
	k.settle()
	if st := k.r.Stats(); st.EventsDeleted != 0 {
		t.Fatalf("between two looks: %d events deleted", st.EventsDeleted)
	}
	k.c.Set(published.Add(keep - time.Minute + time.Hour))
	k.settle()
	settled(t, k.r, "the two events and the used token deleted", func(s reaper.Stats) bool {
		return s.EventsDeleted == 2 && s.WaitTokensDeleted == 1
	})
	for _, id := range ids {
		if _, err := h.st.PublishedEventsGet(ctx, "default", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("event %s: %v", id, err)
		}
	}
	if ev := h.event(pending); ev.FannedOutAt != nil {
		t.Fatalf("the pending event: %+v", ev)
	}
	// The open token expires an hour after it was minted: it goes at the
	// next look after that.
	k.c.Set(published.Add(keep - time.Minute + 3*time.Hour))
	k.settle()
	settled(t, k.r, "the expired token deleted", func(s reaper.Stats) bool { return s.WaitTokensDeleted == 2 })
	if ev := h.event(pending); ev.FannedOutAt != nil {
		t.Fatalf("the pending event: %+v", ev)
	}
}

// KAGZI_EVENT_RETENTION is 0 or 2h to store.MaxKeep: a shorter period
// would let a Stripe delivery be replayed within its tolerance.
func TestEventRetentionBounds(t *testing.T) {
	t.Parallel()
	h := &harness{t: t, url: "postgres://unused"}
	for d, ok := range map[time.Duration]bool{0: true, 30 * day: true, store.MinKeepEvents: true, store.MaxKeep: true,
		time.Hour: false, -time.Hour: false, store.MaxKeep + day: false} {
		cfg := h.config(func(c *reaper.Config) { c.EventRetention = d })
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("KAGZI_EVENT_RETENTION %v: %v", d, err)
		}
	}
	if cfg := h.config(nil); cfg.EventRetention != store.DefaultKeepEvents {
		t.Errorf("default %v, want %v", cfg.EventRetention, store.DefaultKeepEvents)
	}
}
