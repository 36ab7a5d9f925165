package filter

import (
	"math"
	"strconv"
	"time"
)

// Kind is the type of a field: of a built-in column or of a declared
// search attribute.
type Kind string

// The kinds of a field. A keyword is matched whole (and a keyword
// attribute may hold several values: a predicate holds if one of them
// matches); a text is a longer string compared the same way.
const (
	Keyword Kind = "keyword"
	Text    Kind = "text"
	Int     Kind = "int"
	Float   Kind = "float"
	Bool    Kind = "bool"
	Time    Kind = "time"
)

// Kinds are the kinds, in the order documentation lists them.
var Kinds = []Kind{Keyword, Text, Int, Float, Bool, Time}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	switch k {
	case Keyword, Text, Int, Float, Bool, Time:
		return true
	}
	return false
}

// Fields gives the kind of a field by name, false for no such field.
type Fields func(name string) (Kind, bool)

// Check types every predicate of e against fields: the field exists, the
// operator applies to its kind, and each value converts to it (Convert).
// A nil e (the empty query) checks.
func Check(e Expr, fields Fields) error {
	switch x := e.(type) {
	case nil:
		return nil
	case *And:
		return checkAll(x.Items, fields)
	case *Or:
		return checkAll(x.Items, fields)
	case *Not:
		return Check(x.X, fields)
	case *Pred:
		k, ok := fields(x.Field)
		if !ok {
			return errAt(x.Pos, "unknown field %q", x.Field)
		}
		switch x.Op {
		case OpStartsWith:
			if k != Keyword && k != Text {
				return errAt(x.Pos, "STARTS_WITH applies to keyword and text fields; %s is %s", x.Field, k)
			}
		case OpLt, OpLe, OpGt, OpGe:
			if k == Bool {
				return errAt(x.Pos, "%s is bool: compare it with = or !=", x.Field)
			}
		}
		for _, v := range x.Values {
			if _, err := Convert(v, k); err != nil {
				return errAt(v.Pos, "%s (%s): %v", x.Field, k, err)
			}
		}
	}
	return nil
}

func checkAll(items []Expr, fields Fields) error {
	for _, x := range items {
		if err := Check(x, fields); err != nil {
			return err
		}
	}
	return nil
}

// Convert returns v as a value of kind k: a string for keyword and text, an
// int64, a float64, a bool, or a time.Time (from an RFC 3339 string).
func Convert(v Value, k Kind) (any, error) {
	switch k {
	case Keyword, Text:
		if v.Type == StringValue {
			return v.Text, nil
		}
	case Int:
		if v.Type == NumberValue {
			n, err := strconv.ParseInt(v.Text, 10, 64)
			if err != nil {
				return nil, errAt(v.Pos, "%s is not a 64-bit integer", v.Text)
			}
			return n, nil
		}
	case Float:
		if v.Type == NumberValue {
			f, err := strconv.ParseFloat(v.Text, 64)
			if err != nil || math.IsInf(f, 0) {
				return nil, errAt(v.Pos, "%s is not a finite number", v.Text)
			}
			return f, nil
		}
	case Bool:
		if v.Type == BoolValue {
			return v.Bool, nil
		}
	case Time:
		if v.Type == StringValue {
			t, err := time.Parse(time.RFC3339Nano, v.Text)
			if err != nil {
				return nil, errAt(v.Pos, "%q is not an RFC 3339 time (e.g. 2025-01-02T15:04:05Z)", v.Text)
			}
			return t, nil
		}
	}
	return nil, errAt(v.Pos, "%s is not a %s value", v, k)
}
