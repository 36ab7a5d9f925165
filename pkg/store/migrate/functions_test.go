package migrate_test

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/migrations"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/tests/testdb"
)

// functionFiles are the names of the functions of migrations/functions.
func functionFiles(t *testing.T) []string {
	t.Helper()
	paths, err := fs.Glob(migrations.FS, "functions/*.sql")
	if err != nil || len(paths) == 0 {
		t.Fatalf("function files: %v %v", paths, err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(path.Base(p), ".sql")
	}
	return names
}

// Each function file is named by some migration; the last to name it
// pins the file's digest, the earlier ones do not.
func TestFunctionFilesPinnedByTheirLastMigration(t *testing.T) {
	ds, err := migrate.Directives(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range functionFiles(t) {
		var mine []migrate.Named
		for _, d := range ds {
			if d.Function == name {
				mine = append(mine, d)
			}
		}
		if len(mine) == 0 {
			t.Errorf("functions/%s.sql: no migration names it (-- kagzi:function %s)", name, name)
			continue
		}
		text, err := fs.ReadFile(migrations.FS, "functions/"+name+".sql")
		if err != nil {
			t.Fatal(err)
		}
		last := mine[len(mine)-1]
		if want := migrate.Digest(text); last.Pin != want {
			t.Errorf("%s, the last migration naming %s, pins %q; the file's digest is %s: "+
				"a changed function needs a new migration with the line -- kagzi:function %s sha256:%s",
				last.Migration, name, last.Pin, want, name, want)
		}
		for _, d := range mine[:len(mine)-1] {
			if d.Pin != "" {
				t.Errorf("%s pins %s, but %s names it later: only the last migration naming a function pins it",
					d.Migration, name, last.Migration)
			}
		}
	}
}

// No migration, up or down, writes out a function that a file of
// functions/ defines.
func TestNoMigrationCopiesAFunctionFile(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "[0-9]*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range functionFiles(t) {
		create := regexp.MustCompile(`(?i)CREATE\s+(OR\s+REPLACE\s+)?FUNCTION\s+kagzi\.` + fn + `\s*\(`)
		for _, name := range names {
			b, err := fs.ReadFile(migrations.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			if create.Match(b) {
				t.Errorf("%s writes out kagzi.%s: name it with -- kagzi:function %s instead", name, fn, fn)
			}
		}
	}
}

// After migrating, each function in the database is its file's
// definition: running the file changes nothing pg_get_functiondef shows.
func TestFunctionDefinitionsAreTheirFiles(t *testing.T) {
	t.Parallel()
	conn := connect(t, testdb.New(t))
	for _, name := range functionFiles(t) {
		t.Run(name, func(t *testing.T) {
			text, err := fs.ReadFile(migrations.FS, "functions/"+name+".sql")
			if err != nil {
				t.Fatal(err)
			}
			const def = `SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = 'kagzi' AND p.proname = @name`
			tx, err := conn.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(t.Context()) }()
			var migrated, file string
			if err := tx.QueryRow(t.Context(), def, pgx.NamedArgs{"name": name}).Scan(&migrated); err != nil {
				t.Fatalf("kagzi.%s after migrating: %v", name, err)
			}
			if _, err := tx.Exec(t.Context(), string(text)); err != nil {
				t.Fatalf("functions/%s.sql: %v", name, err)
			}
			if err := tx.QueryRow(t.Context(), def, pgx.NamedArgs{"name": name}).Scan(&file); err != nil {
				t.Fatalf("kagzi.%s from its file (one definition, no overloads): %v", name, err)
			}
			if migrated != file {
				t.Errorf("kagzi.%s after migrating:\n%s\nfunctions/%s.sql defines:\n%s", name, migrated, name, file)
			}
		})
	}
}
