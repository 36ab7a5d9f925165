package opsstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// DefaultVersion is the version a start without a version gets for one
// workflow type of a namespace (set by the operator).
type DefaultVersion struct {
	Namespace string
	Type      string
	Version   string
	UpdatedAt time.Time
}

// DefaultsSet sets the default version of workflow type typ in namespace:
// runs started without a version from now on get it (runs already started
// keep theirs).
func (s *Ops) DefaultsSet(ctx context.Context, namespace, typ, version string) (DefaultVersion, error) {
	if err := checkName("namespace", namespace, true); err != nil {
		return DefaultVersion{}, err
	}
	if err := checkName("workflow type", typ, true); err != nil {
		return DefaultVersion{}, err
	}
	if err := checkName("version", version, true); err != nil {
		return DefaultVersion{}, err
	}
	row := s.h.DB.QueryRow(ctx, `
INSERT INTO kagzi.workflow_defaults (namespace_id, workflow_type, version) VALUES (@namespace, @type, @version)
ON CONFLICT (namespace_id, workflow_type) DO UPDATE SET version = excluded.version, updated_at = now()
RETURNING namespace_id, workflow_type, version, updated_at`, pgx.NamedArgs{"namespace": namespace, "type": typ, "version": version})
	d, err := scanDefault(row)
	return d, mapErr(fmt.Sprintf("set default version of %s", protocol.Echo(typ)), err)
}

// DefaultsDelete removes the default version of typ; an absent one is
// ErrNotFound.
func (s *Ops) DefaultsDelete(ctx context.Context, namespace, typ string) error {
	tag, err := s.h.DB.Exec(ctx, `DELETE FROM kagzi.workflow_defaults WHERE namespace_id = @namespace AND workflow_type = @type`,
		pgx.NamedArgs{"namespace": namespace, "type": typ})
	if err != nil {
		return mapErr(fmt.Sprintf("delete default version of %s", protocol.Echo(typ)), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete default version of %s: %w", protocol.Echo(typ), ErrNotFound)
	}
	return nil
}

// DefaultsList lists the namespace's default versions by type.
func (s *Ops) DefaultsList(ctx context.Context, namespace string) ([]DefaultVersion, error) {
	rows, err := s.h.DB.Query(ctx, `
SELECT namespace_id, workflow_type, version, updated_at FROM kagzi.workflow_defaults
WHERE namespace_id = @namespace ORDER BY workflow_type`, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list default versions", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DefaultVersion, error) { return scanDefault(r) })
	return out, mapErr("list default versions", err)
}

func scanDefault(row pgx.Row) (DefaultVersion, error) {
	var d DefaultVersion
	err := row.Scan(&d.Namespace, &d.Type, &d.Version, &d.UpdatedAt)
	return d, err
}
