package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A client made from a pool leaves the pool to its owner; one made by
// Connect owns and closes its own. Its errors are its own, and a run that
// continued as new is followed by Result and found by its external id.
func TestConnectNewFromPoolAndContinuation(t *testing.T) {
	pool, url := testdb.Pool(t)
	ns := testnats.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cl, err := client.NewFromPool(pool, ns.Connect(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the application's pool was closed with the client: %v", err)
	}
	if _, err := client.NewFromPool(nil, nil, client.Options{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("nil pool: %v", err)
	}
	if _, err := client.Connect(ctx, "postgres://127.0.0.1:1/x?connect_timeout=1", nil, client.Options{}); err == nil {
		t.Fatal("Connect to nothing succeeded")
	}

	cl, err = client.Connect(ctx, url, ns.Connect(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Get(ctx, uuid.New()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if err := cl.Cancel(ctx, uuid.New()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("cancel of an unknown run: %v", err)
	}

	sc, err := client.ScheduleWorkflow(ctx, cl, workflow.New[int, string]("T"), 7, client.ScheduleOptions{Cron: "0 0 1 1 *"})
	if err != nil || sc.Type != "T" {
		t.Fatalf("typed schedule: %+v %v", sc, err)
	}
	if err := cl.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	h, err := cl.Start(ctx, "T", 1, client.StartOptions{ExternalID: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	// A worker's part, through the store: continue as new, then complete.
	st := store.New(pool, store.Options{})
	claim := func(want uuid.UUID) store.Lease {
		t.Helper()
		c, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
		if err != nil || len(c) != 1 || c[0].ID != want {
			t.Fatalf("claim: %v %v", c, err)
		}
		return store.Lease{Namespace: "default", RunID: want, Token: c[0].LeaseToken}
	}
	next := protocol.ContinuedRunID(h.RunID)
	if _, err := st.RunsContinueAsNew(ctx, claim(h.RunID), next, []byte(`2`), nil); err != nil {
		t.Fatal(err)
	}
	if r, err := cl.GetByExternalID(ctx, "chain"); err != nil || r.ID != next || string(r.Input) != "2" {
		t.Fatalf("by external id: %+v %v", r, err)
	}
	if err := st.RunsComplete(ctx, claim(next), []byte(`"done"`)); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := h.Result(ctx, &out); err != nil || out != "done" {
		t.Fatalf("result through the continuation: %q %v", out, err)
	}
}
