package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// withLimits sets the payload limits of s's database and returns s.
func withLimits(t *testing.T, s *store.Store, warn, max int) *store.Store {
	t.Helper()
	if _, err := s.SettingsSet(context.Background(), store.Settings{PayloadWarnBytes: warn, PayloadMaxBytes: max}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A new database carries the documented default limits; a change is
// validated, stored, applied by the store that made it, and read by any
// store opened afterwards (another process).
func TestSettings(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	ctx := context.Background()
	s := store.New(pool, store.Options{})
	got, err := s.Limits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Settings{PayloadWarnBytes: protocol.DefaultPayloadWarnBytes, PayloadMaxBytes: protocol.DefaultPayloadMaxBytes}); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	for _, bad := range []store.Settings{{PayloadWarnBytes: 0, PayloadMaxBytes: 10}, {PayloadWarnBytes: 11, PayloadMaxBytes: 10},
		{PayloadWarnBytes: 1, PayloadMaxBytes: store.MaxPayloadLimit + 1}} {
		if _, err := s.SettingsSet(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("SettingsSet(%+v): %v", bad, err)
		}
	}
	want := store.Settings{PayloadWarnBytes: 10, PayloadMaxBytes: 20}
	withLimits(t, s, 10, 20)
	if got, _ := s.Limits(ctx); got != want {
		t.Fatalf("the store that set them applies %+v", got)
	}
	if got, _ := store.New(pool, store.Options{}).Limits(ctx); got != want {
		t.Fatalf("a new store reads %+v", got)
	}
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T",
		Input: []byte(`"0123456789abcdefghij"`)}); !errors.Is(
		err,
		store.ErrPayloadTooLarge,
	) {
		t.Fatalf("a 22-byte input under a 20-byte limit: %v", err)
	}
}

// ServerAutovacuum reads the server's autovacuum switch as SHOW does.
func TestServerAutovacuum(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	ctx := context.Background()
	var shown string
	if err := pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&shown); err != nil {
		t.Fatal(err)
	}
	on, err := store.New(pool, store.Options{}).ServerAutovacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if on != (shown == "on") {
		t.Fatalf("ServerAutovacuum %v, SHOW autovacuum %q", on, shown)
	}
}
