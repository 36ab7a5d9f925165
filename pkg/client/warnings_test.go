package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// A start of a type no live worker serves is accepted and says so in
// Handle.Warnings, in Start, StartTx and StartMany; RequireWorker refuses
// it instead, and a served type gets no warning.
func TestStartWarnsWhenNoWorkerServes(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	h, err := f.cl.Start(ctx, "Nobody", nil, client.StartOptions{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "no live worker serves Nobody on queue q") {
		t.Fatalf("warnings: %q", h.Warnings)
	}
	hs, err := f.cl.StartMany(ctx, []client.StartRequest{{Type: "Nobody", Options: client.StartOptions{Queue: "q"}}})
	if err != nil || len(hs) != 1 || len(hs[0].Warnings) != 1 {
		t.Fatalf("StartMany: %v %+v", err, hs)
	}
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	h, err = f.cl.StartTx(ctx, tx, "AlsoNobody", nil, client.StartOptions{Queue: "q"})
	if err != nil || len(h.Warnings) != 1 {
		t.Fatalf("StartTx: %v %+v", err, h)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the caller's transaction after a start with a warning: %v", err)
	}

	if _, err := f.st.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "default", Queue: "q",
		Types: []store.TypeVersion{{Type: "Served"}}, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if h, err = f.cl.Start(ctx, "Served", nil, client.StartOptions{Queue: "q"}); err != nil || len(h.Warnings) != 0 {
		t.Fatalf("a served type: %v %q", err, h.Warnings)
	}
}
