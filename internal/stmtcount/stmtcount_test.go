package stmtcount_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

func TestTallyConnectTraced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tally := stmtcount.NewTally()
	pool, err := store.ConnectTraced(ctx, testdb.New(t), tally)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool, store.Options{})

	// The tally sees single statements, transactions and batches.
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StepsRecordMany(ctx, []store.StepsRecordParams{
		{Lease: store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}, StepID: "a", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
		{Lease: store.Lease{Namespace: "ns", RunID: uuid.New(), Token: 1}, StepID: "b", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *store.Store) error { return tx.Ping(ctx) }); err != nil {
		t.Fatal(err)
	}
	var steps, total int64
	snap := tally.Snapshot()
	for sql, n := range snap {
		total += n
		if strings.Contains(sql, "INSERT INTO kagzi.step_runs") {
			steps += n
		}
	}
	if steps < 2 || snap["begin"] != 1 || snap["commit"] != 1 || snap["SELECT 1"] != 1 || total < 6 {
		t.Fatalf("tally %v", snap)
	}
}
