package schedstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
	"github.com/kagzi/kagzi/pkg/store/internal/opsstore"
	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
)

// Schedules holds the statements of schedules over one executor. Package
// store's Store embeds it, so its methods are the Store's. A fire starts
// runs through the runs' own statements (runsPart).
type Schedules struct {
	h core.Handle
	runsPart
}

// runsPart is embedded under an unexported name, so its methods serve
// the schedules without being theirs to export.
type runsPart = runstore.Runs

// New returns the schedules' statements over h.
func New(h core.Handle) Schedules { return Schedules{h: h, runsPart: runstore.New(h)} }

// inTx runs fn in a transaction (a savepoint when s is already bound to
// one) and commits if fn returns nil.
func (s *Schedules) inTx(ctx context.Context, fn func(tx *Schedules) error) error {
	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	h := s.h.WithTx(tx)
	if err := fn(&Schedules{h: h, runsPart: runstore.New(h)}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return core.MapErr("commit", err)
	}
	return nil
}

func pageLimit(limit int) (int, error) { return opsstore.PageLimit(limit) }

func checkFlowKeys(concurrencyKey, rateKey string) error {
	return runstore.CheckFlowKeys(concurrencyKey, rateKey)
}

//go:embed sql/*.sql
var sqlFS embed.FS

// sqlBlocks are this package's statements (see core.SQLBlocks).
var sqlBlocks = core.MustLoadSQL(sqlFS)

// stmt returns the statement named name; package variables call it.
func stmt(name string) *namedSQL { return sqlBlocks.Stmt(name) }
