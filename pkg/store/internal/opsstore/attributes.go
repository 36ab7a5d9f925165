package opsstore

import (
	"context"

	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// The statements of search attributes, written in sql/attributes.sql.
var (
	attributesDeclareSQL = stmt("AttributesDeclare")
	attributesListSQL    = stmt("AttributesList")
	attributesHeldSQL    = stmt("AttributesHeld")
	attributesDeleteSQL  = stmt("AttributesDelete")
	attributesLockRunSQL = stmt("AttributesLockRun")
)

// AttributeKind is the kind of a search attribute: keyword (which may hold
// a list of values), text, int, float, bool or time.
type AttributeKind = filter.Kind

// Attribute is a declared search attribute.
type Attribute struct {
	Name      string
	Kind      AttributeKind
	CreatedAt time.Time
}

// AttributesDeclare declares a search attribute of the namespace. Declaring
// one again with the same kind does nothing; with another kind it is
// ErrConflict (a kind never changes under stored values). A namespace
// declares at most core.MaxAttributesDeclared.
func (s *Ops) AttributesDeclare(ctx context.Context, namespace, name string, kind AttributeKind) error {
	if err := checkName("namespace", namespace, true); err != nil {
		return err
	}
	if err := core.CheckAttributeName(name); err != nil {
		return err
	}
	if !kind.Valid() {
		return fmt.Errorf("%w %q: unknown kind %q; give one of %v", core.ErrAttribute, name, kind, filter.Kinds)
	}
	var got string
	err := attributesDeclareSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "name": name, "kind": string(kind),
		"max": core.MaxAttributesDeclared}).Scan(&got)
	switch {
	case err != nil:
		return mapErr("declare attribute", err)
	case got == "":
		return fmt.Errorf("%w %q: the namespace declares %d attributes, the maximum", core.ErrAttribute, name, core.MaxAttributesDeclared)
	case got != string(kind):
		return fmt.Errorf("declare attribute %q: %w: declared already as %s", name, ErrConflict, got)
	}
	return nil
}

// AttributesList lists the namespace's declared attributes by name.
func (s *Ops) AttributesList(ctx context.Context, namespace string) ([]Attribute, error) {
	rows, err := attributesListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list attributes", err)
	}
	defer rows.Close()
	out := []Attribute{}
	for rows.Next() {
		var a Attribute
		if err := rows.Scan(&a.Name, &a.Kind, &a.CreatedAt); err != nil {
			return nil, mapErr("list attributes", err)
		}
		out = append(out, a)
	}
	return out, mapErr("list attributes", rows.Err())
}

// AttributesDelete removes a declaration. While a run holds a value of
// the attribute it is ErrConflict: the values would outlive their kind
// and be found again by a declaration of another kind. Runs let go of it
// as retention deletes them.
func (s *Ops) AttributesDelete(ctx context.Context, namespace, name string) error {
	return s.inTx(ctx, func(tx *Ops) error {
		var held bool
		if err := attributesHeldSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"namespace": namespace, "name": name}).Scan(&held); err != nil {
			return mapErr("delete attribute", err)
		}
		if held {
			return fmt.Errorf("delete attribute %q: %w: runs hold values of it", name, ErrConflict)
		}
		var n string
		err := attributesDeleteSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"namespace": namespace, "name": name}).Scan(&n)
		return mapErr(fmt.Sprintf("delete attribute %q", name), err)
	})
}

// RunAttributes returns a run's search attributes by name: a string,
// []string (a keyword with several values), int64, float64, bool or
// time.Time. A run without any has an empty map.
func (s *Ops) RunAttributes(ctx context.Context, namespace string, runID uuid.UUID) (map[string]any, error) {
	return core.RunAttributes(ctx, s.h.DB, namespace, runID)
}

// RunsAttributesChange applies changes, a JSON object of attribute name to
// value (null removes the name), to a run's search attributes, live or
// finished, as a workflow's SetAttributes does: a value set replaces every
// value the run held of that name. The run is locked for the caller's
// transaction. No such run (a schedule template is none) is ErrNotFound;
// a name no longer declared, or values past the run's limits, are
// ErrAttribute and change nothing.
func (s *Ops) RunsAttributesChange(ctx context.Context, namespace string, runID uuid.UUID, changes []byte) error {
	return s.inTx(ctx, func(tx *Ops) error {
		var st string
		if err := attributesLockRunSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": runID}).Scan(&st); err != nil {
			return mapErr(fmt.Sprintf("run %s", runID), err)
		}
		declared, err := core.AttributeKinds(ctx, tx.h.DB, namespace)
		if err != nil {
			return err
		}
		rows, names, err := core.MergeAttributes(ctx, tx.h.DB, namespace, runID, changes, declared)
		if err != nil {
			return fmt.Errorf("run %s: %w", runID, err)
		}
		return core.ReplaceAttributes(ctx, tx.h.DB, namespace, runID, names, rows)
	})
}

// fields returns the fields a query of the namespace may name: the
// built-in ones and its declared attributes.
func (s *Ops) fields(ctx context.Context, namespace string) (map[string]AttributeKind, error) {
	attrs, err := s.AttributesList(ctx, namespace)
	if err != nil {
		return nil, err
	}
	out := make(map[string]AttributeKind, len(attrs))
	for _, a := range attrs {
		out[a.Name] = a.Kind
	}
	return out, nil
}

// fieldNames lists the names a query may use, for an error.
func fieldNames(attrs map[string]AttributeKind) []string {
	var out []string
	for n := range core.BuiltinFields {
		out = append(out, n)
	}
	for n := range attrs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
