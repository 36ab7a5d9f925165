// Package stmtcount counts the statements Kagzi sends Postgres: what the
// idle test, the services' tests, the store's tests and `kagzi bench` read
// to show what Kagzi costs the database. Its counters are pgx tracers,
// given to a pool with store.ConnectTraced.
package stmtcount

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Counter counts the single statements sent through the pools it traces
// (not those of a batch: see Tally), and keeps the text of the last
// recentCap, so that a test that finds too many can say which.
type Counter struct {
	n      atomic.Int64
	mu     sync.Mutex
	recent [recentCap]string
}

// recentCap is how many statements' texts a Counter keeps.
const recentCap = 64

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	n := c.n.Add(1)
	c.recent[n%recentCap] = d.SQL
	c.mu.Unlock()
	return ctx
}

// Since returns the first line of each statement counted after the
// count was from (a Load), oldest first: the last recentCap at most.
func (c *Counter) Since(from int64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n.Load()
	from = max(from, n-recentCap)
	out := make([]string, 0, n-from)
	for i := from + 1; i <= n; i++ {
		s, _, _ := strings.Cut(strings.TrimSpace(c.recent[i%recentCap]), "\n")
		out = append(out, s)
	}
	return out
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Load returns the number of statements so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// Tally counts the statements sent through the pools it traces, by
// statement text, batched statements included (unlike Counter), and the
// pools' liveness pings (PingStatement). `kagzi bench` uses it to show
// what one run costs, statement by statement, and the store's tests to
// pin how many statements an operation takes.
type Tally struct {
	mu sync.Mutex
	n  map[string]int64
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{n: map[string]int64{}} }

func (t *Tally) add(sql string) {
	t.mu.Lock()
	t.n[sql]++
	t.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *Tally) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.add(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *Tally) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (t *Tally) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: each statement of a batch
// counts.
func (t *Tally) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.add(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *Tally) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// ShouldPing is pgxpool's default rule (ping a connection idle for more
// than a second before handing it out), counted: store.ConnectTraced
// gives a pool's pings to a tracer that has this method.
func (t *Tally) ShouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	if p.IdleDuration > time.Second {
		t.add(PingStatement)
		return true
	}
	return false
}

// Snapshot returns the counts so far by statement text (whitespace
// collapsed).
func (t *Tally) Snapshot() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.n))
	for sql, n := range t.n {
		out[strings.Join(strings.Fields(sql), " ")] += n
	}
	return out
}

// PingStatement is the text a Tally counts a pool's liveness ping under
// (one more round trip and transaction).
const PingStatement = "-- ping"
