package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Database administration used by the test harness and `kagzi bench`,
// which make throwaway databases next to the real one.

// DatabaseURL returns url with its database name replaced by name.
func DatabaseURL(url, name string) (string, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	// Keep the caller's options; only the path changes.
	if i := strings.Index(url, "://"); i >= 0 {
		rest := url[i+3:]
		q := ""
		if j := strings.IndexByte(rest, '?'); j >= 0 {
			rest, q = rest[:j], rest[j:]
		}
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			rest = rest[:j]
		}
		return url[:i+3] + rest + "/" + name + q, nil
	}
	// Keyword/value form.
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, name), nil
}

// DatabaseCreate creates database name on the server at adminURL, as a copy
// of template when it is not empty.
func DatabaseCreate(ctx context.Context, adminURL, name, template string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	// Cloning fails while another session is still attached to the
	// template (e.g. a clone just finishing); that passes quickly.
	for i := 0; ; i++ {
		_, err = conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || i == 50 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return mapErr("create database "+name, err)
}

// DatabaseDrop drops database name, disconnecting its sessions.
func DatabaseDrop(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return mapErr("drop database "+name, err)
}

// DatabaseAllowConnections makes database name on the server at adminURL
// refuse new connections and ends every session it has (allow=false), or
// accept connections again (allow=true): a database outage, as a failover
// makes one, for failure tests.
func DatabaseAllowConnections(ctx context.Context, adminURL, name string, allow bool) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS %t", ident, allow)); err != nil {
		return mapErr("allow connections to "+name, err)
	}
	if allow {
		return nil
	}
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = @datname AND pid <> pg_backend_pid()`,
		pgx.NamedArgs{"datname": name})
	return mapErr("end sessions of "+name, err)
}

// DatabaseEnsureTemplate makes sure a migrated template database named name
// exists on the server at adminURL, creating and migrating it if needed.
// Concurrent callers (parallel test binaries) serialise on an advisory
// lock; a template left half-made by a crash is rebuilt.
func DatabaseEnsureTemplate(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	const lockKey = 0x6b61677a69 // "kagzi"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(@key)", pgx.NamedArgs{"key": lockKey}); err != nil {
		return mapErr("lock template", err)
	}
	defer func() { _, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock(@key)", pgx.NamedArgs{"key": lockKey}) }()
	var ready *bool
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') = 'kagzi-ready' FROM pg_database WHERE datname = @datname`,
		pgx.NamedArgs{"datname": name}).Scan(&ready)
	if err == nil && ready != nil && *ready {
		return nil
	}
	if err != nil && !isNoRows(err) {
		return mapErr("inspect template", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return mapErr("drop stale template", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return mapErr("create template", err)
	}
	url, err := DatabaseURL(adminURL, name)
	if err != nil {
		return err
	}
	if _, err := Migrate(ctx, url); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS 'kagzi-ready'"); err != nil {
		return mapErr("mark template", err)
	}
	return nil
}

// DatabaseList returns the names of the databases whose name starts with prefix.
func DatabaseList(ctx context.Context, adminURL, prefix string) ([]string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, @prefix)`, pgx.NamedArgs{"prefix": prefix})
	if err != nil {
		return nil, mapErr("list databases", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, mapErr("list databases", err)
}

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
