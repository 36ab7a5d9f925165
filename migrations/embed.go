// Package migrations owns Kagzi's database schema: numbered SQL files applied
// in order by the store's migrator. It is the one migration path used by tests,
// binaries, compose and Kubernetes.
package migrations

import "embed"

// FS holds the numbered migration files, NNN_name.sql from 001 without a
// gap: the up migration above "---- create above / drop below ----", which
// the migrator applies; the down migration below it, which nothing applies
// (it documents the undo). The format is tern's, the migrator earlier
// versions used.
//
//go:embed *.sql
var FS embed.FS
