package runstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// The statements of runs' search attributes, written in sql/attributes.sql.
var (
	runsAttributesAddSQL = stmt("RunsAttributesAdd")
	// runsCreateAttributesSQL is runsCreateSQL with the insert of the
	// runs' attributes.
	runsCreateAttributesSQL = stmt("RunsCreateAttributes")
)

// attributesAdd inserts rows as run id's attributes.
func (s *Runs) attributesAdd(ctx context.Context, id uuid.UUID, rows []core.AttrRow) error {
	if len(rows) == 0 {
		return nil
	}
	var a core.AttrArrays
	a.Add(id, rows)
	_, err := runsAttributesAddSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"attr_run_ids": a.RunIDs, "attr_names": a.Names,
		"attr_texts": a.Texts, "attr_ints": a.Ints, "attr_floats": a.Floats, "attr_bools": a.Bools, "attr_times": a.Times})
	return mapErr("add attributes", err)
}
