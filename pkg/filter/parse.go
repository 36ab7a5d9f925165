package filter

import (
	"fmt"
	"strings"
)

// The bounds of a query.
const (
	// MaxLength is the longest query, in bytes.
	MaxLength = 4096
	// MaxDepth is the deepest nesting of AND, OR and NOT.
	MaxDepth = 32
	// MaxPredicates is the most predicates a query holds.
	MaxPredicates = 64
	// MaxInValues is the most values of one IN list.
	MaxInValues = 100
)

// Error is a query that does not parse or check, at a byte offset.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("query: at %d: %s", e.Pos, e.Msg) }

func errAt(pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tString
	tNumber
	tOp
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string // an identifier, an operator, a string's content, a number
	pos  int
}

// lex splits q into tokens.
func lex(q string) ([]token, error) {
	var out []token
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out = append(out, token{tLParen, "(", i})
			i++
		case c == ')':
			out = append(out, token{tRParen, ")", i})
			i++
		case c == ',':
			out = append(out, token{tComma, ",", i})
			i++
		case c == '=':
			out = append(out, token{tOp, "=", i})
			i++
		case c == '!' || c == '<' || c == '>':
			op := string(c)
			if i+1 < len(q) && (q[i+1] == '=' || c == '<' && q[i+1] == '>') {
				op += string(q[i+1])
			}
			if op == "!" {
				return nil, errAt(i, "'!' must be followed by '='")
			}
			if op == "<>" {
				out = append(out, token{tOp, "!=", i})
			} else {
				out = append(out, token{tOp, op, i})
			}
			i += len(op)
		case c == '\'' || c == '"':
			start := i
			var b strings.Builder
			i++
			for {
				if i >= len(q) {
					return nil, errAt(start, "unterminated string")
				}
				if q[i] == c {
					if i+1 < len(q) && q[i+1] == c {
						b.WriteByte(c)
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(q[i])
				i++
			}
			out = append(out, token{tString, b.String(), start})
		case c == '-' || c == '.' || isDigit(c):
			start := i
			if c == '-' {
				i++
			}
			digits := 0
			for i < len(q) && isDigit(q[i]) {
				i, digits = i+1, digits+1
			}
			if i < len(q) && q[i] == '.' {
				i++
				for i < len(q) && isDigit(q[i]) {
					i, digits = i+1, digits+1
				}
			}
			if digits == 0 {
				return nil, errAt(start, "malformed number")
			}
			if i < len(q) && (q[i] == 'e' || q[i] == 'E') {
				i++
				if i < len(q) && (q[i] == '+' || q[i] == '-') {
					i++
				}
				exp := 0
				for i < len(q) && isDigit(q[i]) {
					i, exp = i+1, exp+1
				}
				if exp == 0 {
					return nil, errAt(start, "malformed number")
				}
			}
			if i < len(q) && isIdentByte(q[i]) {
				return nil, errAt(start, "malformed number")
			}
			out = append(out, token{tNumber, q[start:i], start})
		case isIdentStart(c):
			// A name, or a dotted path of names (a key nested in a JSON
			// payload: order.amount); a dot not followed by a name ends it.
			start := i
			for i < len(q) && (isIdentByte(q[i]) || q[i] == '.' && i+1 < len(q) && isIdentStart(q[i+1])) {
				i++
			}
			out = append(out, token{tIdent, q[start:i], start})
		default:
			return nil, errAt(i, "unexpected character %q", rune(c))
		}
	}
	return append(out, token{tEOF, "", len(q)}), nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// keywords are the reserved words: no field is named one of these.
var keywords = map[string]bool{"AND": true, "OR": true, "NOT": true, "IN": true, "IS": true, "NULL": true,
	"STARTS_WITH": true, "TRUE": true, "FALSE": true}

// IsKeyword reports whether name is a reserved word of the language (in
// any case), which no field may be named.
func IsKeyword(name string) bool { return keywords[strings.ToUpper(name)] }

type parser struct {
	toks  []token
	i     int
	preds int
}

// Parse parses a query. The empty (or blank) query is a nil Expr: it
// filters nothing.
func Parse(q string) (Expr, error) {
	if len(q) > MaxLength {
		return nil, errAt(MaxLength, "the query is %d bytes, above the maximum %d", len(q), MaxLength)
	}
	toks, err := lex(q)
	if err != nil {
		return nil, err
	}
	if toks[0].kind == tEOF {
		return nil, nil
	}
	p := &parser{toks: toks}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, errAt(t.pos, "unexpected %s", describe(t))
	}
	if d := Depth(e); d > MaxDepth {
		return nil, errAt(0, "the query nests %d deep, above the maximum %d", d, MaxDepth)
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// isWord reports whether t is the keyword w.
func isWord(t token, w string) bool { return t.kind == tIdent && strings.EqualFold(t.text, w) }

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of query"
	case tString:
		return "string"
	}
	return fmt.Sprintf("%q", t.text)
}

func (p *parser) or() (Expr, error) {
	x, err := p.and()
	if err != nil {
		return nil, err
	}
	if !isWord(p.peek(), "OR") {
		return x, nil
	}
	items := flatten[*Or](nil, x)
	for isWord(p.peek(), "OR") {
		p.next()
		y, err := p.and()
		if err != nil {
			return nil, err
		}
		items = flatten[*Or](items, y)
	}
	return &Or{Items: items}, nil
}

func (p *parser) and() (Expr, error) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	if !isWord(p.peek(), "AND") {
		return x, nil
	}
	items := flatten[*And](nil, x)
	for isWord(p.peek(), "AND") {
		p.next()
		y, err := p.unary()
		if err != nil {
			return nil, err
		}
		items = flatten[*And](items, y)
	}
	return &And{Items: items}, nil
}

// flatten appends x to items, or x's items if x is a T: (a AND b) AND c
// is a AND b AND c, so the tree, and its String, is canonical.
func flatten[T interface{ *And | *Or }](items []Expr, x Expr) []Expr {
	switch y := x.(type) {
	case *And:
		if _, ok := any(T(nil)).(*And); ok {
			return append(items, y.Items...)
		}
	case *Or:
		if _, ok := any(T(nil)).(*Or); ok {
			return append(items, y.Items...)
		}
	}
	return append(items, x)
}

func (p *parser) unary() (Expr, error) {
	t := p.peek()
	switch {
	case isWord(t, "NOT"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Not{X: x}, nil
	case t.kind == tLParen:
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tRParen {
			return nil, errAt(c.pos, "expected ')' to close the '(' at %d, got %s", t.pos, describe(c))
		}
		return x, nil
	}
	return p.pred()
}

func (p *parser) pred() (Expr, error) {
	f := p.next()
	if f.kind != tIdent || IsKeyword(f.text) {
		return nil, errAt(f.pos, "expected a field name, got %s", describe(f))
	}
	p.preds++
	if p.preds > MaxPredicates {
		return nil, errAt(f.pos, "the query has more than %d predicates", MaxPredicates)
	}
	e := &Pred{Field: f.text, Pos: f.pos}
	t := p.next()
	switch {
	case t.kind == tOp:
		e.Op = Op(t.text)
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		e.Values = []Value{v}
	case isWord(t, "STARTS_WITH"):
		e.Op = OpStartsWith
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		e.Values = []Value{v}
	case isWord(t, "IS"):
		e.Op = OpIsNull
		if isWord(p.peek(), "NOT") {
			p.next()
			e.Op = OpIsNotNull
		}
		if n := p.next(); !isWord(n, "NULL") {
			return nil, errAt(n.pos, "expected NULL after IS, got %s", describe(n))
		}
	case isWord(t, "IN"):
		e.Op = OpIn
		if l := p.next(); l.kind != tLParen {
			return nil, errAt(l.pos, "expected '(' after IN, got %s", describe(l))
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if len(e.Values) == MaxInValues {
				return nil, errAt(v.Pos, "IN lists more than %d values", MaxInValues)
			}
			e.Values = append(e.Values, v)
			c := p.next()
			if c.kind == tRParen {
				break
			}
			if c.kind != tComma {
				return nil, errAt(c.pos, "expected ',' or ')' in the IN list, got %s", describe(c))
			}
		}
	default:
		return nil, errAt(t.pos, "expected an operator after %s, got %s", f.text, describe(t))
	}
	return e, nil
}

func (p *parser) value() (Value, error) {
	t := p.next()
	switch {
	case t.kind == tString:
		return Value{Type: StringValue, Text: t.text, Pos: t.pos}, nil
	case t.kind == tNumber:
		return Value{Type: NumberValue, Text: t.text, Pos: t.pos}, nil
	case isWord(t, "TRUE"):
		return Value{Type: BoolValue, Bool: true, Pos: t.pos}, nil
	case isWord(t, "FALSE"):
		return Value{Type: BoolValue, Bool: false, Pos: t.pos}, nil
	}
	return Value{}, errAt(t.pos, "expected a value (a quoted string, a number, true or false), got %s", describe(t))
}

// Depth is how deep e nests: 1 for a predicate, one more for each AND,
// OR or NOT above it.
func Depth(e Expr) int {
	switch x := e.(type) {
	case *And:
		return 1 + maxDepth(x.Items)
	case *Or:
		return 1 + maxDepth(x.Items)
	case *Not:
		return 1 + Depth(x.X)
	}
	return 1
}

func maxDepth(items []Expr) int {
	m := 0
	for _, x := range items {
		m = max(m, Depth(x))
	}
	return m
}
