package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

func TestStartDebouncedMergesAndCounts(t *testing.T) {
	pool, _ := testdb.Pool(t)
	st := store.New(pool, store.Options{})
	reader := sdkmetric.NewManualReader()
	cl, err := client.NewFromStore(st, testnats.Start(t).Connect(t),
		client.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	d := &client.Debounce{Key: "k", Window: time.Hour}
	first, err := cl.Start(ctx, "T", "a", client.StartOptions{Debounce: d})
	if err != nil || !first.Created {
		t.Fatalf("first start: %v created=%v", err, first != nil && first.Created)
	}
	hs, err := cl.StartMany(ctx, []client.StartRequest{
		{Type: "T", Input: "b", Options: client.StartOptions{Debounce: d}},
		{Type: "T", Input: "c", Options: client.StartOptions{Debounce: d}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Created || h.RunID != first.RunID {
			t.Fatalf("start many: run %s created=%v, want merged into %s", h.RunID, h.Created, first.RunID)
		}
	}
	r, err := cl.Get(ctx, first.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Input) != `"c"` || r.DebounceKey != "k" || r.DebounceStarts != 3 {
		t.Fatalf("run input %s key %q starts %d, want \"c\", k, 3", r.Input, r.DebounceKey, r.DebounceStarts)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					counts[m.Name] += dp.Value
					if _, ok := dp.Attributes.Value("debounce_key"); ok {
						t.Fatalf("%s has the debounce key as a label", m.Name)
					}
				}
			}
		}
	}
	if counts["kagzi.runs.started"] != 1 || counts["kagzi.runs.debounced"] != 2 {
		t.Fatalf("counters %v, want 1 started and 2 debounced", counts)
	}
}

func TestStartIDReuseErrorIsTyped(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	h, err := f.cl.Start(ctx, "T", 1, client.StartOptions{ExternalID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	f.finish(t, h.RunID, `"done"`)
	_, err = f.cl.Start(ctx, "T", 1, client.StartOptions{ExternalID: "order-1", IDReusePolicy: client.AllowDuplicateFailedOnly})
	var re *client.IDReuseError
	if !errors.As(err, &re) || !errors.Is(err, client.ErrIDReused) || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("got %v, want a *client.IDReuseError", err)
	}
	if re.ExistingRunID != h.RunID || re.Status != client.StatusCompleted || re.Policy != client.AllowDuplicateFailedOnly {
		t.Fatalf("error %+v", re)
	}
	_, err = f.cl.StartMany(ctx, []client.StartRequest{{Type: "T", Options: client.StartOptions{ExternalID: "order-1",
		IDReusePolicy: client.RejectDuplicate}}})
	if !errors.As(err, &re) || re.Policy != client.RejectDuplicate {
		t.Fatalf("start many: got %v, want a *client.IDReuseError", err)
	}
	if _, err := f.cl.Start(ctx, "T", 1, client.StartOptions{ExternalID: "order-1", IDReusePolicy: "sometimes"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("unknown policy: %v", err)
	}
	if _, err := client.ParseIDReusePolicy("never"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("parse: %v", err)
	}
}
