package filter

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// A query can also select JSON documents (the payloads of published
// events, which event triggers filter on): a field is a key of the
// document, or a dotted path of keys into nested objects (order.amount),
// and a literal is compared with the JSON value it finds there. Documents
// have no schema, so CheckJSON checks only what holds for every document,
// and Match decides the rest per document:
//
//   - a string literal compares with a JSON string, a number with a JSON
//     number (as float64), true and false with a JSON boolean; <, <=, >,
//     >= order numbers, and strings byte-wise;
//   - a predicate on a missing key, on a value of another type, or on an
//     array or object does not hold — whatever its operator, != included;
//     NOT inverts the whole predicate (NOT a = 1 holds when a is missing);
//   - IS NULL holds when the key is missing or its value is null, IS NOT
//     NULL when it has any other value.

// CheckJSON checks e as a query over JSON documents: each predicate's
// values fit its operator (STARTS_WITH takes a string, an order takes a
// string or a finite number, not a boolean) and each number is finite. A
// nil e checks.
func CheckJSON(e Expr) error {
	switch x := e.(type) {
	case *And:
		return checkJSONAll(x.Items)
	case *Or:
		return checkJSONAll(x.Items)
	case *Not:
		return CheckJSON(x.X)
	case *Pred:
		for _, v := range x.Values {
			switch {
			case x.Op == OpStartsWith && v.Type != StringValue:
				return errAt(v.Pos, "STARTS_WITH takes a string, not %s", v)
			case v.Type == BoolValue && (x.Op == OpLt || x.Op == OpLe || x.Op == OpGt || x.Op == OpGe):
				return errAt(v.Pos, "%s is a boolean: compare it with = or !=", v)
			case v.Type == NumberValue:
				if _, err := Convert(v, Float); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkJSONAll(items []Expr) error {
	for _, x := range items {
		if err := CheckJSON(x); err != nil {
			return err
		}
	}
	return nil
}

// DecodeJSON decodes a document for Match, numbers kept as json.Number.
func DecodeJSON(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Match reports whether the document doc (as DecodeJSON returns it)
// satisfies e, a query that CheckJSON accepted. A nil e matches every
// document.
func Match(e Expr, doc any) bool {
	switch x := e.(type) {
	case nil:
		return true
	case *And:
		for _, y := range x.Items {
			if !Match(y, doc) {
				return false
			}
		}
		return true
	case *Or:
		for _, y := range x.Items {
			if Match(y, doc) {
				return true
			}
		}
		return false
	case *Not:
		return !Match(x.X, doc)
	case *Pred:
		return matchPred(x, doc)
	}
	return false
}

// lookup returns the value at a dotted path of doc, false when a key on
// the way is missing or is not an object.
func lookup(doc any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		if doc, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return doc, true
}

func matchPred(p *Pred, doc any) bool {
	v, ok := lookup(doc, p.Field)
	switch p.Op {
	case OpIsNull:
		return !ok || v == nil
	case OpIsNotNull:
		return ok && v != nil
	}
	if !ok {
		return false
	}
	switch p.Op {
	case OpIn:
		for _, lit := range p.Values {
			if c, ok := compare(v, lit); ok && c == 0 {
				return true
			}
		}
		return false
	case OpStartsWith:
		s, ok := v.(string)
		return ok && len(p.Values) == 1 && p.Values[0].Type == StringValue && strings.HasPrefix(s, p.Values[0].Text)
	}
	if len(p.Values) != 1 {
		return false
	}
	c, ok := compare(v, p.Values[0])
	if !ok {
		return false
	}
	switch p.Op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	}
	return false
}

// compare orders the JSON value v against the literal lit: -1, 0 or 1,
// and false when they are of different types (or v is an array, an
// object or null). Booleans are equal or not (1 for unequal).
func compare(v any, lit Value) (int, bool) {
	switch x := v.(type) {
	case string:
		if lit.Type == StringValue {
			return strings.Compare(x, lit.Text), true
		}
	case bool:
		if lit.Type == BoolValue {
			if x == lit.Bool {
				return 0, true
			}
			return 1, true
		}
	case json.Number:
		if lit.Type != NumberValue {
			return 0, false
		}
		a, err1 := strconv.ParseFloat(x.String(), 64)
		b, err2 := strconv.ParseFloat(lit.Text, 64)
		if err1 != nil || err2 != nil || math.IsInf(a, 0) || math.IsInf(b, 0) {
			return 0, false
		}
		switch {
		case a < b:
			return -1, true
		case a > b:
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
