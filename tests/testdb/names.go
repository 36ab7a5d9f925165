package testdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store"
)

// namesTracer fails its test when a statement's named arguments (see
// store.NamedArgsOf) and the names its text uses differ: pgx passes a name
// the text uses but the arguments lack as NULL, and ignores an argument
// the text does not use, so a misspelled name would not fail by itself.
type namesTracer struct{ t testing.TB }

func (n namesTracer) check(sql string, args []any) {
	na, ok := store.NamedArgsOf(args)
	if !ok {
		return
	}
	if _, _, err := pgx.StrictNamedArgs(na).RewriteQuery(context.Background(), nil, sql, nil); err != nil {
		n.t.Errorf("statement's named arguments do not match its text: %v\n%s", err, sql)
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (n namesTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	n.check(d.SQL, d.Args)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (namesTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer: it sees the queued
// statements before pgx rewrites their named arguments.
func (n namesTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		n.check(q.SQL, q.Arguments)
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (namesTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (namesTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
