package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kagzi/kagzi/tests/testdb"
)

// The store's pools send and read uuid.UUID as its 16 bytes (one id, an
// array, a NULL pointer), and in the text format the simple protocol
// uses, with the values pgx's own path gives; a NULL scanned into a
// uuid.UUID leaves it zero, as uuid.UUID's Scan does.
func TestUUIDParametersAsBytes(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dt, ok := conn.Conn().TypeMap().TypeForOID(pgtype.UUIDOID)
	conn.Release()
	if !ok || fmt.Sprintf("%T", dt.Codec) == fmt.Sprintf("%T", pgtype.UUIDCodec{}) {
		t.Fatalf("the pool's uuid codec is pgx's own")
	}
	a, b := uuid.New(), uuid.New()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		var (
			one, viaText uuid.UUID
			many         []uuid.UUID
			none         *uuid.UUID
			text         string
		)
		ids := any([]uuid.UUID{a, b})
		if mode == pgx.QueryExecModeSimpleProtocol {
			ids = "{" + a.String() + "," + b.String() + "}" // pgx has no text form of []uuid.UUID
		}
		err := pool.QueryRow(ctx, "SELECT $1::uuid, $2::uuid[], $3::uuid, $1::uuid::text, $4::text::uuid", mode, a, ids, (*uuid.UUID)(nil), b.String()).
			Scan(&one, &many, &none, &text, &viaText)
		if err != nil {
			t.Fatalf("mode %v: %v", mode, err)
		}
		if one != a || len(many) != 2 || many[0] != a || many[1] != b || none != nil || text != a.String() || viaText != b {
			t.Fatalf("mode %v: %s %v %v %q %s", mode, one, many, none, text, viaText)
		}
		var null uuid.UUID
		if err := pool.QueryRow(ctx, "SELECT NULL::uuid", mode).Scan(&null); err != nil || null != uuid.Nil {
			t.Fatalf("mode %v: NULL scanned into a uuid.UUID: %s %v", mode, null, err)
		}
	}
}
