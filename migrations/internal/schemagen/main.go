// Command schemagen writes migrations/schema.sql: it migrates a database
// of its own from empty on the server of KAGZI_TEST_DATABASE_URL (an
// administrative URL; by default the local server's postgres database),
// dumps its schema, and drops it. `make schema` and `go generate
// ./migrations` run it in migrations/.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/pkg/store/migrate/schemadump"
)

const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func main() {
	if err := run(context.Background(), "schema.sql"); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) (err error) {
	admin := os.Getenv("KAGZI_TEST_DATABASE_URL")
	if admin == "" {
		admin = defaultAdminURL
	}
	name := fmt.Sprintf("kagzi_schemagen_%d", os.Getpid())
	if err := dbadmin.DatabaseCreate(ctx, admin, name, ""); err != nil {
		return err
	}
	defer func() {
		if derr := dbadmin.DatabaseDrop(context.WithoutCancel(ctx), admin, name); derr != nil && err == nil {
			err = derr
		}
	}()
	url, err := dbadmin.DatabaseURL(admin, name)
	if err != nil {
		return err
	}
	if _, err := migrate.Up(ctx, url); err != nil {
		return err
	}
	schema, err := schemadump.Dump(ctx, url)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(schema), 0o644)
}
