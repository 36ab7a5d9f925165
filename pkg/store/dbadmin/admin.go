// Package dbadmin administers the databases and roles a Kagzi deployment
// runs on: creating, cloning and dropping databases (the test harness
// and `kagzi bench` make throwaway ones next to the real one), the
// migrated template the tests clone, and the owner and runtime roles of a
// least-privilege deployment (`kagzi migrate --roles`).
package dbadmin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/migrate"
)

// templateLockKey serialises the making of template databases across
// test binaries (advisory locks are per database: this one is taken in
// the admin URL's).
const templateLockKey = 0x6b61677a69 // "kagzi"

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

// connect opens a plain connection to the server's administrative URL.
func connect(ctx context.Context, adminURL string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", store.Redact(adminURL), err)
	}
	return conn, nil
}

// DatabaseCreate creates database name on the server at adminURL, as a copy
// of template when it is not empty.
func DatabaseCreate(ctx context.Context, adminURL, name, template string) error {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	sql := withIdents(sqlDatabaseCreate, name)
	if template != "" {
		sql = withIdents(sqlDatabaseCreateTemplate, name, template)
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
	return store.MapError("create database "+name, err)
}

// DatabaseDrop drops database name, disconnecting its sessions.
func DatabaseDrop(ctx context.Context, adminURL, name string) error {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, withIdents(sqlDatabaseDrop, name))
	return store.MapError("drop database "+name, err)
}

// DatabaseAllowConnections makes database name on the server at adminURL
// refuse new connections and ends every session it has (allow=false), or
// accept connections again (allow=true): a database outage, as a failover
// makes one, for failure tests.
func DatabaseAllowConnections(ctx context.Context, adminURL, name string, allow bool) error {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	stmt := sqlDatabaseRefuse
	if allow {
		stmt = sqlDatabaseAllow
	}
	if _, err := conn.Exec(ctx, withIdents(stmt, name)); err != nil {
		return store.MapError("allow connections to "+name, err)
	}
	if allow {
		return nil
	}
	_, err = conn.Exec(ctx, sqlDatabaseEndSessions, pgx.NamedArgs{"datname": name})
	return store.MapError("end sessions of "+name, err)
}

// DatabaseEnsureTemplate makes sure a migrated template database named name
// exists on the server at adminURL, creating and migrating it if needed.
// Concurrent callers (parallel test binaries) serialise on an advisory
// lock; a template left half-made by a crash is rebuilt.
func DatabaseEnsureTemplate(ctx context.Context, adminURL, name string) error {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sqlLock, pgx.NamedArgs{"key": templateLockKey}); err != nil {
		return store.MapError("lock template", err)
	}
	defer func() { _, _ = conn.Exec(ctx, sqlUnlock, pgx.NamedArgs{"key": templateLockKey}) }()
	var ready *bool
	err = conn.QueryRow(ctx, sqlDatabaseReady, pgx.NamedArgs{"datname": name}).Scan(&ready)
	if err == nil && ready != nil && *ready {
		return nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.MapError("inspect template", err)
	}
	if _, err := conn.Exec(ctx, withIdents(sqlDatabaseDrop, name)); err != nil {
		return store.MapError("drop stale template", err)
	}
	if _, err := conn.Exec(ctx, withIdents(sqlDatabaseCreate, name)); err != nil {
		return store.MapError("create template", err)
	}
	url, err := DatabaseURL(adminURL, name)
	if err != nil {
		return err
	}
	if _, err := migrate.Up(ctx, url); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, withIdents(sqlDatabaseMarkReady, name)); err != nil {
		return store.MapError("mark template", err)
	}
	return nil
}

// DatabaseList returns the names of the databases whose name starts with prefix.
func DatabaseList(ctx context.Context, adminURL, prefix string) ([]string, error) {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sqlDatabaseList, pgx.NamedArgs{"prefix": prefix})
	if err != nil {
		return nil, store.MapError("list databases", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, store.MapError("list databases", err)
}
