package store

import (
	"embed"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

//go:embed sql/*.sql
var sqlFS embed.FS

// sqlBlocks are this package's statements (see core.SQLBlocks).
var sqlBlocks = core.MustLoadSQL(sqlFS)

// stmt returns the statement named name; package variables call it.
func stmt(name string) *namedSQL { return sqlBlocks.Stmt(name) }
