package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A worker started before any dispatcher gets work as soon as one comes
// up, not after its request's renewal time.
func TestWorkerStartedBeforeDispatcher(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := worker.New(worker.Config{WaitTimeout: time.Minute}, ns.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := threeSteps(newCounter())(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	srv, err := devserver.Start(ctx, devserver.Options{DatabaseURL: testdb.New(t), NATSURL: ns.URL(), Workers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cl, err := client.NewFromStore(srv.Store, ns.Connect(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h, err := cl.Start(ctx, "Three", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := h.Result(rctx, nil); err != nil {
		t.Fatalf("a worker that asked before the dispatcher existed got no work within 10 s (its renewal is 1 min): %v", err)
	}
	t.Logf("completed %v after start", time.Since(start))
}
