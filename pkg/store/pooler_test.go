package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/pgbouncer"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testpgbouncer"
)

// Two processes' pools through a PgBouncer in transaction mode with two
// server sessions, so every statement runs on a session another pool used
// before: Connect notices the pooler, whether it refuses the startup
// setting Connect sends directly (PgBouncer's default) or ignores it
// (ignore_startup_parameters), sends no setting it refuses, and prepares
// nothing on the shared sessions (pgx's default would fail with 42P05
// "prepared statement already exists" or 26000 "does not exist"); starts,
// claims, batches and transactions all work.
func TestConnectThroughPooler(t *testing.T) {
	t.Parallel()
	direct := testdb.New(t)
	for name, settings := range map[string][]string{
		"refusing": nil,
		"ignoring": {"ignore_startup_parameters = idle_in_transaction_session_timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := testpgbouncer.StartWith(t, pgbouncer.Options{Server: direct, PoolSize: 2, Settings: settings})
			pooled := testpgbouncer.URL(t, b, direct)
			var stores []*store.Store
			for i := 0; i < 2; i++ {
				pool, err := store.Connect(ctx, pooled)
				if err != nil {
					t.Fatalf("connect through the pooler: %v", err)
				}
				t.Cleanup(pool.Close)
				if m := pool.Config().ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheDescribe {
					t.Fatalf("query mode through the pooler: %v, want cache describe", m)
				}
				stores = append(stores, store.New(pool, store.Options{}))
			}
			const perStore, rounds = 4, 25
			var wg sync.WaitGroup
			errs := make(chan error, len(stores)*perStore)
			for si, s := range stores {
				for g := 0; g < perStore; g++ {
					wg.Add(1)
					go func(s *store.Store, q string) {
						defer wg.Done()
						errs <- poolerWork(ctx, s, q, rounds)
					}(s, fmt.Sprintf("%s-q%d-%d", name, si, g))
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// poolerWork starts, claims and completes rounds runs on queue q.
func poolerWork(ctx context.Context, s *store.Store, q string, rounds int) error {
	for i := 0; i < rounds; i++ {
		if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: q, Type: "T"}); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		claimed, err := s.RunsClaim(ctx, store.RunsClaimParams{Namespace: "ns", Queue: q, WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
		if err != nil || len(claimed) != 1 {
			return fmt.Errorf("claim: %d claimed, %v", len(claimed), err)
		}
		err = s.InTx(ctx, func(tx *store.Store) error {
			_, _, err := tx.LockSessions(ctx, int64(i))
			return err
		})
		if err != nil {
			return fmt.Errorf("transaction: %w", err)
		}
	}
	return nil
}

// Through a pooler the idle-in-transaction bound cannot be a setting of
// the (shared) session: each of the store's transactions sets it for
// itself, and it does not outlive the transaction on the server session
// that others get next.
func TestIdleBoundPerTransactionThroughPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testdb.New(t)
	b := testpgbouncer.StartWith(t, pgbouncer.Options{Server: direct, PoolSize: 1})
	pool, err := store.Connect(ctx, testpgbouncer.URL(t, b, direct))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool, store.Options{})
	var inTx string
	if err := s.InTx(ctx, func(tx *store.Store) error {
		inTx, err = tx.Exec(ctx, "SHOW idle_in_transaction_session_timeout")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := store.IdleInTransactionTimeout.String(); inTx != want {
		t.Errorf("inside a transaction: idle_in_transaction_session_timeout %s, want %s", inTx, want)
	}
	after, err := s.Exec(ctx, "SHOW idle_in_transaction_session_timeout")
	if err != nil {
		t.Fatal(err)
	}
	if after != "0" {
		t.Errorf("after the transaction, on the shared session: %s, want the server's 0", after)
	}

	// Directly, the session carries it, as before.
	dpool, err := store.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dpool.Close)
	if v, err := store.New(dpool, store.Options{}).Exec(ctx, "SHOW idle_in_transaction_session_timeout"); err != nil || v != "5s" {
		t.Errorf("direct session: %q %v, want 5s", v, err)
	}
	if m := dpool.Config().ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheStatement {
		t.Errorf("direct query mode %v, want pgx's default (cache statement)", m)
	}
}

// What needs a session refuses a pooler with ErrSessionPooled, whichever
// way the pooler shows: refusing the dedicated connection's settings
// (PgBouncer's default), or accepting and ignoring them
// (ignore_startup_parameters), where the server process answering is not
// the one announced. The same URL, direct, passes.
func TestSessionRefusesPooler(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct := testdb.New(t)
	if err := pgsession.Check(ctx, direct); err != nil {
		t.Fatalf("direct: %v", err)
	}
	strict := testpgbouncer.Start(t, direct)
	lenient := testpgbouncer.StartWith(t, pgbouncer.Options{Server: direct, Settings: []string{
		"ignore_startup_parameters = tcp_keepalives_idle,tcp_keepalives_interval,tcp_keepalives_count,tcp_user_timeout"}})
	for name, b := range map[string]*pgbouncer.Bouncer{"refusing": strict, "ignoring": lenient} {
		url := testpgbouncer.URL(t, b, direct)
		if err := pgsession.Check(ctx, url); !errors.Is(err, store.ErrSessionPooled) {
			t.Errorf("%s pooler: Check: %v, want ErrSessionPooled", name, err)
		}
		connect := pgsession.LockedConnect(url, 42)
		if conn, err := connect(ctx); !errors.Is(err, store.ErrSessionPooled) {
			if conn != nil {
				_ = conn.Close(ctx)
			}
			t.Errorf("%s pooler: locked connect: %v, want ErrSessionPooled", name, err)
		}
		if _, err := migrate.Up(ctx, url); !errors.Is(err, store.ErrSessionPooled) {
			t.Errorf("%s pooler: migrate: %v, want ErrSessionPooled", name, err)
		}
	}
	// Nothing took the lock through the pooler.
	pool, err := store.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if held, waiting, err := store.New(pool, store.Options{}).LockSessions(ctx, 42); err != nil || held+waiting != 0 {
		t.Errorf("lock 42: held %d, waiting %d, %v; want none", held, waiting, err)
	}
}

// A database that does not exist is one to create, whether Postgres says
// so (3D000) or PgBouncer does (08P01).
func TestDatabaseMissingThroughPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testdb.New(t)
	b := testpgbouncer.Start(t, direct)
	missing, err := dbadmin.DatabaseURL(direct, "kagzi_missing_"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	for name, url := range map[string]string{"direct": missing, "pooler": testpgbouncer.URL(t, b, missing)} {
		_, err := store.Connect(ctx, url)
		if err == nil || !store.IsDatabaseMissing(err) {
			t.Errorf("%s: connect to a missing database: %v, want one IsDatabaseMissing reports", name, err)
		}
	}
	if store.IsDatabaseMissing(errors.New("database x does not exist")) {
		t.Error("a plain error taken for a missing database")
	}
}
