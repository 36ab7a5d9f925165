package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/filter"
)

// Search attributes: typed values a run is started with, declared per
// namespace (kagzi.search_attributes) and stored one row per value
// (kagzi.run_attributes), by which runs are listed and counted.

// The bounds of search attributes.
const (
	// MaxAttributesDeclared is the most attributes a namespace declares.
	MaxAttributesDeclared = 100
	// MaxRunAttributes is the most attributes one run sets.
	MaxRunAttributes = 32
	// MaxKeywordBytes is the longest keyword value.
	MaxKeywordBytes = 256
	// MaxKeywordValues is the most values of one keyword list.
	MaxKeywordValues = 32
	// MaxTextBytes is the longest text value.
	MaxTextBytes = 2048
	// MaxAttributeBytes bounds all the values of one run together (a
	// number, a boolean or a time counts 8 bytes).
	MaxAttributeBytes = 16384
)

var attributeName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// CheckAttributeName checks the name of a search attribute to declare:
// a letter then letters, digits or '_', at most 64, neither a built-in
// field (BuiltinFields) nor a keyword of the query language.
func CheckAttributeName(name string) error {
	if !attributeName.MatchString(name) {
		return fmt.Errorf("%w %q: a name is a letter followed by at most 63 letters, digits or '_'", ErrAttribute, name)
	}
	if _, ok := BuiltinFields[name]; ok {
		return fmt.Errorf("%w %q: the name of a built-in field", ErrAttribute, name)
	}
	if filter.IsKeyword(name) {
		return fmt.Errorf("%w %q: a keyword of the query language", ErrAttribute, name)
	}
	return nil
}

// BuiltinField is a column of kagzi.workflow_runs a query may name.
type BuiltinField struct {
	// Column is the column's name: the only identifiers a query's SQL
	// takes come from this map.
	Column string
	Kind   filter.Kind
	// Nullable: IS NULL may hold.
	Nullable bool
	// Expr, when set, is the field's SQL over runs aliased r instead of
	// the column (a field computed from one: paused).
	Expr string
}

// SQL is the field's SQL over runs aliased r.
func (f BuiltinField) SQL() string {
	if f.Expr != "" {
		return f.Expr
	}
	return "r." + f.Column
}

// BuiltinFields are the fields of every run, by their name in a query.
var BuiltinFields = map[string]BuiltinField{
	"type":            {"workflow_type", filter.Keyword, false, ""},
	"queue":           {"task_queue", filter.Keyword, false, ""},
	"status":          {"status", filter.Keyword, false, ""},
	"version":         {"version", filter.Keyword, false, ""},
	"external_id":     {"external_id", filter.Keyword, true, ""},
	"concurrency_key": {"concurrency_key", filter.Keyword, true, ""},
	"rate_key":        {"rate_key", filter.Keyword, true, ""},
	"debounce_key":    {"debounce_key", filter.Keyword, true, ""},
	"error":           {"error", filter.Text, true, ""},
	"priority":        {"priority", filter.Int, false, ""},
	"attempts":        {"attempts", filter.Int, false, ""},
	"created_at":      {"created_at", filter.Time, false, ""},
	"started_at":      {"started_at", filter.Time, true, ""},
	"finished_at":     {"finished_at", filter.Time, true, ""},
	"deadline_at":     {"deadline_at", filter.Time, true, ""},
	// A live run that is paused (a run's pause ends with it). Its own
	// pause only: a run of a paused queue or type is not.
	"paused":    {"paused_at", filter.Bool, false, "(r.paused_at IS NOT NULL)"},
	"paused_at": {"paused_at", filter.Time, true, ""},
	"paused_by": {"paused_by", filter.Keyword, true, ""},
	// The error type of the run's failed step (its latest attempt; the
	// newest such step), as fork-many's --error-type reads it: NULL for a
	// run with none. A scalar subquery through the steps' latest index,
	// so it costs a lookup per run the rest of the query leaves.
	"error_type": {"error_type", filter.Keyword, true,
		"(SELECT s.error_type FROM kagzi.step_runs s WHERE s.run_id = r.run_id AND s.is_latest AND s.status = 'FAILED' " +
			"ORDER BY s.created_at DESC, s.step_id LIMIT 1)"},
}

// AttrRow is one stored value of a run's attribute: exactly one of the
// value fields is set.
type AttrRow struct {
	Name  string
	Text  *string
	Int   *int64
	Float *float64
	Bool  *bool
	Time  *time.Time
}

// AttrArrays are rows as the array parameters of an insert.
type AttrArrays struct {
	RunIDs []any
	Names  []string
	Texts  []*string
	Ints   []*int64
	Floats []*float64
	Bools  []*bool
	Times  []*time.Time
}

// Add appends the rows of run id.
func (a *AttrArrays) Add(id any, rows []AttrRow) {
	for _, r := range rows {
		a.RunIDs = append(a.RunIDs, id)
		a.Names = append(a.Names, r.Name)
		a.Texts = append(a.Texts, r.Text)
		a.Ints = append(a.Ints, r.Int)
		a.Floats = append(a.Floats, r.Float)
		a.Bools = append(a.Bools, r.Bool)
		a.Times = append(a.Times, r.Time)
	}
}

// AttributeRows checks a run's attributes against the namespace's
// declared kinds and returns their rows, in the order of their names.
// Go types: string (keyword or text), []string (keyword), the integer
// types (int, or float), float32 and float64 (float), bool, time.Time.
func AttributeRows(attrs map[string]any, declared map[string]filter.Kind) ([]AttrRow, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	if len(attrs) > MaxRunAttributes {
		return nil, fmt.Errorf("%w: a run sets %d attributes, above the maximum %d", ErrAttribute, len(attrs), MaxRunAttributes)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var rows []AttrRow
	size := 0
	for _, n := range names {
		k, ok := declared[n]
		if !ok {
			return nil, undeclared(n, declared)
		}
		add, err := attrValues(n, k, attrs[n])
		if err != nil {
			return nil, err
		}
		for _, r := range add {
			if r.Text != nil {
				size += len(*r.Text)
			} else {
				size += 8
			}
		}
		rows = append(rows, add...)
	}
	if size > MaxAttributeBytes {
		return nil, fmt.Errorf("%w: the run's attribute values are %d bytes together, above the maximum %d", ErrAttribute, size, MaxAttributeBytes)
	}
	return rows, nil
}

// undeclared is the error of an attribute the namespace does not declare.
func undeclared(name string, declared map[string]filter.Kind) error {
	if len(declared) == 0 {
		return fmt.Errorf("%w %q: not declared (the namespace declares none; kagzi attribute declare)", ErrAttribute, name)
	}
	if len(declared) > 10 {
		return fmt.Errorf("%w %q: not declared (kagzi attribute list)", ErrAttribute, name)
	}
	ns := make([]string, 0, len(declared))
	for n := range declared {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return fmt.Errorf("%w %q: not declared (declared: %s)", ErrAttribute, name, strings.Join(ns, ", "))
}

func attrValues(name string, k filter.Kind, v any) ([]AttrRow, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q (%s): "+format, append([]any{ErrAttribute, name, k}, args...)...)
	}
	mismatch := func() error { return bad("a %T does not fit a %s attribute", v, k) }
	text := func(s string) ([]AttrRow, error) {
		limit := MaxKeywordBytes
		if k == filter.Text {
			limit = MaxTextBytes
		}
		if len(s) > limit {
			return nil, bad("a value of %d bytes, above the maximum %d", len(s), limit)
		}
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return nil, bad("a value that is not UTF-8 text")
		}
		return []AttrRow{{Name: name, Text: &s}}, nil
	}
	integer := func(n int64) ([]AttrRow, error) {
		switch k {
		case filter.Int:
			return []AttrRow{{Name: name, Int: &n}}, nil
		case filter.Float:
			f := float64(n)
			return []AttrRow{{Name: name, Float: &f}}, nil
		}
		return nil, mismatch()
	}
	switch x := v.(type) {
	case string:
		if k != filter.Keyword && k != filter.Text {
			return nil, mismatch()
		}
		return text(x)
	case []string:
		if k != filter.Keyword {
			return nil, mismatch()
		}
		if len(x) == 0 || len(x) > MaxKeywordValues {
			return nil, bad("a list of %d values; give 1 to %d", len(x), MaxKeywordValues)
		}
		// A list holds distinct values: a repeated one is kept once, so
		// a run is one row of each value it holds (a listing joins them).
		var out []AttrRow
		seen := make(map[string]bool, len(x))
		for _, s := range x {
			if seen[s] {
				continue
			}
			seen[s] = true
			r, err := text(s)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	case int:
		return integer(int64(x))
	case int8:
		return integer(int64(x))
	case int16:
		return integer(int64(x))
	case int32:
		return integer(int64(x))
	case int64:
		return integer(x)
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, bad("%d is above the 64-bit range", x)
		}
		return integer(int64(x))
	case uint8:
		return integer(int64(x))
	case uint16:
		return integer(int64(x))
	case uint32:
		return integer(int64(x))
	case uint64:
		if x > math.MaxInt64 {
			return nil, bad("%d is above the 64-bit range", x)
		}
		return integer(int64(x))
	case float32:
		return floatRow(name, k, float64(x), mismatch, bad)
	case float64:
		return floatRow(name, k, x, mismatch, bad)
	case bool:
		if k != filter.Bool {
			return nil, mismatch()
		}
		return []AttrRow{{Name: name, Bool: &x}}, nil
	case time.Time:
		if k != filter.Time {
			return nil, mismatch()
		}
		if err := CheckTime(name, &x); err != nil {
			return nil, bad("%v", err)
		}
		return []AttrRow{{Name: name, Time: &x}}, nil
	}
	return nil, mismatch()
}

func floatRow(name string, k filter.Kind, f float64, mismatch func() error, bad func(string, ...any) error) ([]AttrRow, error) {
	if k != filter.Float {
		return nil, mismatch()
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, bad("%v is not a finite number", f)
	}
	return []AttrRow{{Name: name, Float: &f}}, nil
}

// AttributeValue is the Go value of stored rows of one attribute: a
// string, []string (a keyword with several values), int64, float64, bool
// or time.Time.
func AttributeValue(rows []AttrRow) any {
	if len(rows) == 0 {
		return nil
	}
	r := rows[0]
	switch {
	case r.Text != nil:
		if len(rows) == 1 {
			return *r.Text
		}
		out := make([]string, 0, len(rows))
		for _, x := range rows {
			if x.Text != nil {
				out = append(out, *x.Text)
			}
		}
		return out
	case r.Int != nil:
		return *r.Int
	case r.Float != nil:
		return *r.Float
	case r.Bool != nil:
		return *r.Bool
	case r.Time != nil:
		return *r.Time
	}
	return nil
}

// The statements of search attributes, written in sql/attributes.sql.
var (
	attributeKindsSQL = stmt("AttributeKinds")
	runAttributesSQL  = stmt("RunAttributes")
)

// AttributeKinds returns the kinds of the namespace's declared attributes.
// A start or a schedule reads them only when it sets attributes.
func AttributeKinds(ctx context.Context, db DBTX, namespace string) (map[string]filter.Kind, error) {
	rows, err := attributeKindsSQL.Query(ctx, db, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, MapErr("read declared attributes", err)
	}
	defer rows.Close()
	out := map[string]filter.Kind{}
	for rows.Next() {
		var n string
		var k filter.Kind
		if err := rows.Scan(&n, &k); err != nil {
			return nil, MapErr("read declared attributes", err)
		}
		out[n] = k
	}
	return out, MapErr("read declared attributes", rows.Err())
}

// KindsRead holds the declared kinds read by one call that checks many
// starts' attributes, by namespace, so a StartMany of a thousand runs
// reads them once, not a thousand times (nil: read each time).
type KindsRead map[string]map[string]filter.Kind

// CheckAttributes reads the namespace's declared kinds (only when attrs
// has any, and once per namespace into read) and returns attrs's rows
// (AttributeRows).
func CheckAttributes(ctx context.Context, db DBTX, namespace string, attrs map[string]any, read KindsRead) ([]AttrRow, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	declared, ok := read[namespace]
	if !ok {
		var err error
		if declared, err = AttributeKinds(ctx, db, namespace); err != nil {
			return nil, err
		}
		if read != nil {
			read[namespace] = declared
		}
	}
	return AttributeRows(attrs, declared)
}

// RunAttributes returns the search attributes of a run (or a schedule
// template) by name, as AttributeValue gives them. A run without any has
// an empty map.
func RunAttributes(ctx context.Context, db DBTX, namespace string, runID uuid.UUID) (map[string]any, error) {
	rows, err := runAttributesSQL.Query(ctx, db, pgx.NamedArgs{"namespace": namespace, "run_id": runID})
	if err != nil {
		return nil, MapErr("run attributes", err)
	}
	defer rows.Close()
	by := map[string][]AttrRow{}
	for rows.Next() {
		var r AttrRow
		if err := rows.Scan(&r.Name, &r.Text, &r.Int, &r.Float, &r.Bool, &r.Time); err != nil {
			return nil, MapErr("run attributes", err)
		}
		by[r.Name] = append(by[r.Name], r)
	}
	if err := rows.Err(); err != nil {
		return nil, MapErr("run attributes", err)
	}
	out := make(map[string]any, len(by))
	for n, rs := range by {
		out[n] = AttributeValue(rs)
	}
	return out, nil
}

// AttributesFromJSON reads a JSON object of attribute values, as a
// workflow sets them (workflow.SetAttributes), by the kinds declared: a
// keyword is a string or a list of strings, a text a string, an int an
// integer, a float a number, a bool true or false, a time an RFC 3339
// string; null removes the attribute. It returns the values to set and
// the names to remove, each name declared.
func AttributesFromJSON(raw []byte, declared map[string]filter.Kind) (set map[string]any, remove []string, err error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, nil, fmt.Errorf("%w: attributes must be a JSON object", ErrAttribute)
	}
	set = map[string]any{}
	for name, v := range obj {
		k, ok := declared[name]
		if !ok {
			return nil, nil, undeclared(name, declared)
		}
		if string(bytes.TrimSpace(v)) == "null" {
			remove = append(remove, name)
			continue
		}
		var val any
		var derr error
		switch k {
		case filter.Keyword:
			if val, derr = decodeAs[[]string](v); derr != nil {
				val, derr = decodeAs[string](v)
			}
		case filter.Text:
			val, derr = decodeAs[string](v)
		case filter.Int:
			val, derr = decodeAs[int64](v)
		case filter.Float:
			val, derr = decodeAs[float64](v)
		case filter.Bool:
			val, derr = decodeAs[bool](v)
		case filter.Time:
			val, derr = decodeAs[time.Time](v)
		}
		if derr != nil {
			return nil, nil, fmt.Errorf("%w %q (%s): %s does not fit a %s attribute", ErrAttribute, name, k, clipJSON(v), k)
		}
		set[name] = val
	}
	sort.Strings(remove)
	return set, remove, nil
}

// decodeAs decodes v as a T, returned as the attribute value it is.
func decodeAs[T any](v []byte) (any, error) {
	var x T
	err := json.Unmarshal(v, &x)
	return x, err
}

// clipJSON is a value as an error quotes it: at most 100 bytes.
func clipJSON(v []byte) string {
	if len(v) > 100 {
		return string(v[:100]) + "…"
	}
	return string(v)
}

// The statements that change a run's attributes apart from its start,
// written in sql/attributes.sql.
var (
	runsAttributesAddSQL    = stmt("RunsAttributesAdd")
	runsAttributesRemoveSQL = stmt("RunsAttributesRemove")
)

// AddAttributes inserts rows as run id's attributes.
func AddAttributes(ctx context.Context, db DBTX, id uuid.UUID, rows []AttrRow) error {
	if len(rows) == 0 {
		return nil
	}
	var a AttrArrays
	a.Add(id, rows)
	_, err := runsAttributesAddSQL.Exec(ctx, db, pgx.NamedArgs{"attr_run_ids": a.RunIDs, "attr_names": a.Names,
		"attr_texts": a.Texts, "attr_ints": a.Ints, "attr_floats": a.Floats, "attr_bools": a.Bools, "attr_times": a.Times})
	return MapErr("add attributes", err)
}

// MergeAttributes is the run's attributes with raw (a JSON object of name
// to value, null removing the name, as AttributesFromJSON reads it)
// applied, checked against the declarations and the run's limits, and
// every name they touch. An error that is not ErrAttribute is the
// store's.
func MergeAttributes(ctx context.Context, db DBTX, namespace string, runID uuid.UUID, raw []byte,
	declared map[string]filter.Kind) (rows []AttrRow, names []string, err error) {
	set, remove, err := AttributesFromJSON(raw, declared)
	if err != nil {
		return nil, nil, err
	}
	have, err := RunAttributes(ctx, db, namespace, runID)
	if err != nil {
		return nil, nil, err
	}
	names = make([]string, 0, len(have)+len(set))
	for n := range have {
		names = append(names, n)
	}
	for n, v := range set {
		if _, ok := have[n]; !ok {
			names = append(names, n)
		}
		have[n] = v
	}
	for _, n := range remove {
		delete(have, n)
	}
	if rows, err = AttributeRows(have, declared); err != nil {
		return nil, nil, err
	}
	return rows, names, nil
}

// ReplaceAttributes makes rows the run's values of names: the values it
// held of them are removed, rows are inserted (MergeAttributes's result).
func ReplaceAttributes(ctx context.Context, db DBTX, namespace string, runID uuid.UUID, names []string, rows []AttrRow) error {
	if _, err := runsAttributesRemoveSQL.Exec(ctx, db, pgx.NamedArgs{"namespace": namespace, "run_id": runID, "names": names}); err != nil {
		return MapErr("set attributes", err)
	}
	return AddAttributes(ctx, db, runID, rows)
}
