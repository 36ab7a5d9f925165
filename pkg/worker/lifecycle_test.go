package worker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// TestDrainRequestDrainsAsStopDoes: a drain the engine asks for
// (client.DrainWorker) lets the run in flight finish, deregisters once and
// stops the worker, however often it is asked.
func TestDrainRequestDrainsAsStopDoes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	d, w := start(t, worker.Config{MaxConcurrency: 1, DrainTimeout: waitLimit, HeartbeatInterval: time.Hour}, func(w *worker.Worker) {
		must(t, worker.Register(w, "Slow", func(ctx workflow.Context, _ struct{}) (string, error) {
			close(started)
			<-release
			return "done", nil
		}))
	})
	req := d.nextRequest(t)
	run := newRun(t, "Slow", nil)
	d.deliver(t, req, req.Seq, run)
	closed(t, started, "run start")

	for range 2 {
		d.sendCancel(t, &protocol.Cancel{Namespace: "default", WorkerID: w.ID(), Drain: true})
	}
	for {
		hb := recv(t, d.heartbeats, "draining heartbeat")
		if !hb.Draining {
			continue
		}
		if !sameIDs(hb.Runs, []uuid.UUID{run.RunID}) {
			t.Fatalf("drain heartbeat %+v", hb)
		}
		break
	}
	select {
	case <-w.Done():
		t.Fatal("the worker stopped with a run in flight")
	default:
	}
	close(release)
	closed(t, w.Done(), "Done after the drain")
	if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted || it.RunID != run.RunID {
		t.Fatalf("want the run completed, got %+v", it)
	}
	recv(t, d.deregs, "deregister")
	if err := w.Start(t.Context()); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("Start after a drain: %v", err)
	}
	w.Stop()
	select {
	case dr := <-d.deregs:
		t.Fatalf("deregistered twice: %+v", dr)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestSecondStartIsLifecycleErrStarted: the worker's second Start fails
// as every component's does.
func TestSecondStartIsLifecycleErrStarted(t *testing.T) {
	t.Parallel()
	_, w := start(t, worker.Config{}, func(w *worker.Worker) {
		must(t, worker.Register(w, "X", func(ctx workflow.Context, _ struct{}) (int, error) { return 1, nil }))
	})
	err := w.Start(t.Context())
	if !errors.Is(err, worker.ErrStarted) || !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
}
