package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// A worker whose hostname is as long as the SDK allows is registered by the
// reaper and its leases are extended: the SDK, the protocol and the store
// state one hostname limit. One byte more is refused by the SDK, before any
// message is sent.
func TestLongestHostnameIsServed(t *testing.T) {
	t.Parallel()
	inStep := make(chan struct{}, 1)
	release := make(chan struct{})
	register := func(w *worker.Worker) error {
		return worker.Register(w, "Holds", func(ctx workflow.Context, _ struct{}) (int, error) {
			return workflow.Step(ctx, "hold", func(context.Context) (int, error) {
				inStep <- struct{}{}
				<-release
				return 1, nil
			})
		})
	}
	e := start(t, opts{workers: -1})
	host := strings.Repeat("h", protocol.MaxHostnameLen)
	w := e.startWorker(worker.Config{Queue: "long-host", Hostname: host}, register)
	if _, err := worker.New(worker.Config{Queue: "long-host", Hostname: host + "h"}, e.nc); err == nil {
		t.Fatal("the SDK accepted a hostname over the limit")
	}
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Holds", nil, client.StartOptions{Queue: "long-host"})
	if err != nil {
		t.Fatal(err)
	}
	<-inStep
	claimed, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// The reaper's next flushes extend the lease of the run the worker
	// lists in its heartbeats.
	waitUntil(t, 20*time.Second, fmt.Sprintf("the lease of a run held by a worker with a %d-byte hostname to be extended", len(host)), func() bool {
		r, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return r.LeaseExpiresAt.After(*claimed.LeaseExpiresAt)
	})
	reg, err := e.srv.Store.WorkersGet(ctx, "default", w.ID())
	if err != nil || reg.Hostname != host || reg.Status != store.WorkerOnline {
		t.Fatalf("registration: %+v %v", reg, err)
	}
	close(release)
	if n, err := result[int](t, h, 30*time.Second); err != nil || n != 1 {
		t.Fatalf("run: %d %v", n, err)
	}
}

// Every edge applies the same bounds: a value at a limit passes the SDK's
// own checks, the protocol's decoder, the client and the store; one past it
// is refused by each with a clear error.
func TestEdgesAgreeOnLimits(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1})
	ctx := context.Background()
	type edges map[string]error
	check := func(what string, ok bool, es edges) {
		t.Helper()
		for edge, err := range es {
			if (err == nil) != ok {
				t.Errorf("%s: %s: %v", what, edge, err)
			}
			if err != nil && edge == "store" && !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("%s: store: %v is not ErrInvalidArgument", what, err)
			}
		}
	}
	for _, n := range []int{protocol.MaxNameLen, protocol.MaxNameLen + 1} {
		ok, q := n <= protocol.MaxNameLen, strings.Repeat("q", n)
		_, sdkErr := worker.New(worker.Config{Queue: q}, e.nc)
		_, clErr := e.cl.Start(ctx, "T", nil, client.StartOptions{Queue: q})
		_, _, stErr := e.srv.Store.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: q, Type: "T"})
		check(fmt.Sprintf("%d-byte queue", n), ok, edges{"worker SDK": sdkErr, "client": clErr, "store": stErr,
			"protocol": (&protocol.WorkRequest{WorkerID: uuid.New(), Namespace: "default", Queue: q, Credits: 1,
				Types: []protocol.TypeVersion{{Type: "T"}}}).Validate()})
	}
	for _, n := range []int{protocol.MaxHostnameLen, protocol.MaxHostnameLen + 1} {
		ok, host := n <= protocol.MaxHostnameLen, strings.Repeat("h", n)
		_, sdkErr := worker.New(worker.Config{Hostname: host}, e.nc)
		_, stErr := e.srv.Store.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "default",
			Queue: "default", Hostname: host, MaxConcurrency: 1, Types: []store.TypeVersion{{Type: "T"}}})
		check(fmt.Sprintf("%d-byte hostname", n), ok, edges{"worker SDK": sdkErr, "store": stErr,
			"protocol": (&protocol.WorkerRegister{WorkerID: uuid.New(), Namespace: "default", Queue: "default",
				Hostname: host, MaxConcurrency: 1, Types: []protocol.TypeVersion{{Type: "T"}}}).Validate()})
	}
	for _, n := range []int{protocol.MaxLabels, protocol.MaxLabels + 1} {
		labels := map[string]string{}
		for i := 0; i < n; i++ {
			labels[fmt.Sprintf("k%d", i)] = strings.Repeat("v", protocol.MaxNameLen)
		}
		_, sdkErr := worker.New(worker.Config{Labels: labels}, e.nc)
		_, stErr := e.srv.Store.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "default",
			Queue: "default", Labels: labels, MaxConcurrency: 1, Types: []store.TypeVersion{{Type: "T"}}})
		check(fmt.Sprintf("%d labels", n), n <= protocol.MaxLabels, edges{"worker SDK": sdkErr, "store": stErr,
			"protocol": (&protocol.WorkerRegister{WorkerID: uuid.New(), Namespace: "default", Queue: "default",
				Labels: labels, MaxConcurrency: 1, Types: []protocol.TypeVersion{{Type: "T"}}}).Validate()})
	}
}
