package main

import (
	"context"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testpgbouncer"
)

// migrate with the services' URL on a PgBouncer in transaction mode (which
// answers a missing database with 08P01, not Postgres's 3D000): given only
// the pooler's URL it refuses, creating nothing, and says which URL to
// give; given the direct URL as --database-session-url it creates the
// database, migrates it, and checks the pooler reaches it; the other
// commands then work through the pooler.
func TestMigrateThroughPooler(t *testing.T) {
	t.Parallel()
	direct, name := newDatabaseURL(t)
	pooled := testpgbouncer.URL(t, testpgbouncer.Start(t, testdb.AdminURL()), direct)

	c := &cli{t: t, url: pooled}
	_, errOut := c.fails(cliutil.ExitUsage, "migrate")
	mustContain(t, "migrate through the pooler alone", errOut, "connection pooler", "--database-session-url")
	exists, err := dbadmin.DatabaseList(context.Background(), testdb.AdminURL(), name)
	if err != nil || len(exists) != 0 {
		t.Fatalf("after the refused migrate: databases %v (%v), want none created", exists, err)
	}

	var m migrateJSON
	c.okJSON(&m, "migrate", "--database-session-url", direct)
	if !m.DatabaseCreated || m.Version < 1 {
		t.Fatalf("migrate with a direct session URL: %+v, want a created database at a version", m)
	}
	out := c.ok("migrate", "--database-session-url", direct)
	if strings.Contains(out, "Created database") {
		t.Errorf("second migrate created the database again:\n%s", out)
	}
	c.ok("run", "list")
}
