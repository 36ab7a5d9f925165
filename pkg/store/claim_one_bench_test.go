package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// BenchmarkClaimOne is the claim a dispatcher makes at a low start rate:
// one run due, claimed alone. Its time is the claim's share of dispatch
// latency (planning, execution, commit), measured without the services:
//
//	go test -run '^$' -bench BenchmarkClaimOne -benchtime 3000x ./pkg/store/
func BenchmarkClaimOne(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	p := claimOneParams(uuid.New())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		createOneUntimed(ctx, b, s)
		runs, _, err := s.RunsClaimStats(ctx, p)
		if err != nil || len(runs) != 1 {
			b.Fatalf("claim: %d runs, %v", len(runs), err)
		}
	}
}

// oneQueue is the queue of the one-run claim benchmarks.
const oneQueue = "one"

// claimOneParams is the claim by worker of one due run of oneQueue.
func claimOneParams(worker uuid.UUID) store.RunsClaimParams {
	return store.RunsClaimParams{Namespace: benchNamespace, Queue: oneQueue, WorkerID: worker,
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute}
}

// createOneUntimed creates one due run of oneQueue, with the timer
// stopped.
func createOneUntimed(ctx context.Context, b *testing.B, s *store.Store) store.Run {
	b.StopTimer()
	defer b.StartTimer()
	run, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: benchNamespace, Queue: oneQueue, Type: "T", Input: []byte(`{"order":42}`)})
	if err != nil {
		b.Fatal(err)
	}
	return run
}
