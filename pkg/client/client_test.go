package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

type fixture struct {
	pool *pgxpool.Pool
	st   *store.Store
	cl   *client.Client
	ns   *testnats.Server
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool, _ := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	cl, err := client.NewFromStore(st, ns.Connect(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &fixture{pool: pool, st: st, cl: cl, ns: ns}
}

// finish claims and completes a run as a worker would, through the store.
func (f *fixture) finish(t *testing.T, id uuid.UUID, out string) {
	t.Helper()
	ctx := context.Background()
	c, err := f.st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != id {
		t.Fatalf("claim: %v %v", c, err)
	}
	if err := f.st.RunsComplete(ctx, store.Lease{Namespace: "default", RunID: id, Token: c[0].LeaseToken}, []byte(out)); err != nil {
		t.Fatal(err)
	}
}

// No test in this package may run in parallel with this one: it sets a
// package-level hook.
func TestResultWhenRunFinishesBetweenSubscribeAndCheck(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := f.cl.Start(ctx, "T", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No relay runs here: nobody will publish the finish event. The run
	// finishes after Wait subscribed and before it reads Postgres, so the
	// read must see it.
	client.SetAfterSubscribe(func(uuid.UUID) { f.finish(t, h.RunID, `"done"`) })
	defer client.SetAfterSubscribe(nil)
	var out string
	if err := h.Result(ctx, &out); err != nil || out != "done" {
		t.Fatalf("result %q %v", out, err)
	}
}

func TestResultArrivesByPush(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := f.cl.Start(ctx, "T", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subscribed := make(chan struct{})
	client.SetAfterSubscribe(func(uuid.UUID) { close(subscribed) })
	defer client.SetAfterSubscribe(nil)
	done := make(chan error, 1)
	var out string
	go func() { done <- h.Result(ctx, &out) }()
	<-subscribed
	// No relay runs: the finish event published here is what wakes Wait
	// if its first read saw the run still pending.
	f.finish(t, h.RunID, `"pushed"`)
	data, err := protocol.Encode(&protocol.RunFinished{Namespace: "default", RunID: h.RunID, Status: "COMPLETED"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ns.Connect(t).Publish(protocol.SubjectDone("default", h.RunID), data); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || out != "pushed" {
		t.Fatalf("result %q %v", out, err)
	}
}

func TestStartTxCommitsWithTheCaller(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	cl, err := client.NewFromStore(st, nil, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := cl.StartTx(ctx, tx, "T", map[string]int{"a": 1}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(ctx, h.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after rollback: %v, want ErrNotFound", err)
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err = cl.StartTx(ctx, tx, "T", map[string]int{"a": 1}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Get(ctx, h.RunID)
	if err != nil || r.Status != client.StatusPending || string(r.Input) != `{"a":1}` {
		t.Fatalf("after commit: %+v %v", r, err)
	}
}

func TestStartManyListGetCancel(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	cl, err := client.NewFromStore(store.New(pool, store.Options{}), nil, client.Options{Namespace: "shop", Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reqs := []client.StartRequest{
		{Type: "A", Input: 1, Options: client.StartOptions{ExternalID: "x"}},
		{Type: "A", Input: 2, Options: client.StartOptions{ExternalID: "x"}},
		{Type: "B", Input: 3, Options: client.StartOptions{Priority: 5}},
	}
	hs, err := cl.StartMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if hs[0].RunID != hs[1].RunID || !hs[0].Created || hs[1].Created {
		t.Fatalf("same external id in one batch: %+v %+v", hs[0], hs[1])
	}
	runs, next, err := cl.List(ctx, client.ListOptions{Limit: 1})
	if err != nil || len(runs) != 1 || next == "" {
		t.Fatalf("page 1: %d %q %v", len(runs), next, err)
	}
	more, next2, err := cl.List(ctx, client.ListOptions{Limit: 10, Cursor: next})
	if err != nil || len(more) != 1 || next2 != "" || more[0].ID == runs[0].ID {
		t.Fatalf("page 2: %d %q %v", len(more), next2, err)
	}
	if err := cl.Cancel(ctx, hs[2].RunID); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Get(ctx, hs[2].RunID)
	if err != nil || r.Status != client.StatusCancelled || r.Queue != "orders" || r.Priority != 5 {
		t.Fatalf("cancelled run: %+v %v", r, err)
	}
	if err := cl.Cancel(ctx, hs[2].RunID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second cancel: %v, want ErrConflict", err)
	}
	if _, err := cl.Start(ctx, "bad type", nil, client.StartOptions{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad type: %v", err)
	}
	if _, err := cl.Start(ctx, "A", func() {}, client.StartOptions{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("unencodable input: %v", err)
	}
	if _, err := client.NewFromStore(store.New(pool, store.Options{}), nil, client.Options{Namespace: "a.b"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad namespace: %v", err)
	}
}
