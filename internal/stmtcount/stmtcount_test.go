package stmtcount

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Counter counts single statements; a Tally counts them by their text,
// whitespace collapsed, batched ones and the pings it asked for included.
func TestCounting(t *testing.T) {
	ctx := context.Background()
	var c Counter
	tally := NewTally()
	for _, sql := range []string{"a  b", "a b", "c"} {
		c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: sql})
		tally.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: sql})
	}
	tally.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "c"})
	if tally.ShouldPing(ctx, pgxpool.ShouldPingParams{IdleDuration: time.Millisecond}) {
		t.Error("a connection idle for a millisecond is pinged")
	}
	if !tally.ShouldPing(ctx, pgxpool.ShouldPingParams{IdleDuration: 2 * time.Second}) {
		t.Error("a connection idle for two seconds is not pinged")
	}
	if c.Load() != 3 {
		t.Errorf("counter %d, want 3", c.Load())
	}
	snap := tally.Snapshot()
	if snap["a b"] != 2 || snap["c"] != 2 || snap[PingStatement] != 1 || len(snap) != 3 {
		t.Errorf("tally %v", snap)
	}
}
