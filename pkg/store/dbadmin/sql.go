package dbadmin

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The statements of database and role administration, each written
// whole. Utility statements (CREATE DATABASE, CREATE ROLE, GRANT) take no
// parameters: where one names a database or a role, its %s are filled by
// withIdents, the one builder, with sanitised identifiers.
const (
	sqlDatabaseCreate         = `CREATE DATABASE %s`
	sqlDatabaseCreateTemplate = `CREATE DATABASE %s TEMPLATE %s`
	sqlDatabaseDrop           = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
	sqlDatabaseAllow          = `ALTER DATABASE %s WITH ALLOW_CONNECTIONS true`
	sqlDatabaseRefuse         = `ALTER DATABASE %s WITH ALLOW_CONNECTIONS false`
	sqlDatabaseMarkReady      = `COMMENT ON DATABASE %s IS 'kagzi-ready'`

	// sqlDatabaseEndSessions ends every other session of a database.
	sqlDatabaseEndSessions = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = @datname AND pid <> pg_backend_pid()`
	// sqlDatabaseReady reports whether a template database was marked
	// ready (sqlDatabaseMarkReady) once migrated.
	sqlDatabaseReady = `SELECT shobj_description(oid, 'pg_database') = 'kagzi-ready' FROM pg_database WHERE datname = @datname`
	// sqlDatabaseList lists the databases whose name starts with a prefix.
	sqlDatabaseList = `SELECT datname FROM pg_database WHERE starts_with(datname, @prefix)`
	// sqlDatabaseCurrent names the connection's database.
	sqlDatabaseCurrent = `SELECT current_database()`

	sqlLock   = `SELECT pg_advisory_lock(@key)`
	sqlUnlock = `SELECT pg_advisory_unlock(@key)`

	sqlRoleCreate = `CREATE ROLE %s LOGIN`
	// sqlRolePassword's second %s is a quoted literal (sqlQuoteLiteral).
	sqlRolePassword = `ALTER ROLE %s PASSWORD %s`
	sqlQuoteLiteral = `SELECT quote_literal(@password::text)`
	sqlRoleDrop     = `DROP ROLE IF EXISTS %s`

	// The owner may create the kagzi schema and the migrator's version
	// table, which lives in public; nobody else creates there (the default
	// of Postgres 15 and later). The runtime role may connect.
	sqlGrantOwnerDatabase   = `GRANT CONNECT, CREATE ON DATABASE %s TO %s`
	sqlGrantRuntimeDatabase = `GRANT CONNECT ON DATABASE %s TO %s`
	sqlGrantOwnerPublic     = `GRANT USAGE, CREATE ON SCHEMA public TO %s`
	sqlRevokePublicCreate   = `REVOKE CREATE ON SCHEMA public FROM PUBLIC`

	// What the runtime role may do, now and (default privileges) in what
	// the owner's later migrations create: rows only.
	sqlGrantRuntimeSchema     = `GRANT USAGE ON SCHEMA kagzi TO %s`
	sqlGrantRuntimeTables     = `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA kagzi TO %s`
	sqlGrantRuntimeSequences  = `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA kagzi TO %s`
	sqlGrantRuntimeFunctions  = `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA kagzi TO %s`
	sqlGrantRuntimeVersion    = `GRANT SELECT ON public.kagzi_schema_version TO %s`
	sqlDefaultRuntimeTables   = `ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA kagzi GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s`
	sqlDefaultRuntimeSequence = `ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA kagzi GRANT USAGE, SELECT ON SEQUENCES TO %s`
	sqlDefaultRuntimeFunction = `ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA kagzi GRANT EXECUTE ON FUNCTIONS TO %s`

	// What the SQL role may do: call the functions of migrations 027 and
	// 031 (with sqlGrantRuntimeSchema's USAGE, to name them), nothing else.
	sqlGrantSQLFunctions = `GRANT EXECUTE ON FUNCTION kagzi.start_run(text, text, jsonb, text, text, timestamptz, integer, text, timestamptz),
		kagzi.send_event(text, uuid, text, jsonb), kagzi.publish(text, text, jsonb, uuid) TO %s`
)

// withIdents fills the %s of a statement above with names: each string
// sanitised as an identifier, each raw as it is.
func withIdents(stmt string, names ...any) string {
	args := make([]any, len(names))
	for i, n := range names {
		switch n := n.(type) {
		case string:
			args[i] = pgx.Identifier{n}.Sanitize()
		case raw:
			args[i] = string(n)
		default:
			panic(fmt.Sprintf("dbadmin: withIdents: %T", n))
		}
	}
	return fmt.Sprintf(stmt, args...)
}

// raw is SQL text withIdents inserts unquoted: a keyword or a literal
// already quoted by the server.
type raw string
