package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/services/dispatcher"
)

// A run of a type no live worker serves is accepted and waits, and says
// so: the client counts no serving worker, and the dispatcher's
// kagzi.queue.unserved gauge counts it (while a due run a busy worker
// serves counts only in the depth). A start that requires a worker is
// refused, creating nothing, through Start, StartTx and StartMany; once a
// worker registers the type, the waiting run completes and such a start
// is accepted.
func TestRunsNoWorkerServes(t *testing.T) {
	t.Parallel()
	g := newGated()
	e := start(t, opts{workers: -1})
	e.startWorker(worker.Config{MaxConcurrency: 1}, g.register)
	ctx := context.Background()

	// A second dispatcher replica with a meter of its own, to read the
	// gauges it exports.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	d := dispatcher.New(defaults[dispatcher.Config](t), dispatcher.Deps{MeterProvider: mp}, e.srv.Store, e.ns.Connect(t), nil)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	// Refused, and nothing created, whichever way it is started.
	require := client.StartOptions{RequireWorker: true}
	if _, err := e.cl.Start(ctx, "Lonely", nil, require); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("Start with no worker: %v, want ErrNoWorker", err)
	}
	if _, err := e.cl.StartMany(ctx, []client.StartRequest{{Type: "Gated"}, {Type: "Lonely", Options: require}}); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("StartMany with one unserved run: %v, want ErrNoWorker", err)
	}
	pool, err := store.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.StartTx(ctx, tx, "Lonely", nil, require); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("StartTx with no worker: %v, want ErrNoWorker", err)
	}
	_ = tx.Rollback(ctx)
	if _, err := e.cl.Start(ctx, "Gated", nil, client.StartOptions{RequireWorker: true, Version: "v9"}); !errors.Is(err, client.ErrNoWorker) {
		t.Fatalf("Start of a version no worker registered: %v, want ErrNoWorker", err)
	}
	if runs, _, err := e.cl.List(ctx, client.ListOptions{}); err != nil || len(runs) != 0 {
		t.Fatalf("refused starts created runs: %d %v", len(runs), err)
	}

	// Accepted without the option: it waits, and says so.
	lonely, err := e.cl.Start(ctx, "Lonely", nil, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.cl.WorkersServing(ctx, "", "Lonely", ""); err != nil || n != 0 {
		t.Fatalf("workers serving Lonely: %d %v", n, err)
	}
	// The Gated worker, once registered, is busy with one run and leaves a
	// second due: served, but waiting.
	waitUntil(t, 10*time.Second, "the Gated worker registered", func() bool {
		n, err := e.cl.WorkersServing(ctx, "", "Gated", "")
		return err == nil && n == 1
	})
	hs := []*client.Handle{}
	for i := 0; i < 2; i++ {
		h, err := e.cl.Start(ctx, "Gated", nil, require)
		if err != nil {
			t.Fatalf("Start of a served type with RequireWorker: %v", err)
		}
		hs = append(hs, h)
	}
	<-g.arrived
	depth, unserved := queueGauges(t, reader, "default", "default")
	if depth != 2 || unserved != 1 {
		t.Fatalf("queue default: depth %d, unserved %d; want 2 due (the Lonely run and a Gated one), 1 unserved", depth, unserved)
	}
	close(g.open)
	waitAll(t, hs, 30*time.Second)

	// A worker for Lonely comes: the waiting run completes, and starts
	// that require a worker are accepted.
	e.startWorker(worker.Config{}, func(w *worker.Worker) error {
		return worker.Register(w, "Lonely", func(ctx workflow.Context, _ any) (string, error) { return "served", nil })
	})
	if got, err := result[string](t, lonely, 30*time.Second); err != nil || got != "served" {
		t.Fatalf("the waiting run: %q %v", got, err)
	}
	waitUntil(t, 10*time.Second, "the Lonely worker registered", func() bool {
		n, err := e.cl.WorkersServing(ctx, "", "Lonely", "")
		return err == nil && n == 1
	})
	h, err := e.cl.Start(ctx, "Lonely", nil, require)
	if err != nil {
		t.Fatalf("Start with a worker: %v", err)
	}
	if _, err := result[string](t, h, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// queueGauges collects the kagzi.queue.depth and kagzi.queue.unserved
// gauges of one queue from reader.
func queueGauges(t *testing.T, reader *sdkmetric.ManualReader, ns, queue string) (depth, unserved int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok {
				continue
			}
			for _, dp := range g.DataPoints {
				n, _ := dp.Attributes.Value("namespace")
				q, _ := dp.Attributes.Value("queue")
				if n.AsString() != ns || q.AsString() != queue || dp.Attributes.Len() != 2 {
					continue
				}
				switch m.Name {
				case "kagzi.queue.depth":
					depth, found[m.Name] = dp.Value, true
				case "kagzi.queue.unserved":
					unserved, found[m.Name] = dp.Value, true
				}
			}
		}
	}
	if !found["kagzi.queue.depth"] || !found["kagzi.queue.unserved"] {
		t.Fatalf("gauges of %s/%s not exported: %+v", ns, queue, rm.ScopeMetrics)
	}
	return depth, unserved
}
