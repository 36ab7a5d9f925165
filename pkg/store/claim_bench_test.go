package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The claim benchmarks. `make bench-store` runs both (the pattern
// BenchmarkClaimComplete matches them):
//
//	go test -run '^$' -bench BenchmarkClaimComplete -benchtime 1x ./pkg/store/
//
// How the work is done, so the figures can be read: one dispatcher
// goroutine claims batches of benchClaimBatch (RunsClaim, one statement
// each) and hands the runs to benchCompleters goroutines, which complete
// them (RunsComplete), as workers reporting through a dispatcher would. The
// hand-off channel holds one batch, so the claimer runs at most about one
// batch ahead of the completers (like a worker's credits). Completion comes
// in two modes (sub-benchmarks of BenchmarkClaimComplete):
//
//   - commit=each: every RunsComplete is its own statement and commit;
//   - commit=batched: a completer takes whatever reports are waiting (up
//     to benchClaimBatch) and applies them with one RunsComplete each
//     inside one transaction (InTx), as a dispatcher batching reports does.
//
// rows/s is runs claimed and completed per second of wall time;
// claim-rows/s is runs claimed per second spent inside RunsClaim calls.
const (
	benchNamespace   = "bench"
	benchRuns        = 100_000
	benchCreateChunk = 5_000
	benchClaimBatch  = 100
	benchCompleters  = 8
	benchFinished    = 1_000_000
	benchDueWithOld  = 1_000
)

// benchStore opens a store on a fresh database with a pool large enough
// for the claimer and the completers.
func benchStore(b *testing.B) (*store.Store, *pgxpool.Pool) {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.New(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchCompleters + 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return store.New(pool, store.Options{}), pool
}

// createDue creates n due runs in ns/queue with RunsCreateMany in chunks.
func createDue(ctx context.Context, b *testing.B, s *store.Store, queue string, n int) {
	b.Helper()
	for done := 0; done < n; {
		k := min(benchCreateChunk, n-done)
		ps := make([]store.RunsCreateParams, k)
		for i := range ps {
			ps[i] = store.RunsCreateParams{Namespace: benchNamespace, Queue: queue, Type: "T", Input: []byte(`{"order":42}`)}
		}
		res, err := s.RunsCreateMany(ctx, ps)
		if err != nil {
			b.Fatalf("create runs: %v", err)
		}
		if len(res) != k {
			b.Fatalf("created %d runs, want %d", len(res), k)
		}
		done += k
	}
}

// claimAndComplete claims every due run of ns/queue in batches and
// completes each, returning how many and the time spent in RunsClaim.
func claimAndComplete(ctx context.Context, b *testing.B, s *store.Store, queue string, batched bool) (int64, time.Duration) {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan store.Lease, benchClaimBatch)
	var completed atomic.Int64
	var (
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
		cancel()
	}
	var wg sync.WaitGroup
	for range benchCompleters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			output := []byte(`"ok"`)
			if !batched {
				for l := range work {
					if err := s.RunsComplete(ctx, l, output); err != nil {
						fail(err)
						return
					}
					completed.Add(1)
				}
				return
			}
			leases := make([]store.Lease, 0, benchClaimBatch)
			for l := range work {
				leases = append(leases[:0], l)
			more:
				for len(leases) < benchClaimBatch {
					select {
					case l, ok := <-work:
						if !ok {
							break more
						}
						leases = append(leases, l)
					default:
						break more
					}
				}
				err := s.InTx(ctx, func(tx *store.Store) error {
					for _, l := range leases {
						if err := tx.RunsComplete(ctx, l, output); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					fail(err)
					return
				}
				completed.Add(int64(len(leases)))
			}
		}()
	}
	var claimTime time.Duration
	var claimed int64
	p := store.RunsClaimParams{Namespace: benchNamespace, Queue: queue, WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: benchClaimBatch, Lease: 5 * time.Minute}
claim:
	for {
		t0 := time.Now()
		batch, err := s.RunsClaim(ctx, p)
		claimTime += time.Since(t0)
		if err != nil {
			fail(err)
			break
		}
		if len(batch) == 0 {
			break
		}
		claimed += int64(len(batch))
		for _, c := range batch {
			select {
			case work <- store.Lease{Namespace: c.Namespace, RunID: c.ID, Token: c.LeaseToken}:
			case <-ctx.Done():
				break claim
			}
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("claim and complete: %v", firstErr)
	}
	if n := completed.Load(); n != claimed {
		b.Fatalf("claimed %d runs but completed %d", claimed, n)
	}
	return claimed, claimTime
}

func checkAllCompleted(ctx context.Context, b *testing.B, s *store.Store, want int64) {
	b.Helper()
	cnt, err := s.RunsCount(ctx, benchNamespace)
	if err != nil {
		b.Fatal(err)
	}
	if cnt[store.StatusCompleted] != want || cnt[store.StatusPending] != 0 || cnt[store.StatusRunning] != 0 {
		b.Fatalf("after the run: %v, want %d completed", cnt, want)
	}
}

// BenchmarkClaimComplete: 100,000 due runs, claimed in batches of 100 and
// completed, one commit per run or per batch of reports.
func BenchmarkClaimComplete(b *testing.B) {
	b.Run("commit=each", func(b *testing.B) { benchClaimComplete(b, false) })
	b.Run("commit=batched", func(b *testing.B) { benchClaimComplete(b, true) })
}

func benchClaimComplete(b *testing.B, batched bool) {
	ctx := context.Background()
	s, _ := benchStore(b)
	var total int64
	var elapsed, claimTime, createTime time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		queue := fmt.Sprintf("q%d", i)
		t0 := time.Now()
		createDue(ctx, b, s, queue, benchRuns)
		createTime += time.Since(t0)
		b.StartTimer()

		start := time.Now()
		n, ct := claimAndComplete(ctx, b, s, queue, batched)
		elapsed += time.Since(start)
		claimTime += ct
		total += n

		b.StopTimer()
		if n != benchRuns {
			b.Fatalf("claimed %d runs, want %d", n, benchRuns)
		}
		checkAllCompleted(ctx, b, s, total)
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(total)/claimTime.Seconds(), "claim-rows/s")
	b.ReportMetric(float64(total)/createTime.Seconds(), "create-rows/s")
}

// BenchmarkClaimCompleteWithFinishedRuns: the claim with 1,000,000 finished
// runs in the same namespace and queue must stay on the partial claim index
// (checked on the EXPLAIN ANALYZE of the exact claim statement) and keep
// its speed. Completion is commit=each.
func BenchmarkClaimCompleteWithFinishedRuns(b *testing.B) {
	ctx := context.Background()
	s, pool := benchStore(b)
	const queue = "q"
	t0 := time.Now()
	insertFinished(ctx, b, pool, benchNamespace, queue, benchFinished) // and ANALYZE
	b.Logf("inserted and analyzed %d finished runs in %v", benchFinished, time.Since(t0).Round(time.Millisecond))
	b.ResetTimer()

	var total int64
	var elapsed, claimTime time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		createDue(ctx, b, s, queue, benchDueWithOld)
		plan, err := s.RunsClaimExplain(ctx, store.RunsClaimParams{Namespace: benchNamespace, Queue: queue, WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, Limit: benchClaimBatch, Lease: 5 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		// b.Log output of benchmarks is cut to a few lines; the full plan
		// goes to stdout too, so `make bench-store` shows it.
		b.Logf("claim plan with %d finished runs:\n%s", benchFinished, plan)
		fmt.Printf("--- claim plan with %d finished runs and %d due:\n%s\n", benchFinished, benchDueWithOld, plan)
		checkClaimPlan(b, plan)
		if b.Failed() {
			b.FailNow()
		}
		b.StartTimer()

		start := time.Now()
		n, ct := claimAndComplete(ctx, b, s, queue, false)
		elapsed += time.Since(start)
		claimTime += ct
		total += n

		b.StopTimer()
		if n != benchDueWithOld {
			b.Fatalf("claimed %d runs, want %d", n, benchDueWithOld)
		}
		checkAllCompleted(ctx, b, s, benchFinished+total)
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(total)/claimTime.Seconds(), "claim-rows/s")
}
