package store

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StatementTally counts the statements sent through the pools it traces
// (ConnectTraced), by statement text, batched statements included (unlike
// StatementCounter, which sees only single statements). `kagzi bench`
// uses it to show what one run costs, statement by statement, and the
// store's tests to pin how many statements an operation takes.
type StatementTally struct {
	mu sync.Mutex
	n  map[string]int64
}

// NewStatementTally returns an empty tally.
func NewStatementTally() *StatementTally { return &StatementTally{n: map[string]int64{}} }

func (t *StatementTally) add(sql string) {
	t.mu.Lock()
	t.n[sql]++
	t.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *StatementTally) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.add(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *StatementTally) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (t *StatementTally) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: each statement of a batch
// counts.
func (t *StatementTally) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.add(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *StatementTally) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Snapshot returns the counts so far by statement text (whitespace
// collapsed).
func (t *StatementTally) Snapshot() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.n))
	for sql, n := range t.n {
		out[strings.Join(strings.Fields(sql), " ")] += n
	}
	return out
}

// PingStatement is the text a StatementTally counts a pool's liveness
// ping under (pgxpool pings a connection idle for more than a second
// before handing it out: one more round trip and transaction).
const PingStatement = "-- ping"

// ConnectTraced is Connect with every statement traced by tracer; when it
// is a *StatementTally it counts the pool's pings too (PingStatement).
func ConnectTraced(ctx context.Context, url string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	return connect(ctx, url, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = tracer
		if t, ok := tracer.(*StatementTally); ok {
			// pgxpool's default rule, counted.
			cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
				if p.IdleDuration > time.Second {
					t.add(PingStatement)
					return true
				}
				return false
			}
		}
	})
}
