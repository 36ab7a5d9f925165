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

// LockSessions counts the sessions of the current database that hold and
// that wait for the advisory lock key (as Leader and Listener take it):
// whether someone leads, and how many standbys are queued to take over.
func (s *Store) LockSessions(ctx context.Context, key int64) (held, waiting int, err error) {
	err = s.db.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key`, pgx.NamedArgs{"key": key}).Scan(&held, &waiting)
	return held, waiting, mapErr("advisory lock sessions", err)
}

// LockHolderTerminate ends the sessions holding the advisory lock key (as
// taken by a Listener) and returns how many it ended. Operators use it to
// move relay leadership; tests use it to kill a relay's connection.
func (s *Store) LockHolderTerminate(ctx context.Context, key int64) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `
SELECT count(pg_terminate_backend(pid)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key`, pgx.NamedArgs{"key": key}).Scan(&n)
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
	err := s.db.QueryRow(ctx, `
SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = @key
  AND a.state = 'idle' AND a.state_change < clock_timestamp() - make_interval(secs => @idle_ms::float8 / 1000)`,
		pgx.NamedArgs{"key": key, "idle_ms": idle.Milliseconds()}).Scan(&n)
	return n, mapErr("terminate idle lock holder", err)
}

// ServerAutovacuum reports whether the server runs autovacuum. Without
// it nothing reclaims the rows that retention deletes and that claims and
// completions update: the tables and their indexes grow for ever (the
// per-table settings of migration 010 only tune it).
func (s *Store) ServerAutovacuum(ctx context.Context) (bool, error) {
	var on bool
	err := s.db.QueryRow(ctx, `SELECT current_setting('autovacuum')::bool`).Scan(&on)
	return on, mapErr("read autovacuum setting", err)
}
