package store

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
)

// versionTable records the applied migration version. It lives in public
// because the kagzi schema does not exist before the first migration.
// Its layout (one row, one int4 column "version") is the one the tern
// migrator created, which earlier versions of Kagzi used: databases they
// migrated carry on from the version they recorded.
const versionTable = "public.kagzi_schema_version"

// migrateLockKey is the session advisory lock held while migrating: the
// key tern takes, so that a migrator of an earlier Kagzi (during a rolling
// upgrade) and this one exclude each other too.
const migrateLockKey = int64(9628173550095224)

// migrationSplit ends a migration file's up part; the down part below it
// is for people, never applied.
const migrationSplit = "---- create above / drop below ----"

// migrationFile is the name of a migration file: its version, an
// underscore, a name.
var migrationFile = regexp.MustCompile(`\A(\d+)_.+\.sql\z`)

// migration is the up part of one migration file.
type migration struct {
	version int32
	name    string
	sql     string
}

// Migrate applies every pending migration to the database at url. It is
// idempotent and safe to run from several processes at once: the migrator
// holds a Postgres advisory lock while it works.
func Migrate(ctx context.Context, url string) (version int32, err error) {
	return migrateWith(ctx, url, nil)
}

// migrateWith applies the migrations, after setup (if given) prepared the
// connection.
func migrateWith(ctx context.Context, url string, setup func(*pgx.Conn) error) (version int32, err error) {
	return migrateFS(ctx, url, migrations.FS, setup)
}

// migrateFS is migrateWith with the migration files of fsys.
func migrateFS(ctx context.Context, url string, fsys fs.FS, setup func(*pgx.Conn) error) (int32, error) {
	ms, err := migrationsLoad(fsys)
	if err != nil {
		return 0, fmt.Errorf("migrate: load: %w", err)
	}
	// A session of its own: the lock below and MigrateAs's role are
	// session state.
	conn, err := connectSession(ctx, url, "migrate")
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
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(@key)", pgx.NamedArgs{"key": migrateLockKey}); err != nil {
		return 0, fmt.Errorf("migrate: lock: %w", err)
	}
	return migrationsApply(ctx, conn, ms)
}

// migrationsLoad reads the migration files of fsys (NNN_name.sql) in
// version order. Like tern it refuses a set with a duplicate or a missing
// version, or a migration whose up part holds no SQL.
func migrationsLoad(fsys fs.FS) ([]migration, error) {
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
		up, _, _ := strings.Cut(string(body), migrationSplit)
		up = strings.TrimSpace(up)
		if !hasSQL(up) {
			return nil, fmt.Errorf("%s: no SQL above %q", name, migrationSplit)
		}
		ms[i] = migration{version: v, name: name, sql: up}
	}
	return ms, nil
}

// hasSQL reports whether sql holds more than blank lines and line comments.
func hasSQL(sql string) bool {
	for line := range strings.Lines(sql) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}

// migrationsApply brings the database of conn, whose session holds the
// migration lock, from its recorded version to the last of ms: each
// migration and its version bump in one transaction, so a failed migration
// leaves the version at the one before it.
func migrationsApply(ctx context.Context, conn *pgx.Conn, ms []migration) (int32, error) {
	// Created only when missing, as tern did: an existing table needs no
	// privilege beyond reading and updating it.
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass(@table) IS NOT NULL", pgx.NamedArgs{"table": versionTable}).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrate: version table: %w", err)
	}
	if !exists {
		// One row, at version 0 (tern's statements, so that the table is
		// the same whichever migrator made it).
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versionTable+`(version int4 NOT NULL);
			INSERT INTO `+versionTable+`(version) SELECT 0 WHERE 0 = (SELECT count(*) FROM `+versionTable+`)`); err != nil {
			return 0, fmt.Errorf("migrate: version table: %w", err)
		}
	}
	var version int32
	if err := conn.QueryRow(ctx, "SELECT version FROM "+versionTable).Scan(&version); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if version < 0 || int(version) > len(ms) {
		return version, fmt.Errorf("migrate: the database is at version %d, this Kagzi knows versions 0 to %d", version, len(ms))
	}
	for _, m := range ms[version:] {
		if err := migrationApply(ctx, conn, m); err != nil {
			return version, fmt.Errorf("migrate: %s: %w", m.name, err)
		}
		version = m.version
	}
	return version, nil
}

// migrationApply runs m and records its version, in one transaction.
func migrationApply(ctx context.Context, conn *pgx.Conn, m migration) error {
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
	if _, err := tx.Exec(ctx, "RESET ALL"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE "+versionTable+" SET version = @version", pgx.NamedArgs{"version": m.version}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
