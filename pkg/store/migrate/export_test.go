package migrate

import (
	"context"
	"io/fs"
)

// UpFS is Up with migration files of the tests' own.
func UpFS(ctx context.Context, url string, fsys fs.FS) (int32, error) {
	return upFS(ctx, url, fsys, nil, nil)
}

// UpParts returns the up parts of the migration files of fsys as the
// migrator runs them, their function directives expanded.
func UpParts(fsys fs.FS) ([]string, error) {
	ms, err := load(fsys)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.sql
	}
	return out, nil
}

// Named is a function directive of a migration file.
type Named struct{ Migration, Function, Pin string }

// Directives returns the function directives of fsys's migrations in
// version order.
func Directives(fsys fs.FS) ([]Named, error) {
	ds, err := directives(fsys)
	out := make([]Named, len(ds))
	for i, d := range ds {
		out[i] = Named{d.migration, d.function, d.pin}
	}
	return out, err
}

// Digest is the pin of a function file's text.
func Digest(text []byte) string { return digest(text) }
