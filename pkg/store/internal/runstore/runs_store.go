package runstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Runs holds the statements of runs, their steps and their leases over
// one executor. Package store's Store embeds it, so its methods are the
// Store's.
type Runs struct {
	h core.Handle
}

// New returns the runs' statements over h.
func New(h core.Handle) Runs { return Runs{h: h} }

// inTx runs fn in a transaction (a savepoint when s is already bound to
// one) and commits if fn returns nil.
func (s *Runs) inTx(ctx context.Context, fn func(tx *Runs) error) error {
	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(&Runs{h: s.h.WithTx(tx)}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return core.MapErr("commit", err)
	}
	return nil
}

//go:embed sql/*.sql
var sqlFS embed.FS

// sqlBlocks are this package's statements (see core.SQLBlocks).
var sqlBlocks = core.MustLoadSQL(sqlFS)

// stmt returns the statement named name; package variables call it.
func stmt(name string) *namedSQL { return sqlBlocks.Stmt(name) }
