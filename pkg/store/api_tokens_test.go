package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// A token is stored as the SHA-256 of its secret, found by the secret,
// validated with maxima, unique by live name, bounded per namespace and
// revocable; a refused one stores nothing.
func TestAPITokens(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	count := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM kagzi.api_tokens").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	read := []string{store.ScopeRunsRead}
	for name, bad := range map[string]store.APITokenParams{
		"dotted name":  {Namespace: "ns", Name: "a.b", Scopes: read},
		"long name":    {Namespace: "ns", Name: strings.Repeat("n", store.MaxAPITokenName+1), Scopes: read},
		"no scope":     {Namespace: "ns", Name: "x"},
		"bad scope":    {Namespace: "ns", Name: "x", Scopes: []string{"runs:delete"}},
		"twice":        {Namespace: "ns", Name: "x", Scopes: []string{store.ScopeRunsRead, store.ScopeRunsRead}},
		"rate":         {Namespace: "ns", Name: "x", Scopes: read, Rate: store.MaxAPITokenRate + 1},
		"negative ttl": {Namespace: "ns", Name: "x", Scopes: read, TTL: -time.Hour},
		"long ttl":     {Namespace: "ns", Name: "x", Scopes: read, TTL: store.MaxAPITokenTTL + time.Hour},
	} {
		if _, _, err := s.APITokensCreate(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d tokens stored by refused creates", n)
	}
	tok, secret, err := s.APITokensCreate(ctx, store.APITokenParams{Namespace: "ns", Name: "ci", Scopes: read, TTL: time.Hour})
	if err != nil || tok.Rate != store.DefaultAPITokenRate || tok.ExpiresAt == nil || !strings.HasPrefix(secret, "kzt_") {
		t.Fatalf("create: %+v %q %v", tok, secret, err)
	}
	var hash []byte
	if err := pool.QueryRow(ctx, "SELECT secret_hash FROM kagzi.api_tokens WHERE token_id = $1", tok.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(secret)); !bytes.Equal(hash, sum[:]) {
		t.Fatal("the stored hash is not the secret's SHA-256")
	}
	got, err := s.APITokensGetBySecret(ctx, secret)
	if err != nil || got.ID != tok.ID || !got.Allows(store.ScopeRunsRead) || got.Allows(store.ScopeRunsStart) || got.Expired {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := s.APITokensGetBySecret(ctx, secret+"x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another secret: %v", err)
	}
	// Past its expiry (set back here, not waited for), it reads expired.
	if _, err := pool.Exec(ctx, "UPDATE kagzi.api_tokens SET expires_at = now() - interval '1 second' WHERE token_id = $1", tok.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.APITokensGetBySecret(ctx, secret); err != nil || !got.Expired {
		t.Fatalf("expired: %+v %v", got, err)
	}
	if _, _, err := s.APITokensCreate(ctx, store.APITokenParams{Namespace: "ns", Name: "ci", Scopes: read}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the same name: %v", err)
	}
	if _, err := s.APITokensRevoke(ctx, "ns", "ci"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.APITokensGetBySecret(ctx, secret); err != nil || got.RevokedAt == nil {
		t.Fatalf("revoked: %+v %v", got, err)
	}
	if _, err := s.APITokensRevoke(ctx, "ns", "ci"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked twice: %v", err)
	}
	// The name is free again once revoked.
	if _, _, err := s.APITokensCreate(ctx, store.APITokenParams{Namespace: "ns", Name: "ci", Scopes: read}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO kagzi.api_tokens (token_id, namespace_id, name, secret_hash, scopes, rate)
		SELECT gen_random_uuid(), 'full', 't' || i, sha256(i::text::bytea), '{runs:read}', 1 FROM generate_series(1, $1) i`, store.MaxAPITokens); err != nil {
		t.Fatal(err)
	}
	before := count()
	if _, _, err := s.APITokensCreate(ctx, store.APITokenParams{Namespace: "full", Name: "one-more", Scopes: read}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("over the maximum: %v", err)
	}
	if count() != before {
		t.Fatal("a token stored over the maximum")
	}
	list, err := s.APITokensList(ctx, "ns")
	if err != nil || len(list) != 1 || list[0].Name != "ci" {
		t.Fatalf("list: %+v %v", list, err)
	}
}
