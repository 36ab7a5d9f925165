package core

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Every statement takes named parameters (@name) with pgx.NamedArgs. pgx
// rewrites such a statement into Postgres's positional form ($1, $2, ...)
// on every call, which for a long statement costs tens of microseconds
// and about fifty allocations (BenchmarkClaimRewrite): a statement on the
// hot path (run per claim, start, report or heartbeat batch) is therefore
// a NamedSQL, rewritten once when the package initialises, and only its
// arguments are put in order per call.

// NamedSQL is a statement with named parameters in its positional form.
type NamedSQL struct {
	text  string   // as written, with @names
	sql   string   // as Postgres gets it, with $n
	names []string // names[i] is the name of $i+1
}

// paramName finds the candidates for named parameters; pgx's own rewriter
// then decides which are parameters (not text in quotes or comments), so
// the statement means what it would mean passed with pgx.NamedArgs.
var paramName = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// PrepareNamed rewrites text, a statement with named parameters.
func PrepareNamed(text string) *NamedSQL {
	names := pgx.NamedArgs{}
	for _, m := range paramName.FindAllStringSubmatch(text, -1) {
		names[m[1]] = m[1]
	}
	sql, order, err := names.RewriteQuery(context.Background(), nil, text, nil)
	if err != nil {
		panic(fmt.Sprintf("store: rewrite statement: %v", err))
	}
	q := &NamedSQL{text: text, sql: sql, names: make([]string, len(order))}
	for i, n := range order {
		q.names[i] = n.(string)
	}
	return q
}

// boundArgs are the arguments of a NamedSQL. As a pgx.QueryRewriter they
// give pgx the positional form and the arguments in its order; tracers
// see the statement as written and read the arguments with NamedArgsOf.
type boundArgs struct {
	q    *NamedSQL
	args pgx.NamedArgs
}

// RewriteQuery implements pgx.QueryRewriter.
func (b boundArgs) RewriteQuery(_ context.Context, _ *pgx.Conn, sql string, _ []any) (string, []any, error) {
	if sql != b.q.text {
		return "", nil, fmt.Errorf("arguments of one statement given to another")
	}
	out := make([]any, len(b.q.names))
	for i, n := range b.q.names {
		out[i] = b.args[n]
	}
	return b.q.sql, out, nil
}

// NamedArgsOf returns the named arguments of a statement the store runs,
// as a pgx tracer (or a DBTX) is given them, and false for a statement
// with positional arguments.
func NamedArgsOf(args []any) (pgx.NamedArgs, bool) {
	if len(args) != 1 {
		return nil, false
	}
	switch a := args[0].(type) {
	case pgx.NamedArgs:
		return a, true
	case boundArgs:
		return a.args, true
	}
	return nil, false
}

func (q *NamedSQL) Query(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.Rows, error) {
	return db.Query(ctx, q.text, boundArgs{q, args})
}

func (q *NamedSQL) QueryRow(ctx context.Context, db DBTX, args pgx.NamedArgs) pgx.Row {
	return db.QueryRow(ctx, q.text, boundArgs{q, args})
}

func (q *NamedSQL) Exec(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgconn.CommandTag, error) {
	return db.Exec(ctx, q.text, boundArgs{q, args})
}

// only returns the arguments of args that q names: for statements that
// share one set of arguments (each statement is given exactly its own).
func (q *NamedSQL) Only(args pgx.NamedArgs) pgx.NamedArgs {
	out := make(pgx.NamedArgs, len(q.names))
	for _, n := range q.names {
		if v, ok := args[n]; ok {
			out[n] = v
		}
	}
	return out
}

func (q *NamedSQL) Queue(b *pgx.Batch, args pgx.NamedArgs) {
	b.Queue(q.text, boundArgs{q, args})
}

// A statement without named parameters ($1, $2 …, or none) takes its
// arguments in order: these run it as written.

func (q *NamedSQL) QueryPos(ctx context.Context, db DBTX, args ...any) (pgx.Rows, error) {
	return db.Query(ctx, q.sql, args...)
}

func (q *NamedSQL) QueryRowPos(ctx context.Context, db DBTX, args ...any) pgx.Row {
	return db.QueryRow(ctx, q.sql, args...)
}

func (q *NamedSQL) ExecPos(ctx context.Context, db DBTX, args ...any) (pgconn.CommandTag, error) {
	return db.Exec(ctx, q.sql, args...)
}

// SQL is the statement as Postgres gets it, with $n.
func (q *NamedSQL) SQL() string { return q.sql }

// Text is the statement as written, with @names.
func (q *NamedSQL) Text() string { return q.text }

// Bind returns args bound to q, as the store gives them to pgx.
func (q *NamedSQL) Bind(args pgx.NamedArgs) pgx.QueryRewriter { return boundArgs{q, args} }
