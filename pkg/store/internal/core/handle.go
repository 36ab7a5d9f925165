package core

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what the store needs from a pool, a connection or a transaction,
// so every method works the same inside a caller's transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Options tune a Store. The zero value means the defaults. (The payload
// limits are the database's: see Settings.)
type Options struct {
	// OnLargePayload, if set, is called for every accepted payload above
	// Settings.PayloadWarnBytes, with what it is (e.g. "input") and its
	// size.
	OnLargePayload func(what string, size int)
}

// Handle is what every part of the store works through: one executor (a
// pool or a transaction), the options and the settings. Each part holds
// a copy; a Handle is not changed once made.
type Handle struct {
	DB       DBTX
	Opts     Options
	Settings *SettingsCache
	// Begin, if set, begins transactions on DB (a pool whose sessions do
	// not bound idle transactions themselves).
	Begin func(ctx context.Context) (pgx.Tx, error)
}

// WithTx returns the handle bound to tx, sharing h's options and settings.
func (h *Handle) WithTx(tx pgx.Tx) Handle {
	return Handle{DB: tx, Opts: h.Opts, Settings: h.Settings}
}

// BeginTx begins a transaction on h's executor (a savepoint when h is
// bound to one).
func (h *Handle) BeginTx(ctx context.Context) (pgx.Tx, error) {
	if h.Begin != nil {
		return h.Begin(ctx)
	}
	return h.DB.Begin(ctx)
}

// IsNoRows reports whether err is pgx's no-rows error.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// IdleInTransactionTimeout is how long the pools Connect opens let a
// session sit idle inside a transaction before the server ends it: the
// bound on how long a frozen process holds the rows its transaction
// locked.
const IdleInTransactionTimeout = 5 * time.Second
