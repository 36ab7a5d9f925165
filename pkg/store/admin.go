package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Database administration (databases, roles, the migrator) lives in the
// subpackages dbadmin and migrate; what they need of the store's session
// checks and errors is exported here.

// ConnectSession opens a plain connection to url for what (migrating,
// setting up roles) that holds session state, and refuses a connection
// pooler with an error wrapping ErrSessionPooled.
func ConnectSession(ctx context.Context, url, what string) (*pgx.Conn, error) {
	return connectSession(ctx, url, what)
}

// MapError turns a driver error into the store's typed errors
// (ErrNotFound, ErrConflict, ErrInvalidArgument, ...), keeping the
// original for inspection; what names the operation for the message.
func MapError(what string, err error) error { return mapErr(what, err) }

// Redact hides the password of a database URL, for error messages.
func Redact(url string) string { return redact(url) }

// redact hides a password in a URL for error messages.
func redact(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil || cfg.Password == "" {
		return url
	}
	return strings.Replace(url, cfg.Password, "xxxxx", 1)
}

var (
	lockSessionsSQL            = stmt("LockSessions")
	lockHolderTerminateSQL     = stmt("LockHolderTerminate")
	lockHolderTerminateIdleSQL = stmt("LockHolderTerminateIdle")
	serverAutovacuumSQL        = stmt("ServerAutovacuum")
	serverInRecoverySQL        = stmt("ServerInRecovery")
	replicationStandbysSQL     = stmt("ReplicationStandbys")
	runsLockExclusiveSQL       = stmt("RunsLockExclusive")
	serverSleepSQL             = stmt("ServerSleep")
)

// LockSessions counts the sessions of the current database that hold and
// that wait for the advisory lock key (as Leader and Listener take it):
// whether someone leads, and how many standbys are queued to take over.
func (s *Store) LockSessions(ctx context.Context, key int64) (held, waiting int, err error) {
	err = lockSessionsSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"key": key}).Scan(&held, &waiting)
	return held, waiting, mapErr("advisory lock sessions", err)
}

// LockHolderTerminate ends the sessions holding the advisory lock key (as
// taken by a Listener) and returns how many it ended. Operators use it to
// move relay leadership; tests use it to kill a relay's connection.
func (s *Store) LockHolderTerminate(ctx context.Context, key int64) (int, error) {
	var n int
	err := lockHolderTerminateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"key": key}).Scan(&n)
	return n, mapErr("terminate lock holder", err)
}

// LockHolderTerminateIdle ends the session holding advisory lock key if
// it has been idle for longer than idle (its last statement ended that
// long ago), and returns how many it ended (0 or 1). A standby calls it
// once the leader fell silent: a leader's dedicated session is idle from
// its election on, so a leader elected within idle is spared (it has not
// had time to prove progress yet), and one that runs a statement is not
// silent.
func (s *Store) LockHolderTerminateIdle(ctx context.Context, key int64, idle time.Duration) (int, error) {
	var n int
	err := lockHolderTerminateIdleSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"key": key, "idle_ms": idle.Milliseconds()}).Scan(&n)
	return n, mapErr("terminate idle lock holder", err)
}

// ServerAutovacuum reports whether the server runs autovacuum. Without
// it nothing reclaims the rows that retention deletes and that claims and
// completions update: the tables and their indexes grow for ever (the
// per-table settings of migration 010 only tune it).
func (s *Store) ServerAutovacuum(ctx context.Context) (bool, error) {
	var on bool
	err := serverAutovacuumSQL.QueryRowPos(ctx, s.h.DB).Scan(&on)
	return on, mapErr("read autovacuum setting", err)
}

// ServerInRecovery reports whether the server is a standby (in recovery,
// read-only): a URL listing it before the primary must ask for a
// read-write session (target_session_attrs=read-write), or Kagzi's writes
// fail on it.
func (s *Store) ServerInRecovery(ctx context.Context) (bool, error) {
	var on bool
	err := serverInRecoverySQL.QueryRowPos(ctx, s.h.DB).Scan(&on)
	return on, mapErr("read recovery state", err)
}

// ReplicationStandbys counts the standbys streaming from the server, and
// those of them it waits for on commit (synchronous_standby_names): with
// none of the latter, a commit it acknowledged may be missing on a
// standby promoted after its crash.
func (s *Store) ReplicationStandbys(ctx context.Context) (streaming, synchronous int, err error) {
	err = replicationStandbysSQL.QueryRowPos(ctx, s.h.DB).Scan(&streaming, &synchronous)
	return streaming, synchronous, mapErr("read replication state", err)
}

// RunsHold holds an exclusive lock on the runs table for d, in a
// transaction of its own: every start, claim and report waits behind it,
// as behind a long ALTER TABLE of a careless migration. Postgres is slow
// rather than down; fault tests use it to show that nothing is lost and
// that work resumes once the lock goes.
func (s *Store) RunsHold(ctx context.Context, d time.Duration) error {
	return s.InTx(ctx, func(tx *Store) error {
		if _, err := runsLockExclusiveSQL.ExecPos(ctx, tx.h.DB); err != nil {
			return mapErr("lock runs", err)
		}
		_, err := serverSleepSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"ms": d.Milliseconds()})
		return mapErr("hold runs", err)
	})
}
