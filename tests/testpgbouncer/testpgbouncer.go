// Package testpgbouncer starts a PgBouncer (internal/pgbouncer) in
// transaction mode for a test, in front of the test database's server.
// Where PgBouncer is not installed the test is skipped with a word, except
// under CI (CI set), where its absence fails the test: the install step
// (scripts/ensure-pgbouncer.sh, run by `make test` as root) is the
// project's.
package testpgbouncer

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/pgbouncer"
)

// Start starts a PgBouncer in transaction mode in front of the server of
// serverURL (a postgres:// URL), stopped when t ends. Its URL method
// turns a direct URL into one through it.
func Start(t testing.TB, serverURL string) *pgbouncer.Bouncer {
	t.Helper()
	return StartWith(t, pgbouncer.Options{Server: serverURL})
}

// StartWith is Start with the options o (o.Server is the server).
func StartWith(t testing.TB, o pgbouncer.Options) *pgbouncer.Bouncer {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := pgbouncer.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", b.LogTail())
		}
		b.Stop()
	})
	return b
}

// URL returns direct through b, failing t on a URL it cannot rewrite.
func URL(t testing.TB, b *pgbouncer.Bouncer, direct string) string {
	t.Helper()
	u, err := b.URL(direct)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Require skips t where PgBouncer is not installed (fails it under CI).
func Require(t testing.TB) {
	t.Helper()
	_, err := pgbouncer.Binary()
	switch {
	case err == nil:
	case errors.Is(err, pgbouncer.ErrNotInstalled) && os.Getenv("CI") == "":
		t.Skipf("skipped: %v", err)
	default:
		t.Fatal(err)
	}
}
