// Package migrations owns Kagzi's database schema: numbered SQL files applied
// in order by the store's migrator. It is the one migration path used by tests,
// binaries, compose and Kubernetes.
package migrations

import "embed"

// FS holds the numbered migration files (NNN_name.sql, tern format: the up
// migration above "---- create above / drop below ----", the down below).
//
//go:embed *.sql
var FS embed.FS
