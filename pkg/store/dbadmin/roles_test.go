package dbadmin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// TestRuntimeRoleHasDMLOnly: in a database set up with RolesEnsure,
// MigrateAs and RolesGrantRuntime, the owner role owns every object; the
// runtime role reads and writes rows through the store, also in tables a
// later migration adds, and may not create, alter, drop or truncate
// anything.
func TestRuntimeRoleHasDMLOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testdb.NewRoles(t)

	owner, err := pgx.Connect(ctx, d.OwnerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	var n, foreign int
	if err := owner.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE tableowner <> current_user)
		FROM pg_tables WHERE schemaname = 'kagzi'`).Scan(&n, &foreign); err != nil {
		t.Fatal(err)
	}
	if n == 0 || foreign != 0 {
		t.Fatalf("%d kagzi tables, %d not owned by the owner role", n, foreign)
	}
	// A later migration, by the owner.
	if _, err := owner.Exec(ctx, `CREATE TABLE kagzi.later (i int)`); err != nil {
		t.Fatal(err)
	}

	pool, err := store.Connect(ctx, d.RuntimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool, store.Options{})
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T", Input: []byte(`1`)})
	if err != nil {
		t.Fatalf("runtime role creates a run: %v", err)
	}
	if _, err := st.RunsGet(ctx, "default", run.ID); err != nil {
		t.Fatalf("runtime role reads a run: %v", err)
	}
	if _, err := st.SettingsGet(ctx); err != nil {
		t.Fatalf("runtime role reads the settings: %v", err)
	}

	rt, err := pgx.Connect(ctx, d.RuntimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if _, err := rt.Exec(ctx, `INSERT INTO kagzi.later VALUES (1)`); err != nil {
		t.Fatalf("runtime role writes a table a later migration added: %v", err)
	}
	for _, ddl := range []string{
		`CREATE TABLE kagzi.intruder (i int)`,
		`CREATE TABLE public.intruder (i int)`,
		`ALTER TABLE kagzi.workflow_runs ADD COLUMN intruder int`,
		`DROP TABLE kagzi.later`,
		`TRUNCATE kagzi.workflow_runs`,
		`CREATE SCHEMA intruder`,
		`CREATE ROLE intruder`,
	} {
		_, err := rt.Exec(ctx, ddl)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("runtime role: %s: %v, want insufficient privilege", ddl, err)
		}
	}
}
