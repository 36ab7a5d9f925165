package core

import "embed"

//go:embed sql/*.sql
var sqlFS embed.FS

var sqlBlocks = MustLoadSQL(sqlFS)

func stmt(name string) *NamedSQL { return sqlBlocks.Stmt(name) }
