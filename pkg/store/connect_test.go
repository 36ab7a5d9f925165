package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The pools Connect opens end a session idle inside a transaction (a
// frozen process's) after IdleInTransactionTimeout, and a URL may say
// otherwise.
func TestConnectBoundsIdleTransactions(t *testing.T) {
	t.Parallel()
	_, url := testdb.Pool(t)
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{url, "5s"},
		{url + "&idle_in_transaction_session_timeout=700", "700ms"},
	} {
		pool, err := store.Connect(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got)
		pool.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: idle_in_transaction_session_timeout %q (%v), want %q", c.url, got, err, c.want)
		}
	}
}

// A pool traced by a stmtcount.Tally counts single statements,
// transactions and batches.
func TestConnectTracedTally(t *testing.T) {
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
