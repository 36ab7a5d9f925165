package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestSendEventErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	h, err := f.cl.Start(ctx, "T", nil, client.StartOptions{ExternalID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := f.cl.SendEvent(ctx, h.RunID, "paid", map[string]int{"amount": 5})
	if err != nil || ev.RunID != h.RunID || string(ev.Payload) != `{"amount":5}` || ev.Woken {
		t.Fatalf("send: %+v %v", ev, err)
	}
	if ev, err := f.cl.SendEventByExternalID(ctx, "order-1", "shipped", nil); err != nil || ev.RunID != h.RunID || string(ev.Payload) != "null" {
		t.Fatalf("send by external id: %+v %v", ev, err)
	}
	if _, err := f.cl.SendEvent(ctx, uuid.New(), "paid", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if _, err := f.cl.SendEvent(ctx, h.RunID, "a b", nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := f.cl.SendEvent(ctx, h.RunID, "x", func() {}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("payload that does not encode: %v", err)
	}
	f.finish(t, h.RunID, "1")
	if _, err := f.cl.SendEvent(ctx, h.RunID, "paid", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finished run: %v", err)
	}
	if _, err := f.cl.SendEventByExternalID(ctx, "order-1", "paid", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finished run by external id: %v", err)
	}
}

func TestRetryAndConcurrencyLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	h, err := f.cl.Start(ctx, "T", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cl.Retry(ctx, h.RunID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("retry of a pending run: %v", err)
	}
	c, err := f.st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if err := f.st.RunsFail(ctx, store.Lease{Namespace: "default", RunID: h.RunID, Token: c[0].LeaseToken}, "boom"); err != nil {
		t.Fatal(err)
	}
	failed, _, err := f.cl.List(ctx, client.ListOptions{Statuses: []client.RunStatus{client.StatusFailed}})
	if err != nil || len(failed) != 1 || failed[0].ID != h.RunID {
		t.Fatalf("dead letters: %v %v", failed, err)
	}
	r, err := f.cl.Retry(ctx, h.RunID)
	if err != nil || r.Status != client.StatusPending || r.Attempts != 0 || r.Error != "" {
		t.Fatalf("retry: %+v %v", r, err)
	}
	l, err := f.cl.SetConcurrencyLimit(ctx, "", "T", 2)
	if err != nil || l.Queue != "default" || l.MaxRunning != 2 {
		t.Fatalf("set limit: %+v %v", l, err)
	}
	if ls, err := f.cl.ConcurrencyLimits(ctx); err != nil || len(ls) != 1 {
		t.Fatalf("limits: %+v %v", ls, err)
	}
	if err := f.cl.RemoveConcurrencyLimit(ctx, "", "T"); err != nil {
		t.Fatal(err)
	}
	if err := f.cl.RemoveConcurrencyLimit(ctx, "", "T"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
}
