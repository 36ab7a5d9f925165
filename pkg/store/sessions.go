package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// sessionTerminateWait bounds how long SessionTerminate waits for the
// session to end.
const sessionTerminateWait = 5 * time.Second

// Sessions: what a crash does to a database session, on demand. Operators'
// tools end a stuck session; tests end one in the middle of a transaction
// to check that what it wrote goes whole or not at all.

var (
	sessionPIDSQL       = stmt("SessionPID")
	sessionTerminateSQL = stmt("SessionTerminate")
	sessionLockSQL      = stmt("SessionLock")
)

// SessionPID returns the server process id of the session s's statements
// run on: for a Store bound to a transaction (WithTx, InTx, Fenced), that
// transaction's session.
func (s *Store) SessionPID(ctx context.Context) (int, error) {
	var pid int
	err := sessionPIDSQL.QueryRowPos(ctx, s.h.DB).Scan(&pid)
	return pid, mapErr("session pid", err)
}

// SessionTerminate ends the session with server process id pid, as the
// death of its client would: its transaction, if any, rolls back, and its
// locks are released. It returns once the session is gone (within
// sessionTerminateWait): only signalled, a session may still hold its row
// locks for a moment, and a statement right after would skip or wait for
// them. It reports whether there was such a session and it ended.
func (s *Store) SessionTerminate(ctx context.Context, pid int) (bool, error) {
	var ok bool
	err := sessionTerminateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"pid": pid, "wait_ms": sessionTerminateWait.Milliseconds()}).Scan(&ok)
	return ok, mapErr("terminate session", err)
}

// SessionLock waits, for as long as ctx allows, until conn's session holds
// advisory lock key (see pgsession): the lock lives as long as the
// session.
func SessionLock(ctx context.Context, conn DBTX, key int64) error {
	_, err := sessionLockSQL.Exec(ctx, conn, pgx.NamedArgs{"key": key})
	return err
}
