package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/testnats"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	nc := testnats.Start(t).Connect(t)
	w, err := worker.New(worker.Config{}, nc)
	must(t, err)
	c := w.Config()
	if c.Namespace != "default" || c.Queue != "default" || c.MaxConcurrency != 10 ||
		c.HeartbeatInterval != 2*time.Second || c.WaitTimeout != 30*time.Second ||
		c.Logger == nil || c.WorkerID == uuid.Nil || c.WorkerID.Version() != 7 || w.ID() != c.WorkerID {
		t.Fatalf("defaults %+v", c)
	}

	bad := []struct {
		cfg  worker.Config
		want string
	}{
		{worker.Config{Namespace: "a.b"}, "namespace"},
		{worker.Config{Queue: "q*"}, "queue"},
		{worker.Config{Queue: "with space"}, "queue"},
		{worker.Config{MaxConcurrency: -1}, "max concurrency"},
		{worker.Config{MaxConcurrency: 10001}, "max concurrency"},
		{worker.Config{WaitTimeout: 11 * time.Minute}, "wait timeout"},
		{worker.Config{HeartbeatInterval: -time.Second}, "heartbeat"},
		{worker.Config{DrainTimeout: -time.Second}, "drain timeout"},
		{worker.Config{ReportTimeout: -time.Second}, "report timeout"},
		{worker.Config{HeartbeatInterval: worker.MaxHeartbeatInterval + time.Second}, "heartbeat"},
		{worker.Config{DrainTimeout: worker.MaxDrainTimeout + time.Second}, "drain timeout"},
		{worker.Config{ReportTimeout: worker.MaxReportTimeout + time.Second}, "report timeout"},
		{worker.Config{MaxInlineRetry: worker.MaxInlineRetryWait + time.Second}, "above the maximum"},
		{worker.Config{Version: strings.Repeat("v", 201)}, "version"},
	}
	for _, tc := range bad {
		_, err := worker.New(tc.cfg, nc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %+v: error %v, want mention of %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := worker.New(worker.Config{Namespace: "a.b", Queue: "c>"}, nc); err == nil ||
		!strings.Contains(err.Error(), "namespace") || !strings.Contains(err.Error(), "queue") {
		t.Errorf("every invalid field must be reported: %v", err)
	}
	if _, err := worker.New(worker.Config{}, nil); err == nil {
		t.Error("nil connection accepted")
	}
}

func TestRegisterAndLifecycleErrors(t *testing.T) {
	t.Parallel()
	nc := testnats.Start(t).Connect(t)
	w, err := worker.New(worker.Config{}, nc)
	must(t, err)
	fn := func(ctx workflow.Context, in string) (string, error) { return in, nil }

	if err := w.Start(t.Context()); !errors.Is(err, worker.ErrNoTypes) {
		t.Fatalf("Start without types: %v", err)
	}
	must(t, worker.Register(w, "Echo", fn, worker.WithVersion("v1")))
	if err := worker.Register(w, "Echo", fn, worker.WithVersion("v1")); !errors.Is(err, worker.ErrDuplicateType) {
		t.Fatalf("duplicate: %v", err)
	}
	// One type at another version is fine.
	must(t, worker.Register(w, "Echo", fn, worker.WithVersion("v2")))
	if err := worker.Register(w, "bad.name", fn); err == nil {
		t.Fatal("invalid type name accepted")
	}
	if err := worker.Register(w, "Other", fn, worker.WithVersion("v 2")); err == nil {
		t.Fatal("invalid version accepted")
	}
	if err := worker.Register[string, string](w, "Nil", nil); err == nil {
		t.Fatal("nil function accepted")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	must(t, w.Start(ctx))
	if err := w.Start(ctx); !errors.Is(err, worker.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if err := worker.Register(w, "Late", fn); !errors.Is(err, worker.ErrStarted) {
		t.Fatalf("Register after Start: %v", err)
	}
	w.Stop()
	if err := w.Start(ctx); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}

	// Stop before Start marks the worker stopped.
	w2, err := worker.New(worker.Config{}, nc)
	must(t, err)
	w2.Stop()
	closed(t, w2.Done(), "Done of a never started worker")
	if err := worker.Register(w2, "Echo", fn); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("Register after Stop: %v", err)
	}
	if err := w2.Start(t.Context()); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}
