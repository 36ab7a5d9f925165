package migrate_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/migrations"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/tests/testdb"
)

// latest is the version of the last file in migrations.FS.
func latest(t *testing.T) int32 {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migration files: %v %v", names, err)
	}
	return int32(len(names))
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// versionRows are the rows of the version table.
func versionRows(t *testing.T, conn *pgx.Conn) []int32 {
	t.Helper()
	rows, err := conn.Query(t.Context(), "SELECT version FROM public.kagzi_schema_version")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// schema describes what the migrations made: the columns, indexes,
// constraints and functions of the kagzi and public schemas.
func schema(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT table_schema || '.' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		   FROM information_schema.columns WHERE table_schema IN ('kagzi', 'public') ORDER BY 1`,
		`SELECT schemaname || ' ' || indexdef FROM pg_indexes WHERE schemaname IN ('kagzi', 'public') ORDER BY 1`,
		`SELECT n.nspname || '.' || c.conname || ' ' || pg_get_constraintdef(c.oid)
		   FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname IN ('kagzi', 'public') ORDER BY 1`,
		`SELECT n.nspname || '.' || p.proname || ' ' || md5(p.prosrc)
		   FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('kagzi', 'public') ORDER BY 1`,
	} {
		rows, err := conn.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// firstMigrations is migrations.FS up to version n, with the function
// files they name.
func firstMigrations(t *testing.T, n int32) fstest.MapFS {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	fns, err := fs.Glob(migrations.FS, "functions/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range append(names[:n:n], fns...) {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = &fstest.MapFile{Data: b}
	}
	return out
}

// freshSchema is the schema of a database migrated from empty.
func freshSchema(t *testing.T) string {
	t.Helper()
	url := testdb.Empty(t)
	if _, err := migrate.Up(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	return schema(t, connect(t, url))
}

func TestMigrateFreshDatabaseThenAgainIsNoop(t *testing.T) {
	t.Parallel()
	url := testdb.Empty(t)
	v, err := migrate.Up(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if want := latest(t); v != want {
		t.Fatalf("version %d, want %d", v, want)
	}
	conn := connect(t, url)
	if got := versionRows(t, conn); len(got) != 1 || got[0] != v {
		t.Fatalf("version table %v, want [%d]", got, v)
	}
	before := schema(t, conn)
	if !strings.Contains(before, "kagzi.workflow_runs.run_id ") {
		t.Fatalf("no kagzi.workflow_runs after migrating:\n%s", before)
	}
	again, err := migrate.Up(t.Context(), url)
	if err != nil || again != v {
		t.Fatalf("second run: version %d, %v; want %d", again, err, v)
	}
	if after := schema(t, conn); after != before {
		t.Fatalf("second run changed the schema:\n%s\nwas\n%s", after, before)
	}
}

// A migration that counts its runs: a re-run or a concurrent migrator
// would count twice.
var counted = fstest.MapFS{
	"001_table.sql": {
		Data: []byte(
			"CREATE TABLE applied (version int PRIMARY KEY);\nINSERT INTO applied VALUES (1);\n---- create above / drop below ----\nDROP TABLE applied;\n",
		),
	},
	"002_slow.sql": {Data: []byte("SELECT pg_sleep(0.2);\nINSERT INTO applied VALUES (2);\n")},
	"003_more.sql": {
		Data: []byte("-- a comment\nINSERT INTO applied VALUES (3);\n---- create above / drop below ----\nDELETE FROM applied WHERE version = 3;\n"),
	},
}

func appliedRows(t *testing.T, conn *pgx.Conn) []int32 {
	t.Helper()
	rows, err := conn.Query(t.Context(), "SELECT version FROM applied ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestMigrateConcurrentMigratorsApplyEachMigrationOnce(t *testing.T) {
	t.Parallel()
	url := testdb.Empty(t)
	const n = 4
	var wg sync.WaitGroup
	versions, errs := make([]int32, n), make([]error, n)
	for i := range n {
		wg.Go(func() { versions[i], errs[i] = migrate.UpFS(t.Context(), url, counted) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || versions[i] != 3 {
			t.Errorf("migrator %d: version %d, %v; want 3", i, versions[i], errs[i])
		}
	}
	conn := connect(t, url)
	if got := appliedRows(t, conn); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("applied %v, want [1 2 3] (each once, the down parts never)", got)
	}
	if got := versionRows(t, conn); len(got) != 1 || got[0] != 3 {
		t.Fatalf("version table %v, want [3]", got)
	}
}

func TestMigrateConcurrentRealMigrations(t *testing.T) {
	t.Parallel()
	url := testdb.Empty(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = migrate.Up(t.Context(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	if got := versionRows(t, connect(t, url)); len(got) != 1 || got[0] != latest(t) {
		t.Fatalf("version table %v, want [%d]", got, latest(t))
	}
}

// A database at an older version gets the migrations after it, and ends
// with the schema of one migrated from empty.
func TestMigrateFromOlderVersion(t *testing.T) {
	t.Parallel()
	const old = 3
	url := testdb.Empty(t)
	if v, err := migrate.UpFS(t.Context(), url, firstMigrations(t, old)); err != nil || v != old {
		t.Fatalf("migrate to %d: version %d, %v", old, v, err)
	}
	v, err := migrate.Up(t.Context(), url)
	if err != nil || v != latest(t) {
		t.Fatalf("migrate the rest: version %d, %v; want %d", v, err, latest(t))
	}
	if got, want := schema(t, connect(t, url)), freshSchema(t); got != want {
		t.Fatalf("schema after %d then the rest:\n%s\nwant\n%s", old, got, want)
	}
}

// ternVersionTable is the statement the tern migrator (v2.3.4, which
// earlier versions of Kagzi used) created its version table with.
const ternVersionTable = `
    create table if not exists public.kagzi_schema_version(version int4 not null);

    insert into public.kagzi_schema_version(version)
    select 0
    where 0=(select count(*) from public.kagzi_schema_version);
  `

// A database migrated by tern to some version (its version table, each
// file's up part run as tern ran it) carries on from that version; the
// table this migrator creates is tern's.
func TestMigrateTernDatabase(t *testing.T) {
	t.Parallel()
	const old = 5
	url := testdb.Empty(t)
	conn := connect(t, url)
	if _, err := conn.Exec(t.Context(), ternVersionTable); err != nil {
		t.Fatal(err)
	}
	ternTable := schema(t, conn)
	// The files as tern ran them: the functions written out, as the
	// files of that time had them.
	ups, err := migrate.UpParts(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for i, up := range ups[:old] {
		name := fmt.Sprintf("migration %d", i+1)
		tx, err := conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), up); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := tx.Exec(t.Context(), "update public.kagzi_schema_version set version=$1", i+1); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	v, err := migrate.Up(t.Context(), url)
	if err != nil || v != latest(t) {
		t.Fatalf("migrate a tern database at %d: version %d, %v; want %d", old, v, err, latest(t))
	}
	if got := versionRows(t, conn); len(got) != 1 || got[0] != latest(t) {
		t.Fatalf("version table %v, want [%d]", got, latest(t))
	}
	if got, want := schema(t, conn), freshSchema(t); got != want {
		t.Fatalf("schema of the tern database:\n%s\nwant\n%s", got, want)
	}

	// The version table alone, as this migrator makes it and as tern made it.
	own := testdb.Empty(t)
	if _, err := migrate.UpFS(t.Context(), own, fstest.MapFS{"001_x.sql": {Data: []byte("SELECT 1")}}); err != nil {
		t.Fatal(err)
	}
	if got := schema(t, connect(t, own)); got != ternTable {
		t.Fatalf("version table:\n%s\ntern's:\n%s", got, ternTable)
	}
}

// A migration that fails leaves nothing of itself and the version at the
// one before it; the next run applies it once fixed.
func TestMigrateFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	url := testdb.Empty(t)
	bad := fstest.MapFS{
		"001_table.sql": counted["001_table.sql"],
		"002_bad.sql":   {Data: []byte("INSERT INTO applied VALUES (2);\nSELECT * FROM no_such_table;\n")},
	}
	v, err := migrate.UpFS(t.Context(), url, bad)
	if err == nil || !strings.Contains(err.Error(), "002_bad.sql") || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("migrate: %v; want an error naming 002_bad.sql and no_such_table", err)
	}
	if v != 1 {
		t.Errorf("returned version %d, want 1", v)
	}
	conn := connect(t, url)
	if got := versionRows(t, conn); len(got) != 1 || got[0] != 1 {
		t.Fatalf("version table %v, want [1]", got)
	}
	if got := appliedRows(t, conn); fmt.Sprint(got) != "[1]" {
		t.Fatalf("applied %v, want [1]", got)
	}
	if v, err := migrate.UpFS(t.Context(), url, counted); err != nil || v != 3 {
		t.Fatalf("fixed: version %d, %v", v, err)
	}
	if got := appliedRows(t, conn); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("applied %v, want [1 2 3]", got)
	}
}

// A database newer than the migrations is refused, untouched.
func TestMigrateRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	url := testdb.Empty(t)
	conn := connect(t, url)
	if _, err := conn.Exec(t.Context(), ternVersionTable+"; UPDATE public.kagzi_schema_version SET version = 9"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.UpFS(t.Context(), url, counted); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("migrate: %v; want an error about version 9", err)
	}
	if got := versionRows(t, conn); len(got) != 1 || got[0] != 9 {
		t.Fatalf("version table %v, want [9]", got)
	}
}

// Sets of files tern refused are refused before the database is touched.
func TestMigrateRefusesBadSets(t *testing.T) {
	t.Parallel()
	ok := []byte("SELECT 1;\n")
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"gap", fstest.MapFS{"001_a.sql": {Data: ok}, "003_c.sql": {Data: ok}}, "missing migration 2"},
		{"duplicate", fstest.MapFS{"001_a.sql": {Data: ok}, "1_b.sql": {Data: ok}}, "duplicate migration 1"},
		{"not from 1", fstest.MapFS{"002_b.sql": {Data: ok}}, "missing migration 1"},
		{"empty up", fstest.MapFS{"001_a.sql": {Data: []byte("-- nothing\n\n---- create above / drop below ----\nDROP TABLE x;\n")}}, "no SQL"},
		{"none", fstest.MapFS{"README.md": {Data: ok}}, "no migrations"},
		{"malformed directive", fstest.MapFS{"001_a.sql": {Data: []byte("--kagzi:functon f\n")}}, "malformed directive"},
		{"no function file", fstest.MapFS{"001_a.sql": {Data: []byte("-- kagzi:function f\n")}}, "function f"},
		{"stale pin", fstest.MapFS{
			"001_a.sql":       {Data: []byte("-- kagzi:function f sha256:0000000000000000\n")},
			"functions/f.sql": {Data: ok},
		}, "not the 0000000000000000 this migration pinned"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No database behind the URL: loading fails first.
			_, err := migrate.UpFS(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", c.fsys)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("migrate: %v; want %q", err, c.want)
			}
		})
	}
}

// An early migration runs the current definition of a function a later
// one redefines (migrations/functions): a database upgraded from an old
// version with rows in it, whose triggers fire during the migrations
// between the two, still migrates.
func TestMigrateWithRowsFromOlderVersions(t *testing.T) {
	t.Parallel()
	for _, old := range []int32{2, 4, 12} {
		t.Run(fmt.Sprint(old), func(t *testing.T) {
			t.Parallel()
			url := testdb.Empty(t)
			if _, err := migrate.UpFS(t.Context(), url, firstMigrations(t, old)); err != nil {
				t.Fatal(err)
			}
			conn := connect(t, url)
			if _, err := conn.Exec(t.Context(), `INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status)
				VALUES (gen_random_uuid(), 'default', 'q', 'T', 'RUNNING'), (gen_random_uuid(), 'default', 'q', 'T', 'PENDING'),
				       (gen_random_uuid(), 'default', 'q', 'T', 'COMPLETED')`); err != nil {
				t.Fatal(err)
			}
			// Their payloads, which 016 moves into the runs' rows with one
			// update of each: of a finished run too, whose update the
			// statement triggers of the current definition look at.
			if _, err := conn.Exec(t.Context(), `INSERT INTO kagzi.workflow_payloads (run_id, input) SELECT run_id, '\x01' FROM kagzi.workflow_runs`); err != nil {
				t.Fatal(err)
			}
			if old >= 3 {
				if _, err := conn.Exec(t.Context(), `INSERT INTO kagzi.concurrency_limits (namespace_id, task_queue, workflow_type, max_running)
					VALUES ('default', 'q', 'T', 1)`); err != nil {
					t.Fatal(err)
				}
			}
			if v, err := migrate.Up(t.Context(), url); err != nil || v != latest(t) {
				t.Fatalf("migrate from %d with rows: version %d, %v; want %d", old, v, err, latest(t))
			}
		})
	}
}
