package filter

import (
	"strings"
)

// Expr is a node of a parsed query: *And, *Or, *Not or *Pred.
type Expr interface {
	// String writes the node in the query language, in a canonical form:
	// Parse(e.String()) is a tree with the same String.
	String() string
	isExpr()
}

// And holds when each of Items holds (at least two).
type And struct{ Items []Expr }

// Or holds when one of Items holds (at least two).
type Or struct{ Items []Expr }

// Not holds when X does not.
type Not struct{ X Expr }

// Op is the operator of a predicate.
type Op string

// The operators of a predicate.
const (
	OpEq         Op = "="
	OpNe         Op = "!="
	OpLt         Op = "<"
	OpLe         Op = "<="
	OpGt         Op = ">"
	OpGe         Op = ">="
	OpIn         Op = "IN"
	OpStartsWith Op = "STARTS_WITH"
	OpIsNull     Op = "IS NULL"
	OpIsNotNull  Op = "IS NOT NULL"
)

// Pred compares one field: Field Op Values[0], Field IN (Values...), or
// Field IS [NOT] NULL (no Values).
type Pred struct {
	Field  string
	Op     Op
	Values []Value
	// Pos is the byte offset of the field in the query, for errors.
	Pos int
}

// ValueType is the lexical type of a literal.
type ValueType int

// The lexical types of a literal.
const (
	StringValue ValueType = iota
	NumberValue
	BoolValue
)

// Value is a literal as written: a string, a number (its text) or a
// boolean. Check says whether it fits its field.
type Value struct {
	Type ValueType
	// Text is the string's content or the number's text.
	Text string
	Bool bool
	Pos  int
}

func (*And) isExpr()  {}
func (*Or) isExpr()   {}
func (*Not) isExpr()  {}
func (*Pred) isExpr() {}

func (e *And) String() string { return join(e.Items, " AND ") }
func (e *Or) String() string  { return join(e.Items, " OR ") }
func (e *Not) String() string { return "NOT " + group(e.X) }

func (e *Pred) String() string {
	var b strings.Builder
	b.WriteString(e.Field)
	switch e.Op {
	case OpIsNull, OpIsNotNull:
		b.WriteString(" " + string(e.Op))
	case OpIn:
		b.WriteString(" IN (")
		for i, v := range e.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.String())
		}
		b.WriteString(")")
	default:
		b.WriteString(" " + string(e.Op) + " ")
		if len(e.Values) > 0 {
			b.WriteString(e.Values[0].String())
		}
	}
	return b.String()
}

// String writes the literal: a string in single quotes.
func (v Value) String() string {
	switch v.Type {
	case NumberValue:
		return v.Text
	case BoolValue:
		if v.Bool {
			return "true"
		}
		return "false"
	}
	return "'" + strings.ReplaceAll(v.Text, "'", "''") + "'"
}

// join writes items with sep, each compound item in parentheses.
func join(items []Expr, sep string) string {
	parts := make([]string, len(items))
	for i, x := range items {
		parts[i] = group(x)
	}
	return strings.Join(parts, sep)
}

// group writes x, in parentheses if it is an And or an Or.
func group(x Expr) string {
	switch x.(type) {
	case *And, *Or:
		return "(" + x.String() + ")"
	}
	return x.String()
}
