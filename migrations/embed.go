// Package migrations owns Kagzi's database schema: numbered SQL files applied
// in order by the store's migrator (pkg/store/migrate), the functions they
// define (functions/), and schema.sql, the schema they make, generated. It is
// the one migration path used by tests, binaries, compose and Kubernetes.
//
// A function that migrations redefine is written once, in
// functions/NAME.sql (a CREATE OR REPLACE FUNCTION statement). A migration
// that creates or changes it says so with a line of its own,
//
//	-- kagzi:function NAME sha256:0123456789abcdef
//
// which the migrator replaces with the file. Every migration naming it thus
// runs the current definition: a database migrated from empty and one
// upgraded from any earlier version end with the same function. (An early
// migration's trigger function may name columns or functions a later one
// adds: PL/pgSQL bodies are checked when they run, and no migration between
// the two runs them on rows that lack the columns. 016, which copies into
// the rows of every run, turns the table's triggers off around its copy;
// TestMigrateWithRowsFromOlderVersions migrates rows through it.)
//
// The last migration naming a function pins the file's digest (the first
// 16 hex digits of its SHA-256); the earlier ones name it without. The
// migrator refuses a file that differs from its pin: a database at or past
// that migration holds the pinned definition and would never get the new
// one. To change a function, edit its file, add a migration naming it with
// the new digest, and drop the digest from the previous pin.
//
// schema.sql is `pg_dump --schema-only` of a database migrated from empty
// (schema kagzi), normalised; regenerate it with `make schema` (or
// `go generate ./migrations`). TestSchemaFileIsCurrent fails when it is
// stale.
package migrations

import "embed"

//go:generate go test -count=1 -run ^TestSchemaFileIsCurrent$ -update-schema .

// FS holds the numbered migration files, NNN_name.sql from 001 without a
// gap: the up migration above "---- create above / drop below ----", which
// the migrator applies; the down migration below it, which nothing applies
// (it documents the undo). The format is tern's, the migrator earlier
// versions used. functions/ holds the functions the up parts name.
//
//go:embed [0-9]*.sql functions/*.sql
var FS embed.FS
