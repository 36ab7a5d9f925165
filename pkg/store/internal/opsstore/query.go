package opsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Queries: the one translation of a filter query (package filter) into
// SQL. A checked tree becomes a boolean clause over the runs table,
// aliased r, in which every value is a named parameter (@q1, @q2 …) and
// the only identifiers are the columns of core.BuiltinFields and the
// fixed value columns of kagzi.run_attributes: no text of a query ever
// reaches the SQL. An attribute predicate is an EXISTS over the
// attribute's rows, so a keyword list matches when one of its values
// does:
//
//	attr = v       EXISTS (… a.name = @k AND a.v_text = @v)
//	attr != v      EXISTS (… a.name = @k AND a.v_text <> @v): a run
//	               without the attribute does not match
//	NOT (attr = v) NOT EXISTS (…): a run without it matches
//	attr IS NULL   NOT EXISTS (… a.name = @k)
//
// A built-in column's NULL compares false the same way (so NOT of it
// holds), and a status is compared in upper case.

// QueryTimeout bounds one listing or count by a query: a query that
// matches most of millions of runs is stopped with ErrQueryTimeout
// rather than hold its caller (and a connection) for minutes.
const QueryTimeout = 10 * time.Second

// queryTimeout is the timeout queries run with: QueryTimeout, shortened by
// SetQueryTimeout in tests of the timeout itself.
var queryTimeout = QueryTimeout

// SetQueryTimeout sets the timeout of every later query and returns the
// function that restores the previous one. It is for tests of the timeout:
// a query that outlives a millisecond is easy to make, one of ten seconds
// is not.
func SetQueryTimeout(d time.Duration) (restore func()) {
	prev := queryTimeout
	queryTimeout = d
	return func() { queryTimeout = prev }
}

// MaxCountGroups is the most groups a grouped count returns.
const MaxCountGroups = 1000

// queryMarker is what a query's clause replaces in a statement.
const queryMarker = "/*query*/ TRUE"

// whereBuilder writes a clause and its parameters.
type whereBuilder struct {
	b     strings.Builder
	args  pgx.NamedArgs
	attrs map[string]AttributeKind
	// skip is a predicate written as TRUE: a join holds it (buildSearch).
	skip *filter.Pred
}

// param names v as the next parameter, cast to kind's type.
func (w *whereBuilder) param(v any, kind filter.Kind) string {
	name := fmt.Sprintf("q%d", len(w.args)+1)
	w.args[name] = v
	return "@" + name + "::" + sqlType(kind)
}

func sqlType(k filter.Kind) string {
	switch k {
	case filter.Int:
		return "bigint"
	case filter.Float:
		return "float8"
	case filter.Bool:
		return "boolean"
	case filter.Time:
		return "timestamptz"
	}
	return "text"
}

// valueColumn is the column of kagzi.run_attributes that holds kind.
func valueColumn(k filter.Kind) string {
	switch k {
	case filter.Int:
		return "a.v_int"
	case filter.Float:
		return "a.v_float"
	case filter.Bool:
		return "a.v_bool"
	case filter.Time:
		return "a.v_time"
	}
	return "a.v_text"
}

// BuildWhere translates q, in the namespace whose declared attributes
// are attrs, into a clause over runs aliased r and its parameters. An
// empty q is TRUE. A query that does not parse or check is
// core.ErrInvalidArgument with the position.
func BuildWhere(q string, attrs map[string]AttributeKind) (string, pgx.NamedArgs, error) {
	clause, _, args, err := buildSearch(q, attrs, false)
	return clause, args, err
}

// buildSearch is BuildWhere, and besides (drives), for a query that holds only for
// runs with one attribute value (`attr = v` alone or ANDed with the rest),
// drive: the condition that joins that value's rows of run_attributes,
// aliased d, to the runs. A listing newest first then walks that value's
// index in d.created_at order (a run's own created_at, copied) and stops
// after a page, rather than reading every run that holds the value and
// sorting them: at 5 million runs a customer's 500 runs cost 500 lookups,
// a page 50. A run holds a value once (a keyword list holds distinct
// values), so the join repeats no run.
func buildSearch(q string, attrs map[string]AttributeKind, drives bool) (clause, drive string, args pgx.NamedArgs, err error) {
	e, err := filter.Parse(q)
	if err != nil {
		return "", "", nil, fmt.Errorf("%w: %v", core.ErrInvalidArgument, err)
	}
	if e == nil {
		return "TRUE", "", pgx.NamedArgs{}, nil
	}
	kinds := func(name string) (filter.Kind, bool) {
		if f, ok := core.BuiltinFields[name]; ok {
			return f.Kind, true
		}
		k, ok := attrs[name]
		return k, ok
	}
	if err := filter.Check(e, kinds); err != nil {
		var fe *filter.Error
		if errors.As(err, &fe) && strings.HasPrefix(fe.Msg, "unknown field") {
			return "", "", nil, fmt.Errorf("%w: %v (fields: %s)", core.ErrInvalidArgument, err, strings.Join(fieldNames(attrs), ", "))
		}
		return "", "", nil, fmt.Errorf("%w: %v", core.ErrInvalidArgument, err)
	}
	w := &whereBuilder{args: pgx.NamedArgs{}, attrs: attrs}
	p := drivingPred(e, attrs)
	if drives {
		// The join holds the predicate: the clause need not test it again
		// (an EXISTS the planner would join a second time).
		w.skip = p
	}
	w.expr(e)
	clause = w.b.String()
	if p != nil && drives {
		w.b.Reset()
		k := attrs[p.Field]
		w.b.WriteString("d.run_id = r.run_id AND d.namespace_id = r.namespace_id AND d.name = " + w.param(p.Field, filter.Keyword) + " AND ")
		w.compare(strings.Replace(valueColumn(k), "a.", "d.", 1), p, k)
		drive = w.b.String()
	}
	return clause, drive, w.args, nil
}

// drivingPred is the `attr = v` predicate over a declared attribute that
// e requires (e itself, or one of a top-level AND's items), or nil.
func drivingPred(e filter.Expr, attrs map[string]AttributeKind) *filter.Pred {
	items := []filter.Expr{e}
	if a, ok := e.(*filter.And); ok {
		items = a.Items
	}
	for _, x := range items {
		if p, ok := x.(*filter.Pred); ok && p.Op == filter.OpEq {
			if _, ok := attrs[p.Field]; ok {
				return p
			}
		}
	}
	return nil
}

func (w *whereBuilder) expr(e filter.Expr) {
	switch x := e.(type) {
	case *filter.And:
		w.list(x.Items, " AND ")
	case *filter.Or:
		w.list(x.Items, " OR ")
	case *filter.Not:
		// Every predicate's clause is true or false, never NULL (a
		// column's NULL compares false), so NOT is plain.
		w.b.WriteString("(NOT ")
		w.expr(x.X)
		w.b.WriteString(")")
	case *filter.Pred:
		if x == w.skip {
			w.b.WriteString("TRUE")
			return
		}
		w.pred(x)
	}
}

func (w *whereBuilder) list(items []filter.Expr, sep string) {
	w.b.WriteString("(")
	for i, x := range items {
		if i > 0 {
			w.b.WriteString(sep)
		}
		w.expr(x)
	}
	w.b.WriteString(")")
}

// values converts p's values (Check has accepted them).
func (w *whereBuilder) values(p *filter.Pred, k filter.Kind) []any {
	out := make([]any, len(p.Values))
	for i, v := range p.Values {
		out[i], _ = filter.Convert(v, k)
		if p.Field == "status" {
			out[i] = strings.ToUpper(out[i].(string))
		}
	}
	return out
}

// compare writes col op value(s) for a predicate that has values.
func (w *whereBuilder) compare(col string, p *filter.Pred, k filter.Kind) {
	vs := w.values(p, k)
	switch p.Op {
	case filter.OpIn:
		w.b.WriteString(col + " = ANY(" + w.arrayParam(vs, k) + ")")
	case filter.OpStartsWith:
		w.b.WriteString("starts_with(" + col + ", " + w.param(vs[0], k) + ")")
	case filter.OpNe:
		w.b.WriteString(col + " <> " + w.param(vs[0], k))
	default: // =, <, <=, >, >=: the operator is one of filter's constants
		w.b.WriteString(col + " " + string(p.Op) + " " + w.param(vs[0], k))
	}
}

// arrayParam names vs as one array parameter.
func (w *whereBuilder) arrayParam(vs []any, k filter.Kind) string {
	var arr any
	switch k {
	case filter.Int:
		a := make([]int64, len(vs))
		for i, v := range vs {
			a[i] = v.(int64)
		}
		arr = a
	case filter.Float:
		a := make([]float64, len(vs))
		for i, v := range vs {
			a[i] = v.(float64)
		}
		arr = a
	case filter.Bool:
		a := make([]bool, len(vs))
		for i, v := range vs {
			a[i] = v.(bool)
		}
		arr = a
	case filter.Time:
		a := make([]time.Time, len(vs))
		for i, v := range vs {
			a[i] = v.(time.Time)
		}
		arr = a
	default:
		a := make([]string, len(vs))
		for i, v := range vs {
			a[i] = v.(string)
		}
		arr = a
	}
	name := fmt.Sprintf("q%d", len(w.args)+1)
	w.args[name] = arr
	return "@" + name + "::" + sqlType(k) + "[]"
}

func (w *whereBuilder) pred(p *filter.Pred) {
	if f, ok := core.BuiltinFields[p.Field]; ok {
		col := f.SQL()
		switch p.Op {
		case filter.OpIsNull:
			if f.Nullable {
				w.b.WriteString(col + " IS NULL")
			} else {
				w.b.WriteString("FALSE")
			}
		case filter.OpIsNotNull:
			if f.Nullable {
				w.b.WriteString(col + " IS NOT NULL")
			} else {
				w.b.WriteString("TRUE")
			}
		default:
			w.b.WriteString("coalesce(")
			w.compare(col, p, f.Kind)
			w.b.WriteString(", FALSE)")
		}
		return
	}
	k := w.attrs[p.Field]
	exists := "EXISTS"
	if p.Op == filter.OpIsNull {
		exists = "NOT EXISTS"
	}
	col := valueColumn(k)
	w.b.WriteString(exists + " (SELECT 1 FROM kagzi.run_attributes a WHERE a.run_id = r.run_id AND a.namespace_id = r.namespace_id AND a.name = ")
	w.b.WriteString(w.param(p.Field, filter.Keyword))
	w.b.WriteString(" AND " + col + " IS NOT NULL")
	if p.Op != filter.OpIsNull && p.Op != filter.OpIsNotNull {
		w.b.WriteString(" AND ")
		w.compare(col, p, k)
	}
	w.b.WriteString(")")
}

// withQuery returns stmt with its query marker replaced by clause.
func withQuery(stmt *namedSQL, clause string) string {
	return strings.Replace(stmt.Text(), queryMarker, "("+clause+")", 1)
}

// withDrive makes a search's statement text walk the attribute rows drive
// joins (buildSearch) newest first; the cursor bounds that walk too.
func withDrive(text, drive string) string {
	text = strings.Replace(text, "/*drive*/ kagzi.workflow_runs r", "kagzi.run_attributes d JOIN kagzi.workflow_runs r ON "+drive, 1)
	return strings.Replace(text, "ORDER BY /*order*/ r.created_at DESC",
		"AND (@after_created_at::timestamptz IS NULL OR d.created_at <= @after_created_at)\nORDER BY d.created_at DESC", 1)
}

// queryTx runs fn in a transaction whose statements stop after
// QueryTimeout, mapping the timeout to ErrQueryTimeout.
func (s *Ops) queryTx(ctx context.Context, what string, fn func(tx *Ops) error) error {
	err := s.inTx(ctx, func(tx *Ops) error {
		if _, err := runsQueryTimeoutSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"timeout": fmt.Sprint(queryTimeout.Milliseconds())}); err != nil {
			return mapErr(what, err)
		}
		return fn(tx)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" && ctx.Err() == nil {
		return fmt.Errorf("%s: %w: it ran longer than %s; narrow the query (a status, type or time bound)", what, core.ErrQueryTimeout, queryTimeout)
	}
	return err
}

// The statements of queries, written in sql/attributes.sql.
var (
	runsQueryTimeoutSQL    = stmt("RunsQueryTimeout")
	runsQueryCountSQL      = stmt("RunsQueryCount")
	runsQueryCountGroupSQL = stmt("RunsQueryCountGroup")
)

// CountGroup is the count of the runs whose group-by field has Value (nil:
// runs whose built-in field is empty, a finished_at of a live run say).
// A grouped count by an attribute counts the runs that hold it, as a terms
// aggregation does: runs without it form no group (count them with
// `attr IS NULL`). A run with a keyword list counts in each of its
// values' groups.
type CountGroup struct {
	Value *string
	Count int64
}

// RunsCountQuery counts the namespace's runs (templates excluded) that
// match query (the filter package's language; "" counts all). With
// groupBy, a built-in field or a declared attribute, it counts per value
// of it, the biggest groups first, at most MaxCountGroups of them (more is
// core.ErrInvalidArgument: group by a field with fewer values); values are
// written as text (a time in RFC 3339). Every run grouped by an attribute
// (query "") reads the maintained counts (AttributeCountsFold), so its
// cost follows the attribute's values, not its runs. The count stops after
// QueryTimeout with ErrQueryTimeout.
func (s *Ops) RunsCountQuery(ctx context.Context, namespace, query, groupBy string) (total int64, groups []CountGroup, err error) {
	if err := checkName("namespace", namespace, true); err != nil {
		return 0, nil, err
	}
	attrs, err := s.fields(ctx, namespace)
	if err != nil {
		return 0, nil, err
	}
	clause, args, err := BuildWhere(query, attrs)
	if err != nil {
		return 0, nil, err
	}
	args["namespace"] = namespace
	if groupBy == "" {
		err = s.queryTx(ctx, "count runs", func(tx *Ops) error {
			return mapErr("count runs", tx.h.DB.QueryRow(ctx, withQuery(runsQueryCountSQL, clause), args).Scan(&total))
		})
		return total, nil, err
	}
	text := withQuery(runsQueryCountGroupSQL, clause)
	k, isAttr := attrs[groupBy]
	switch f, ok := core.BuiltinFields[groupBy]; {
	case ok:
		text = strings.Replace(text, "/*group*/ NULL::text", groupText(f.SQL(), f.Kind), 1)
	case isAttr && strings.TrimSpace(query) == "":
		// Every run by an attribute: the maintained counts, one row per
		// value, not every run holding it.
		text, args = attributeCountsGroupSQL.Text(), pgx.NamedArgs{"namespace": namespace, "name": groupBy}
	case isAttr:
		text = strings.Replace(text, "/*group*/ NULL::text", groupText(valueColumn(k), k), 1)
		text = strings.Replace(text, "/*join*/", "JOIN kagzi.run_attributes a ON a.run_id = r.run_id AND a.namespace_id = r.namespace_id AND a.name = @group_name", 1)
		args["group_name"] = groupBy
	default:
		return 0, nil, fmt.Errorf("%w: group by: unknown field %q (fields: %s)", core.ErrInvalidArgument, groupBy, strings.Join(fieldNames(attrs), ", "))
	}
	args["limit"] = MaxCountGroups + 1
	total, groups, err = s.countGroups(ctx, text, args)
	if err != nil {
		return 0, nil, err
	}
	if len(groups) > MaxCountGroups {
		return 0, nil, fmt.Errorf("%w: %s has more than %d values among the runs counted; group by a field with fewer, or narrow the query", core.ErrInvalidArgument, groupBy, MaxCountGroups)
	}
	return total, groups, nil
}

// countGroups runs a grouped count's statement text.
func (s *Ops) countGroups(ctx context.Context, text string, args pgx.NamedArgs) (total int64, groups []CountGroup, err error) {
	err = s.queryTx(ctx, "count runs", func(tx *Ops) error {
		rows, err := tx.h.DB.Query(ctx, text, args)
		if err != nil {
			return mapErr("count runs", err)
		}
		defer rows.Close()
		for rows.Next() {
			var g CountGroup
			if err := rows.Scan(&g.Value, &g.Count); err != nil {
				return mapErr("count runs", err)
			}
			groups = append(groups, g)
			total += g.Count
		}
		return mapErr("count runs", rows.Err())
	})
	return total, groups, err
}

// groupText is a grouped column as text: a time in RFC 3339 (UTC).
func groupText(col string, k filter.Kind) string {
	if k == filter.Time {
		return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	}
	return col + "::text"
}
