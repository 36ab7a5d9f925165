package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Roles name the two Postgres roles of a least-privilege deployment: the
// owner of the schema, which migrations run as, and the runtime role the
// services connect as, which may read and write rows (DML) and nothing
// else: no DDL, no TRUNCATE, no ownership.
type Roles struct {
	Owner, OwnerPassword     string
	Runtime, RuntimePassword string
}

// RolesEnsure creates the owner and runtime roles (LOGIN) unless they
// exist, sets their passwords when given, and lets the owner create the
// kagzi schema and the version table in the database at url. It needs a
// connection allowed to create roles (a superuser, say). Roles are
// cluster-wide: this is idempotent and safe to run concurrently, and it
// is kept out of Migrate, which tests run on many databases of one server
// at once.
func RolesEnsure(ctx context.Context, url string, r Roles) error {
	if r.Owner == "" || r.Runtime == "" || r.Owner == r.Runtime {
		return fmt.Errorf("%w: two distinct role names are needed (owner %q, runtime %q)", ErrInvalidArgument, r.Owner, r.Runtime)
	}
	conn, err := connectSession(ctx, url, "roles")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Concurrent grants on one object fail ("tuple concurrently
	// updated"): setups of one database take turns.
	if err := lockRoles(ctx, conn); err != nil {
		return err
	}
	for _, role := range []struct{ name, password string }{{r.Owner, r.OwnerPassword}, {r.Runtime, r.RuntimePassword}} {
		ident := pgx.Identifier{role.name}.Sanitize()
		_, err := conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN")
		var pe *pgconn.PgError
		// 42710: it exists; 23505: a concurrent creation won the race.
		if err != nil && !(errors.As(err, &pe) && (pe.Code == "42710" || pe.Code == "23505")) {
			return mapErr("create role "+role.name, err)
		}
		if role.password != "" {
			// A utility statement takes no parameters: quote the literal.
			var quoted string
			if err := conn.QueryRow(ctx, "SELECT quote_literal(@password::text)", pgx.NamedArgs{"password": role.password}).Scan(&quoted); err != nil {
				return mapErr("quote password", err)
			}
			if _, err := conn.Exec(ctx, "ALTER ROLE "+ident+" PASSWORD "+quoted); err != nil {
				return mapErr("set password of "+role.name, err)
			}
		}
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return mapErr("read database name", err)
	}
	owner, runtime := pgx.Identifier{r.Owner}.Sanitize(), pgx.Identifier{r.Runtime}.Sanitize()
	for _, stmt := range []string{
		"GRANT CONNECT, CREATE ON DATABASE " + pgx.Identifier{db}.Sanitize() + " TO " + owner,
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{db}.Sanitize() + " TO " + runtime,
		// The version table lives in public (see versionTable); nobody else
		// creates there (the default of Postgres 15 and later).
		"GRANT USAGE, CREATE ON SCHEMA public TO " + owner,
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return mapErr("grant to roles", err)
		}
	}
	return nil
}

// rolesLockKey serialises role setups of one database (advisory locks
// are per database); the session's end releases it.
const rolesLockKey = 0x6b61677a6972 // "kagzir"

func lockRoles(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SELECT pg_advisory_lock(@key)", pgx.NamedArgs{"key": rolesLockKey})
	return mapErr("lock role setup", err)
}

// MigrateAs is Migrate with the migrations run as role (SET ROLE), so
// that the objects they create belong to it: a superuser can migrate on
// the owner role's behalf.
func MigrateAs(ctx context.Context, url, role string) (int32, error) {
	return migrateWith(ctx, url, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
		return err
	})
}

// RolesGrantRuntime gives the runtime role what the services need in the
// database at url, and only that: USAGE on the kagzi schema, SELECT,
// INSERT, UPDATE and DELETE on its tables, its sequences and functions,
// reading the version table; and the same on what later migrations by
// owner create (default privileges). It runs as the owner (or a
// superuser) and is idempotent. An empty owner is the connection's role.
func RolesGrantRuntime(ctx context.Context, url, owner, runtime string) error {
	conn, err := connectSession(ctx, url, "roles")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := lockRoles(ctx, conn); err != nil {
		return err
	}
	r := pgx.Identifier{runtime}.Sanitize()
	o := "CURRENT_ROLE"
	if owner != "" {
		o = pgx.Identifier{owner}.Sanitize()
	}
	for _, stmt := range []string{
		"GRANT USAGE ON SCHEMA kagzi TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA kagzi TO " + r,
		"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA kagzi TO " + r,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA kagzi TO " + r,
		"GRANT SELECT ON " + versionTable + " TO " + r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + o + " IN SCHEMA kagzi GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + o + " IN SCHEMA kagzi GRANT USAGE, SELECT ON SEQUENCES TO " + r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + o + " IN SCHEMA kagzi GRANT EXECUTE ON FUNCTIONS TO " + r,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return mapErr("grant runtime privileges", err)
		}
	}
	return nil
}

// RolesDrop drops the roles named, if they exist, on the server at
// adminURL (teardown; a role that still owns objects in some database
// cannot be dropped).
func RolesDrop(ctx context.Context, adminURL string, names ...string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("roles: connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	for _, n := range names {
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{n}.Sanitize()); err != nil {
			return mapErr("drop role "+n, err)
		}
	}
	return nil
}
