package store

import (
	"context"
	"io/fs"
)

// MigrateFS exposes migrateFS to the migrator's tests: Migrate with
// migration files of their own.
func MigrateFS(ctx context.Context, url string, fsys fs.FS) (int32, error) {
	return migrateFS(ctx, url, fsys, nil)
}
