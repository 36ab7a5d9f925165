package migrations_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/store/migrate/schemadump"
	"github.com/kagzi/kagzi/tests/testdb"
)

// updateSchema rewrites schema.sql instead of comparing it: `make schema`
// and `go generate ./migrations` run this test with it.
var updateSchema = flag.Bool("update-schema", false, "rewrite schema.sql from a database migrated from empty")

// schema.sql is the schema a database migrated from empty has.
func TestSchemaFileIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := schemadump.Dump(t.Context(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if *updateSchema {
		if err := os.WriteFile("schema.sql", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatalf("%v: generate it with `make schema` (or `go generate ./migrations`)", err)
	}
	if got != string(want) {
		t.Fatalf("migrations/schema.sql is stale: regenerate it with `make schema` (or `go generate ./migrations`). First difference:\n%s",
			firstDiff(string(want), got))
	}
}

// firstDiff shows the first line where a and b differ, with a little of
// what surrounds it.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  schema.sql: %s\n  migrations: %s", i+1, x, y)
		}
	}
	return "(none)"
}
