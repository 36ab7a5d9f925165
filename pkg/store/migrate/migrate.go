// Package migrate applies the numbered migrations of package migrations
// to a database: it owns the version table, the migration lock, and the
// expansion of the function directives the migration files carry
// (migrations/embed.go). It is the store's migrator; `kagzi migrate`, the
// test harness and the bench run it.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/migrations"
	"github.com/kagzi/kagzi/pkg/store"
)

// lockKey is the session advisory lock held while migrating: the key tern
// takes, so that a migrator of an earlier Kagzi (during a rolling upgrade)
// and this one exclude each other too.
const lockKey = int64(9628173550095224)

// split ends a migration file's up part; the down part below it is for
// people, never applied.
const split = "---- create above / drop below ----"

// migrationFile is the name of a migration file: its version, an
// underscore, a name.
var migrationFile = regexp.MustCompile(`\A(\d+)_.+\.sql\z`)

// migration is the up part of one migration file, its function
// directives expanded.
type migration struct {
	version int32
	name    string
	sql     string
}

// Up applies every pending migration to the database at url and returns
// the version it is at. It is idempotent and safe to run from several
// processes at once: the migrator holds a Postgres advisory lock while it
// works. A url that reaches a connection pooler is refused with an error
// wrapping store.ErrSessionPooled.
func Up(ctx context.Context, url string) (version int32, err error) {
	return UpWith(ctx, url, Options{})
}

// UpAs is Up with the migrations run as role (SET ROLE), so that the
// objects they create belong to it: a superuser can migrate on the owner
// role's behalf (see package dbadmin's roles).
func UpAs(ctx context.Context, url, role string) (int32, error) {
	return UpWith(ctx, url, Options{Role: role})
}

// Options configure UpWith.
type Options struct {
	// Role, if set, runs the migrations as that role (see UpAs).
	Role string
	// Progress, if set, is told how many migrations were applied of how
	// many were pending: once before the first (0) and after each.
	Progress func(applied, pending int)
}

// UpWith is Up with options.
func UpWith(ctx context.Context, url string, o Options) (int32, error) {
	var setup func(*pgx.Conn) error
	if o.Role != "" {
		setup = func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, fmt.Sprintf(sqlSetRole, pgx.Identifier{o.Role}.Sanitize()))
			return err
		}
	}
	return upFS(ctx, url, migrations.FS, setup, o.Progress)
}

// upFS applies the migration files of fsys, after setup (if given)
// prepared the connection.
func upFS(ctx context.Context, url string, fsys fs.FS, setup func(*pgx.Conn) error, progress func(applied, pending int)) (int32, error) {
	ms, err := load(fsys)
	if err != nil {
		return 0, fmt.Errorf("migrate: load: %w", err)
	}
	// A session of its own: the lock below and UpAs's role are session
	// state.
	conn, err := store.ConnectSession(ctx, url, "migrate")
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if setup != nil {
		if err := setup(conn); err != nil {
			return 0, fmt.Errorf("migrate: %w", err)
		}
	}
	// A session lock: closing the connection, however migrating ends,
	// releases it.
	if _, err := conn.Exec(ctx, sqlLock, pgx.NamedArgs{"key": lockKey}); err != nil {
		return 0, fmt.Errorf("migrate: lock: %w", err)
	}
	return apply(ctx, conn, ms, progress)
}

// load reads the migration files of fsys (NNN_name.sql) in version order,
// their function directives expanded from fsys's functions/. Like tern it
// refuses a set with a duplicate or a missing version, or a migration
// whose up part holds no SQL.
func load(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	byVersion := map[int32]string{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: version: %w", e.Name(), err)
		}
		if prev, ok := byVersion[int32(v)]; ok {
			return nil, fmt.Errorf("duplicate migration %d: %s and %s", v, prev, e.Name())
		}
		byVersion[int32(v)] = e.Name()
	}
	if len(byVersion) == 0 {
		return nil, errors.New("no migrations")
	}
	fns := functions{fsys: fsys}
	ms := make([]migration, len(byVersion))
	for i := range ms {
		v := int32(i + 1)
		name, ok := byVersion[v]
		if !ok {
			return nil, fmt.Errorf("missing migration %d", v)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		up, _, _ := strings.Cut(string(body), split)
		up = strings.TrimSpace(up)
		if !hasSQL(up) {
			return nil, fmt.Errorf("%s: no SQL above %q", name, split)
		}
		if up, err = fns.expand(name, up); err != nil {
			return nil, err
		}
		ms[i] = migration{version: v, name: name, sql: up}
	}
	return ms, nil
}

// hasSQL reports whether sql holds more than blank lines and line
// comments; a function directive (or a line meant as one) counts as SQL.
func hasSQL(sql string) bool {
	for line := range strings.Lines(sql) {
		l := strings.TrimSpace(line)
		if l != "" && (!strings.HasPrefix(l, "--") || directiveLike.MatchString(l)) {
			return true
		}
	}
	return false
}

// apply brings the database of conn, whose session holds the migration
// lock, from its recorded version to the last of ms: each migration and
// its version bump in one transaction, so a failed migration leaves the
// version at the one before it.
func apply(ctx context.Context, conn *pgx.Conn, ms []migration, progress func(applied, pending int)) (int32, error) {
	// Created only when missing, as tern did: an existing table needs no
	// privilege beyond reading and updating it.
	var exists bool
	if err := conn.QueryRow(ctx, sqlVersionTableExists).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrate: version table: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, sqlVersionTableCreate); err != nil {
			return 0, fmt.Errorf("migrate: version table: %w", err)
		}
	}
	var version int32
	if err := conn.QueryRow(ctx, sqlVersionRead).Scan(&version); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if version < 0 || int(version) > len(ms) {
		return version, fmt.Errorf("migrate: the database is at version %d, this Kagzi knows versions 0 to %d", version, len(ms))
	}
	pending := ms[version:]
	if progress != nil {
		progress(0, len(pending))
	}
	for i, m := range pending {
		if err := applyOne(ctx, conn, m); err != nil {
			return version, fmt.Errorf("migrate: %s: %w", m.name, err)
		}
		version = m.version
		if progress != nil {
			progress(i+1, len(pending))
		}
	}
	return version, nil
}

// applyOne runs m and records its version, in one transaction.
func applyOne(ctx context.Context, conn *pgx.Conn, m migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Without arguments the file goes as one simple-protocol query, so it
	// may hold many statements.
	if _, err := tx.Exec(ctx, m.sql); err != nil {
		return err
	}
	// A migration may have changed settings (search_path, say) that the
	// version update must not see.
	if _, err := tx.Exec(ctx, sqlResetAll); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlVersionSet, pgx.NamedArgs{"version": m.version}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
