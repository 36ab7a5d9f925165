package dbadmin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/tests/testdb"
)

// wantCode fails t unless err is a Postgres error of SQLSTATE code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Errorf("%s: %v, want SQLSTATE %s", what, err, code)
	}
}

// TestSQLRoleCallsTheFunctionsOnly: the SQL role RolesEnsure and
// RolesGrantSQL set up starts a run, sends it an event and publishes one
// through kagzi.start_run, kagzi.send_event and kagzi.publish, which run
// as the owner, and may read, write or call nothing else; a role with the schema's USAGE but
// not the grant may not call them (EXECUTE is revoked from PUBLIC).
func TestSQLRoleCallsTheFunctionsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testdb.NewRoles(t)

	conn, err := pgx.Connect(ctx, d.SQLURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT kagzi.start_run('default', 'Greet', '{"name": "Ada"}', external_id => 'greet-ada')`).Scan(&id); err != nil {
		t.Fatalf("SQL role starts a run: %v", err)
	}
	var ev uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT kagzi.send_event('default', $1, 'approved', '"yes"')`, id).Scan(&ev); err != nil {
		t.Fatalf("SQL role sends an event: %v", err)
	}
	var pub uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT kagzi.publish('default', 'order.created', '{"order": 7}')`).Scan(&pub); err != nil {
		t.Fatalf("SQL role publishes an event: %v", err)
	}

	pool, err := store.Connect(ctx, d.RuntimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool, store.Options{})
	run, err := st.RunsGet(ctx, "default", id)
	if err != nil || run.Type != "Greet" || run.ExternalID != "greet-ada" || string(run.Input) != `{"name": "Ada"}` {
		t.Fatalf("the run the SQL role started: %+v %v", run, err)
	}
	evs, err := st.EventsList(ctx, "default", id)
	if err != nil || len(evs) != 1 || evs[0].ID != ev || string(evs[0].Payload) != `"yes"` {
		t.Fatalf("the event the SQL role sent: %+v %v", evs, err)
	}
	if pe, err := st.PublishedEventsGet(ctx, "default", pub); err != nil || pe.Name != "order.created" || string(pe.Payload) != `{"order": 7}` {
		t.Fatalf("the event the SQL role published: %+v %v", pe, err)
	}

	for _, stmt := range []string{
		`SELECT count(*) FROM kagzi.workflow_runs`,
		`SELECT count(*) FROM kagzi.settings`,
		`SELECT count(*) FROM kagzi.published_events`,
		`INSERT INTO kagzi.triggers (trigger_id, namespace_id, name, event_pattern, workflow_type, task_queue) VALUES (gen_random_uuid(), 'default', 't', '>', 'T', 'q')`,
		`INSERT INTO kagzi.workflow_events (event_id, namespace_id, run_id, name) VALUES (gen_random_uuid(), 'default', gen_random_uuid(), 'x')`,
		`UPDATE kagzi.workflow_runs SET priority = 9`,
		`DELETE FROM kagzi.workflow_runs`,
		`SELECT kagzi.check_payload('input', '1')`,
		`SELECT kagzi.claim_slots('default', 'default', 'Greet')`,
		`CREATE TABLE kagzi.intruder (i int)`,
	} {
		_, err := conn.Exec(ctx, stmt)
		wantCode(t, "SQL role: "+stmt, err, "42501")
	}

	// A role of its own with USAGE on the schema but no grant.
	admin, err := pgx.Connect(ctx, d.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	other := "kagzi_other_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.RolesDrop(ctx, testdb.AdminURL(), other); err != nil {
			t.Logf("drop role: %v", err)
		}
	})
	for _, stmt := range []string{
		`CREATE ROLE ` + other,
		`GRANT USAGE ON SCHEMA kagzi TO ` + other,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	const rows = `SELECT (SELECT count(*) FROM kagzi.workflow_runs) + (SELECT count(*) FROM kagzi.workflow_events) + (SELECT count(*) FROM kagzi.published_events)`
	var before, after int64
	if err := admin.QueryRow(ctx, rows).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, stmt string
		args       []any
	}{
		{"starts a run", `SELECT kagzi.start_run('default', 'Greet')`, nil},
		{"sends an event", `SELECT kagzi.send_event('default', $1, 'approved')`, []any{id}},
		{"publishes an event", `SELECT kagzi.publish('default', 'order.created')`, nil},
	} {
		tx, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+other); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, c.stmt, c.args...)
		wantCode(t, "a role without the grant "+c.what, err, "42501")
		_ = tx.Rollback(ctx)
	}
	// Nothing of the refused calls was stored.
	if err := admin.QueryRow(ctx, rows).Scan(&after); err != nil || after != before {
		t.Fatalf("runs, events and published events: %d before the refused calls, %d after (%v)", before, after, err)
	}
}
