package dbadmin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kagzi/kagzi/pkg/store"
)

// Roles name the Postgres roles of a least-privilege deployment: the
// owner of the schema, which migrations run as (migrate.UpAs); the
// runtime role the services connect as, which may read and write rows
// (DML) and nothing else: no DDL, no TRUNCATE, no ownership; and,
// optionally, the SQL role, which may only call the functions that start
// runs, send events and publish events (kagzi.start_run,
// kagzi.send_event, kagzi.publish: docs/sql.md), for applications that
// use Kagzi from SQL.
type Roles struct {
	Owner, OwnerPassword     string
	Runtime, RuntimePassword string
	// SQL is the SQL role; "" makes none.
	SQL, SQLPassword string
}

// rolesLockKey serialises role setups of one database (advisory locks
// are per database); the session's end releases it.
const rolesLockKey = 0x6b61677a6972 // "kagzir"

// RolesEnsure creates the owner, runtime and (if named) SQL roles (LOGIN)
// unless they exist, sets their passwords when given, and lets the owner create the
// kagzi schema and the version table in the database at url. It needs a
// connection allowed to create roles (a superuser, say). Roles are
// cluster-wide: this is idempotent and safe to run concurrently, and it
// is kept out of migrating, which tests run on many databases of one
// server at once.
func RolesEnsure(ctx context.Context, url string, r Roles) error {
	if r.Owner == "" || r.Runtime == "" || r.Owner == r.Runtime {
		return fmt.Errorf("%w: two distinct role names are needed (owner %q, runtime %q)", store.ErrInvalidArgument, r.Owner, r.Runtime)
	}
	if r.SQL != "" && (r.SQL == r.Owner || r.SQL == r.Runtime) {
		return fmt.Errorf("%w: the SQL role %q must differ from the owner and runtime roles", store.ErrInvalidArgument, r.SQL)
	}
	conn, err := store.ConnectSession(ctx, url, "roles")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Concurrent grants on one object fail ("tuple concurrently
	// updated"): setups of one database take turns.
	if err := lockRoles(ctx, conn); err != nil {
		return err
	}
	roles := []struct{ name, password string }{{r.Owner, r.OwnerPassword}, {r.Runtime, r.RuntimePassword}}
	if r.SQL != "" {
		roles = append(roles, struct{ name, password string }{r.SQL, r.SQLPassword})
	}
	for _, role := range roles {
		_, err := conn.Exec(ctx, withIdents(sqlRoleCreate, role.name))
		var pe *pgconn.PgError
		// 42710: it exists; 23505: a concurrent creation won the race.
		if err != nil && !(errors.As(err, &pe) && (pe.Code == "42710" || pe.Code == "23505")) {
			return store.MapError("create role "+role.name, err)
		}
		if role.password != "" {
			// A utility statement takes no parameters: quote the literal.
			var quoted string
			if err := conn.QueryRow(ctx, sqlQuoteLiteral, pgx.NamedArgs{"password": role.password}).Scan(&quoted); err != nil {
				return store.MapError("quote password", err)
			}
			if _, err := conn.Exec(ctx, withIdents(sqlRolePassword, role.name, raw(quoted))); err != nil {
				return store.MapError("set password of "+role.name, err)
			}
		}
	}
	var db string
	if err := conn.QueryRow(ctx, sqlDatabaseCurrent).Scan(&db); err != nil {
		return store.MapError("read database name", err)
	}
	stmts := []string{
		withIdents(sqlGrantOwnerDatabase, db, r.Owner),
		withIdents(sqlGrantRuntimeDatabase, db, r.Runtime),
		withIdents(sqlGrantOwnerPublic, r.Owner),
		sqlRevokePublicCreate,
	}
	if r.SQL != "" {
		stmts = append(stmts, withIdents(sqlGrantRuntimeDatabase, db, r.SQL))
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return store.MapError("grant to roles", err)
		}
	}
	return nil
}

func lockRoles(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, sqlLock, pgx.NamedArgs{"key": rolesLockKey})
	return store.MapError("lock role setup", err)
}

// RolesGrantRuntime gives the runtime role what the services need in the
// database at url, and only that: USAGE on the kagzi schema, SELECT,
// INSERT, UPDATE and DELETE on its tables, its sequences and functions,
// reading the version table; and the same on what later migrations by
// owner create (default privileges). It runs as the owner (or a
// superuser) and is idempotent. An empty owner is the connection's role.
func RolesGrantRuntime(ctx context.Context, url, owner, runtime string) error {
	conn, err := store.ConnectSession(ctx, url, "roles")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := lockRoles(ctx, conn); err != nil {
		return err
	}
	var o any = raw("CURRENT_ROLE")
	if owner != "" {
		o = owner
	}
	for _, stmt := range []string{
		withIdents(sqlGrantRuntimeSchema, runtime),
		withIdents(sqlGrantRuntimeTables, runtime),
		withIdents(sqlGrantRuntimeSequences, runtime),
		withIdents(sqlGrantRuntimeFunctions, runtime),
		withIdents(sqlGrantRuntimeVersion, runtime),
		withIdents(sqlDefaultRuntimeTables, o, runtime),
		withIdents(sqlDefaultRuntimeSequence, o, runtime),
		withIdents(sqlDefaultRuntimeFunction, o, runtime),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return store.MapError("grant runtime privileges", err)
		}
	}
	return nil
}

// RolesGrantSQL lets role call the functions that start runs, send
// events and publish events (kagzi.start_run, kagzi.send_event and
// kagzi.publish, docs/sql.md) in the migrated database at url, and nothing
// else: USAGE on the kagzi schema, which lets it name the schema's
// objects, and EXECUTE on those three functions, which run as the
// schema's owner (SECURITY DEFINER). It is granted no table, sequence or
// other function, and no default privileges: what later migrations add
// stays closed to it. It runs as the owner (or a superuser) and is
// idempotent.
func RolesGrantSQL(ctx context.Context, url, role string) error {
	conn, err := store.ConnectSession(ctx, url, "roles")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := lockRoles(ctx, conn); err != nil {
		return err
	}
	for _, stmt := range []string{
		withIdents(sqlGrantRuntimeSchema, role),
		withIdents(sqlGrantSQLFunctions, role),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return store.MapError("grant SQL role privileges", err)
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
		return fmt.Errorf("roles: connect to %s: %w", store.Redact(adminURL), err)
	}
	defer conn.Close(ctx)
	for _, n := range names {
		if _, err := conn.Exec(ctx, withIdents(sqlRoleDrop, n)); err != nil {
			return store.MapError("drop role "+n, err)
		}
	}
	return nil
}
