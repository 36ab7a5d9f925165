package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
	"github.com/kagzi/kagzi/pkg/store/internal/opsstore"
	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
	"github.com/kagzi/kagzi/pkg/store/internal/schedstore"
	"github.com/kagzi/kagzi/pkg/store/internal/startbatch"
	"github.com/kagzi/kagzi/pkg/store/internal/tokenstore"
)

// Store is the repository over one executor (a pool or a transaction).
// It is safe for concurrent use when it wraps a pool.
type Store struct {
	h core.Handle
	runsPart
	opsPart
	schedPart
	tokensPart
	startPart
}

// The parts of a Store, embedded under unexported names so that their
// methods are the Store's and the parts themselves are not.
type (
	runsPart   = runstore.Runs
	opsPart    = opsstore.Ops
	schedPart  = schedstore.Schedules
	tokensPart = tokenstore.Tokens
)

// New returns a Store over db (usually a *pgxpool.Pool).
func New(db DBTX, opts Options) *Store {
	s := &Store{h: core.Handle{DB: db, Opts: opts, Settings: &settingsCache{}}}
	// A pool whose sessions carry no bound on idle transactions (one
	// through a pooler, or one the caller made) gets it per transaction.
	if p, ok := db.(*pgxpool.Pool); ok {
		if _, set := p.Config().ConnConfig.RuntimeParams[idleParam]; !set {
			s.h.Begin = func(ctx context.Context) (pgx.Tx, error) {
				return p.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginBounded})
			}
		}
	}
	s.wire()
	return s
}

// wire gives every part of s its handle: they are made once, here and in
// WithTx, not per call.
func (s *Store) wire() {
	s.runsPart = runstore.New(s.h)
	s.opsPart = opsstore.New(s.h)
	s.schedPart = schedstore.New(s.h)
	s.tokensPart = tokenstore.New(s.h)
	s.startPart = startbatch.New(s.h)
}

// Connect opens a pool for url and checks it answers. The URL may reach
// Postgres directly or through a connection pooler in transaction mode
// (PgBouncer): through a pooler, the pool keeps nothing on the server
// between transactions (see pooler.go); a URL that sets
// default_query_exec_mode keeps its own mode (e.g. cache_statement through
// a PgBouncer of 1.21 or later with max_prepared_statements).
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return connect(ctx, url, nil)
}

// connect opens a pool for url, with its configuration adjusted by setup
// (if given), and checks it answers.
func connect(ctx context.Context, url string, setup func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	// A process that freezes inside a transaction (SIGSTOP, a paused VM)
	// keeps its session, and with it every row lock the transaction took:
	// claims, sweeps and fires of the other replicas skip those rows (SKIP
	// LOCKED) or wait for them for as long as it is frozen. Kagzi's own
	// transactions last milliseconds, so the server ends a session idle
	// inside one for IdleInTransactionTimeout, which releases its locks.
	// A URL that sets the parameter keeps its own value.
	_, urlIdle := cfg.ConnConfig.RuntimeParams[idleParam]
	if !urlIdle {
		cfg.ConnConfig.RuntimeParams[idleParam] = strconv.Itoa(int(IdleInTransactionTimeout / time.Millisecond))
	}
	pooled, err := poolerProbe(ctx, cfg.ConnConfig, !urlIdle)
	switch {
	case err != nil && unsupportedStartupParameter(err):
		return nil, fmt.Errorf("ping database: %w (the URL reaches a connection pooler that refuses a setting the URL makes; remove it: "+
			"Kagzi bounds its idle transactions per transaction there)", err)
	case err != nil:
		return nil, fmt.Errorf("ping database: %w", err)
	}
	if pooled {
		// The server sessions are shared: settings go per transaction
		// (Store.begin), and statements are described once per connection
		// and sent unnamed, never prepared on a session that another
		// client gets next (pgx's default prepares them, and a pooler
		// without prepared statement support answers "prepared statement
		// already exists" or "does not exist").
		if !urlIdle {
			delete(cfg.ConnConfig.RuntimeParams, idleParam)
		}
		if !strings.Contains(url, "default_query_exec_mode") {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		core.RegisterUUID(c.TypeMap())
		return nil
	}
	if setup != nil {
		setup(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

var storePingSQL = stmt("StorePing")

// storeAsyncCommitSQL is the statement of AsyncCommit.
var storeAsyncCommitSQL = stmt("StoreAsyncCommit")

// AsyncCommit makes the transaction s is bound to commit without waiting
// for its write-ahead log to reach the disk. A crash right after such a
// commit may lose the transaction, whole: for work that is redone when it
// is lost (a batch's action with its outcome), the wait buys nothing.
func (s *Store) AsyncCommit(ctx context.Context) error {
	_, err := storeAsyncCommitSQL.ExecPos(ctx, s.h.DB)
	return mapErr("async commit", err)
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	_, err := storePingSQL.ExecPos(ctx, s.h.DB)
	return err
}

// WithTx returns a Store bound to the caller's transaction, so store writes
// commit or roll back with the caller's own.
func (s *Store) WithTx(tx pgx.Tx) *Store {
	t := &Store{h: s.h.WithTx(tx)}
	t.wire()
	return t
}

// beginTx begins a transaction on s's executor (a savepoint when s is
// bound to one).
func (s *Store) beginTx(ctx context.Context) (pgx.Tx, error) { return s.h.BeginTx(ctx) }

// InTx runs fn in a transaction (a savepoint when s is already bound to
// one) and commits if fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	tx, err := s.beginTx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(s.WithTx(tx)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return mapErr("commit", err)
	}
	return nil
}

// ConnectTraced is Connect with every statement traced by tracer. A
// tracer that also has pgxpool's ShouldPing decides the pool's liveness
// pings, so it can count them (stmtcount.Tally).
func ConnectTraced(ctx context.Context, url string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	return connect(ctx, url, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = tracer
		if p, ok := tracer.(interface {
			ShouldPing(context.Context, pgxpool.ShouldPingParams) bool
		}); ok {
			cfg.ShouldPing = p.ShouldPing
		}
	})
}

// SettingsGet reads the settings from the database.
func (s *Store) SettingsGet(ctx context.Context) (Settings, error) { return s.h.SettingsGet(ctx) }

// SettingsSet changes the settings (every field; see Settings.Validate) and
// returns them. This Store applies them at once; other processes when they
// restart.
func (s *Store) SettingsSet(ctx context.Context, v Settings) (Settings, error) {
	return s.h.SettingsSet(ctx, v)
}

// Limits returns the settings this Store applies, reading them from the
// database the first time.
func (s *Store) Limits(ctx context.Context) (Settings, error) { return s.h.Limits(ctx) }
