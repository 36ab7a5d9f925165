package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/kagzi/kagzi/migrations"
)

// versionTable records the applied migration version. It lives in public
// because the kagzi schema does not exist before the first migration.
const versionTable = "public.kagzi_schema_version"

// Migrate applies every pending migration to the database at url. It is
// idempotent and safe to run from several processes at once: the migrator
// holds a Postgres advisory lock while it works.
func Migrate(ctx context.Context, url string) (version int32, err error) {
	return migrateWith(ctx, url, nil)
}

// migrateWith applies the migrations, after setup (if given) prepared the
// connection.
func migrateWith(ctx context.Context, url string, setup func(*pgx.Conn) error) (version int32, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(ctx)
	if setup != nil {
		if err := setup(conn); err != nil {
			return 0, fmt.Errorf("migrate: %w", err)
		}
	}
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return 0, fmt.Errorf("migrate: load: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	v, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	return v, nil
}
