package runstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// The statements of runs' search attributes, written in sql/attributes.sql.
var (
	runsAttributeKindsSQL = stmt("RunsAttributeKinds")
	runsAttributesAddSQL  = stmt("RunsAttributesAdd")
)

// attributeKinds returns the kinds of the namespace's declared attributes.
// A start reads them only when it sets attributes.
func (s *Runs) attributeKinds(ctx context.Context, namespace string) (map[string]filter.Kind, error) {
	rows, err := runsAttributeKindsSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("read declared attributes", err)
	}
	defer rows.Close()
	out := map[string]filter.Kind{}
	for rows.Next() {
		var n string
		var k filter.Kind
		if err := rows.Scan(&n, &k); err != nil {
			return nil, mapErr("read declared attributes", err)
		}
		out[n] = k
	}
	return out, mapErr("read declared attributes", rows.Err())
}

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
