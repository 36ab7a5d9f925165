// Package filter is the query language of run listings and counts
// (store.RunsList, store.RunsCountQuery, `kagzi run list --query`): a
// lexer and a parser to an abstract syntax tree, and a checker that types
// each predicate against the fields a namespace has (the built-in columns
// and its declared search attributes). It holds no SQL: package store
// translates a checked tree into a parameterised WHERE clause. The same
// language selects JSON documents, the payloads event triggers filter on
// (CheckJSON, Match; see eval.go): there a field is a key, or a dotted
// path of keys (order.amount).
//
// The grammar, keywords case-insensitive:
//
//	expr      = and { OR and }
//	and       = unary { AND unary }
//	unary     = NOT unary | "(" expr ")" | predicate
//	field     = name { "." name }
//	predicate = field ( op value | IN "(" value { "," value } ")"
//	            | STARTS_WITH value | IS [NOT] NULL )
//	op        = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	value     = 'text' ('' for a quote) | "text" | number | TRUE | FALSE
//
// Times are written as RFC 3339 strings. A query is at most MaxLength
// bytes, nests at most MaxDepth deep and holds at most MaxPredicates
// predicates, so that what a query costs to parse and to run is bounded.
package filter
