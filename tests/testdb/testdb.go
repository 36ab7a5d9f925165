// Package testdb gives each test its own migrated Postgres database, cloned
// from a template database that is built once per migration set, so tests
// that touch the database run in parallel without seeing each other.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/migrations"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
)

// EnvURL names the variable that points the tests at a Postgres server
// (any database on it; the harness creates its own next to it).
const EnvURL = "KAGZI_TEST_DATABASE_URL"

// DefaultURL is used when EnvURL is unset: the local server with trust auth.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the server the harness works on.
func AdminURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

// TemplateName is the template database for the current migration set: a
// change to any migration makes a new one.
func TemplateName() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return "kagzi_tpl_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// New creates a fresh migrated database for t, drops it when t ends, and
// returns its URL. It fails t (never skips) when Postgres is unreachable.
func New(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL()
	tpl := TemplateName()
	if err := dbadmin.DatabaseEnsureTemplate(ctx, admin, tpl); err != nil {
		t.Fatalf("test database: %v\n\nThe tests need Postgres. Run `make test` (it starts a local one when none "+
			"is reachable), or point %s at a server, e.g. %s", err, EnvURL, DefaultURL)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "kagzi_t_" + hex.EncodeToString(b[:])
	if err := dbadmin.DatabaseCreate(ctx, admin, name, tpl); err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.DatabaseDrop(ctx, admin, name); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	url, err := dbadmin.DatabaseURL(admin, name)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	return url
}

// Pool returns a pool on a fresh test database, closed when t ends. A
// statement whose named arguments do not match the names its text uses
// fails t.
func Pool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := store.ConnectTraced(ctx, url, namesTracer{t})
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// Store returns a Store on a fresh test database with default options.
func Store(t testing.TB) *store.Store {
	t.Helper()
	pool, _ := Pool(t)
	return store.New(pool, store.Options{})
}

// Outage takes the test database at url down: it refuses new connections
// and every session it has is ended, as in a failover. The returned
// restore brings it back (and runs when t ends if the test did not).
func Outage(t testing.TB, url string) (restore func()) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatalf("test database url: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dbadmin.DatabaseAllowConnections(ctx, AdminURL(), cfg.Database, false); err != nil {
		t.Fatalf("database outage: %v", err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := dbadmin.DatabaseAllowConnections(ctx, AdminURL(), cfg.Database, true); err != nil {
				t.Errorf("end the database outage: %v", err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}

// Empty creates an empty database (no migrations) for t, drops it when t
// ends, and returns its URL: for tests of the migrator itself.
func Empty(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return createDB(t, ctx, admin, "kagzi_e_"+hex.EncodeToString(b[:]))
}

// createDB creates the empty database name on admin's server, dropped when
// t ends, and returns its URL.
func createDB(t testing.TB, ctx context.Context, admin, name string) string {
	t.Helper()
	if err := dbadmin.DatabaseCreate(ctx, admin, name, ""); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.DatabaseDrop(ctx, admin, name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	url, err := dbadmin.DatabaseURL(admin, name)
	if err != nil {
		t.Fatalf("database %s: %v", name, err)
	}
	return url
}
