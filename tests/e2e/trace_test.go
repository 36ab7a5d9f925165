package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// One trace per run: the client's start span is the root; the dispatch
// span is its child, the execution attempt the dispatch's child, and each
// step a child of its attempt.
func TestOneTracePerRun(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, url := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	ns := testnats.Start(t)
	dcfg := dispatcherConfig(t, url, nil)
	d := dispatcher.New(dcfg, dispatcher.Deps{TracerProvider: tp}, st, ns.Connect(t), nil)
	relay := dispatcher.NewRelay(dcfg, dispatcher.RelayDeps{}, ns.Connect(t), nil)
	w, err := worker.New(worker.Config{TracerProvider: tp}, ns.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := threeSteps(newCounter())(w); err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface {
		Start(context.Context) error
		Stop()
	}{d, relay, w} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
	}
	cl, err := client.NewFromStore(st, ns.Connect(t), client.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	var hs []*client.Handle
	for i := 0; i < 3; i++ {
		h, err := cl.Start(ctx, "Three", i, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	waitAll(t, hs, 30*time.Second)
	// An attempt span ends when its execution returns, just after the
	// result was reported; stopping the worker waits for every execution.
	w.Stop()

	spans := rec.Ended()
	for _, h := range hs {
		id := h.RunID.String()
		var start sdktrace.ReadOnlySpan
		var attempts, steps, dispatches []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if !hasAttr(s, "kagzi.run_id", id) {
				continue
			}
			switch {
			case strings.HasPrefix(s.Name(), "kagzi.start"):
				start = s
			case strings.HasPrefix(s.Name(), "kagzi.attempt"):
				attempts = append(attempts, s)
			case strings.HasPrefix(s.Name(), "kagzi.step"):
				steps = append(steps, s)
			case strings.HasPrefix(s.Name(), "kagzi.dispatch"):
				dispatches = append(dispatches, s)
			}
		}
		// A delivery the worker refused (its request was renewed, or it
		// stalled under a loaded machine) is released and dispatched
		// again: another dispatch span of the same trace, which delivered
		// nothing.
		if start == nil || len(attempts) != 1 || len(steps) != 3 || len(dispatches) == 0 {
			t.Fatalf("run %s: start %v, %d attempts, %d steps, %d dispatches", id, start != nil, len(attempts), len(steps), len(dispatches))
		}
		trace := start.SpanContext().TraceID()
		for _, s := range append(append(attempts, steps...), dispatches...) {
			if s.SpanContext().TraceID() != trace {
				t.Fatalf("run %s: span %s in trace %s, want %s", id, s.Name(), s.SpanContext().TraceID(), trace)
			}
		}
		delivered := false
		for _, d := range dispatches {
			if d.Parent().SpanID() != start.SpanContext().SpanID() {
				t.Fatalf("run %s: dispatch's parent is not the start span", id)
			}
			delivered = delivered || attempts[0].Parent().SpanID() == d.SpanContext().SpanID()
		}
		if !delivered {
			t.Fatalf("run %s: attempt's parent is not a dispatch span of the run", id)
		}
		if len(dispatches) > 1 {
			t.Logf("run %s: dispatched %d times (a delivery refused and released)", id, len(dispatches))
		}
		for _, s := range steps {
			if s.Parent().SpanID() != attempts[0].SpanContext().SpanID() {
				t.Fatalf("run %s: step span %s is not under its attempt", id, s.Name())
			}
		}
	}
	// Different runs are different traces.
	traces := map[string]bool{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "kagzi.start") {
			traces[fmt.Sprint(s.SpanContext().TraceID())] = true
		}
	}
	if len(traces) != 3 {
		t.Fatalf("%d traces for 3 runs", len(traces))
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, a := range s.Attributes() {
		if string(a.Key) == key && a.Value.AsString() == value {
			return true
		}
	}
	return false
}
