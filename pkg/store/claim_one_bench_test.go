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
	worker := uuid.New()
	p := store.RunsClaimParams{Namespace: benchNamespace, Queue: "one", WorkerID: worker,
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: benchNamespace, Queue: "one", Type: "T", Input: []byte(`{"order":42}`)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		runs, _, err := s.RunsClaimStats(ctx, p)
		if err != nil || len(runs) != 1 {
			b.Fatalf("claim: %d runs, %v", len(runs), err)
		}
	}
}
