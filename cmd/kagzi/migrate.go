package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
)

func init() { register(newMigrateCmd) }

// migrateJSON is what `migrate` prints with --json.
type migrateJSON struct {
	Version         int32         `json:"version"`
	DatabaseCreated bool          `json:"database_created"`
	Settings        *settingsJSON `json:"settings,omitempty"`
}

// The variables of `kagzi migrate --roles` (docs/configuration.md):
//
// KAGZI_DB_OWNER_ROLE: read by `kagzi migrate --roles`: the role that owns the schema and runs the
// migrations (flag `--owner-role`)
//
// KAGZI_DB_OWNER_PASSWORD: read by `kagzi migrate --roles`: when set, the owner role's
// password is set to it
//
// KAGZI_DB_RUNTIME_ROLE: read by `kagzi migrate`: the role the services connect as, granted row
// access only (flag `--runtime-role`); without `--roles`, granted only when
// set
//
// KAGZI_DB_RUNTIME_PASSWORD: read by `kagzi migrate --roles`: when set, the runtime role's
// password is set to it
//
// KAGZI_DB_SQL_ROLE: read by `kagzi migrate`: the role applications call kagzi.start_run,
// kagzi.send_event and kagzi.publish as (docs/sql.md), granted those three functions only (flag
// `--sql-role`; empty: none); without `--roles`, granted only when set
//
// KAGZI_DB_SQL_PASSWORD: read by `kagzi migrate --roles`: when set, the SQL role's password is
// set to it
func newMigrateCmd(a *cliutil.App) *cobra.Command {
	var withRoles bool
	roles := dbadmin.Roles{OwnerPassword: os.Getenv("KAGZI_DB_OWNER_PASSWORD"), RuntimePassword: os.Getenv("KAGZI_DB_RUNTIME_PASSWORD"),
		SQLPassword: os.Getenv("KAGZI_DB_SQL_PASSWORD")}
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Create the database if needed and apply pending migrations",
		Long: `Apply every pending migration to the database of --database-url and print
the schema version. If that database does not exist, it is created first
(through the "postgres" database of the same server). Migrating is
idempotent and safe to run from several processes at once.

Migrating holds a session (an advisory lock, and the owner's role with
--roles), which a connection pooler in transaction mode (PgBouncer) cannot
give: when --database-url is a pooler, give the same database's direct URL
as --database-session-url (KAGZI_DATABASE_SESSION_URL). Everything is then
done through the direct URL, and migrate checks that --database-url
answers too. A session URL that reaches a pooler is refused, naming it.

When KAGZI_PAYLOAD_WARN_BYTES or KAGZI_PAYLOAD_MAX_BYTES is set, migrate then
writes it to the database's settings (see kagzi settings), the one place
every process reads the payload limits from.

Least privilege: with --roles, run by a role allowed to create roles (the
server's administrator), migrate first makes sure the owner role
(--owner-role, default kagzi_owner) and the runtime role (--runtime-role,
default kagzi_runtime) exist, with the passwords
KAGZI_DB_OWNER_PASSWORD and KAGZI_DB_RUNTIME_PASSWORD when set, then runs
the migrations as the owner, then grants the runtime role row access
(SELECT, INSERT, UPDATE, DELETE) to the schema and nothing else. The
services then connect as the runtime role. Roles belong to the whole server
and are created once, not by the migrations: every database migrated with
the same names shares them. Without --roles, when --runtime-role (or
KAGZI_DB_RUNTIME_ROLE) is given, migrate (connected as the owner) grants it
the same after migrating.

With --roles, migrate also makes sure the SQL role (--sql-role, default
kagzi_sql, password KAGZI_DB_SQL_PASSWORD; empty: none) exists and grants
it EXECUTE on kagzi.start_run, kagzi.send_event and kagzi.publish, the
functions that start runs, send events and publish events from SQL
(docs/sql.md), and nothing else.
Without --roles, when --sql-role (or KAGZI_DB_SQL_ROLE) is given, migrate
grants it the same.`,
		Example: `  kagzi migrate
  kagzi migrate --database-url 'postgres://kagzi:secret@db:5432/kagzi?sslmode=verify-full'
  kagzi migrate --database-url postgres://kagzi@pgbouncer:6432/kagzi --database-session-url postgres://kagzi@db:5432/kagzi
  KAGZI_DB_OWNER_PASSWORD=... KAGZI_DB_RUNTIME_PASSWORD=... kagzi migrate --roles --database-url postgres://postgres:secret@db/kagzi`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			warn, max, err := settingsFromEnv()
			if err != nil {
				return err
			}
			// Migrating holds a session (its lock, the owner's role): it
			// works on the session URL, which must reach Postgres directly.
			session := a.SessionURL()
			// The line counts the migrations applied of those pending.
			prog, err := a.Progress(cmd, "applying migrations", 0)
			if err != nil {
				return err
			}
			var applied int
			o := migrate.Options{Progress: func(n, pending int) {
				if n == 0 {
					prog.SetTotal(int64(pending))
				}
				prog.Add(int64(n - applied))
				applied = n
			}}
			apply := func() (int32, error) {
				if !withRoles {
					return migrate.UpWith(ctx, session, o)
				}
				if err := dbadmin.RolesEnsure(ctx, session, roles); err != nil {
					return 0, err
				}
				o.Role = roles.Owner
				return migrate.UpWith(ctx, session, o)
			}
			prog.Start()
			created := false
			v, err := apply()
			if err != nil && store.IsDatabaseMissing(err) {
				if created, err = createDatabase(cmd, session); err != nil {
					return sessionHint(err)
				}
				v, err = apply()
			}
			prog.Done(-1)
			if err != nil {
				if errors.Is(err, store.ErrSessionPooled) {
					return sessionHint(err)
				}
				return fmt.Errorf("%w\nCheck that Postgres is reachable at %s (%s).", err, cliutil.RedactURL(session), sessionFlag(a))
			}
			switch {
			case withRoles:
				err = dbadmin.RolesGrantRuntime(ctx, session, roles.Owner, roles.Runtime)
			case os.Getenv("KAGZI_DB_RUNTIME_ROLE") != "" || cmd.Flags().Changed("runtime-role"):
				err = dbadmin.RolesGrantRuntime(ctx, session, "", roles.Runtime)
			}
			if err != nil {
				return err
			}
			if roles.SQL != "" && (withRoles || os.Getenv("KAGZI_DB_SQL_ROLE") != "" || cmd.Flags().Changed("sql-role")) {
				if err := dbadmin.RolesGrantSQL(ctx, session, roles.SQL); err != nil {
					return err
				}
			}
			out := migrateJSON{Version: v, DatabaseCreated: created}
			if session != a.DatabaseURL {
				// The services' URL (a pooler, say) must reach what was
				// migrated: say so now rather than when they start.
				st, err := a.Store(ctx)
				if err == nil {
					err = st.Ping(ctx)
				}
				if err != nil {
					return fmt.Errorf("migrated through --database-session-url, but --database-url does not answer: %w", err)
				}
			}
			if warn > 0 || max > 0 {
				st, err := a.Store(ctx)
				if err != nil {
					return err
				}
				set, err := applySettings(ctx, st, warn, max)
				if err != nil {
					return fmt.Errorf("apply KAGZI_PAYLOAD_WARN_BYTES / KAGZI_PAYLOAD_MAX_BYTES: %w", err)
				}
				out.Settings = &settingsJSON{PayloadWarnBytes: set.PayloadWarnBytes, PayloadMaxBytes: set.PayloadMaxBytes}
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if created {
					fmt.Fprintf(w, "Created database %s\n", cliutil.RedactURL(session))
				}
				fmt.Fprintf(w, "Database at schema version %d\n", v)
				if withRoles {
					fmt.Fprintf(w, "Migrated as %s; %s may read and write rows only\n", roles.Owner, roles.Runtime)
					if roles.SQL != "" {
						fmt.Fprintf(w, "%s may call kagzi.start_run, kagzi.send_event and kagzi.publish only\n", roles.SQL)
					}
				}
				if out.Settings != nil {
					fmt.Fprintf(w, "Payload limit %d bytes, warning size %d bytes\n", out.Settings.PayloadMaxBytes, out.Settings.PayloadWarnBytes)
				}
			})
		},
	}
	c.Flags().BoolVar(&withRoles, "roles", false, "create the owner, runtime and SQL roles, migrate as the owner, grant the runtime role row access only and the SQL role the SQL functions only")
	c.Flags().StringVar(&roles.Owner, "owner-role", envOr("KAGZI_DB_OWNER_ROLE", "kagzi_owner"), "the role that owns the schema (env KAGZI_DB_OWNER_ROLE)")
	c.Flags().StringVar(&roles.Runtime, "runtime-role", envOr("KAGZI_DB_RUNTIME_ROLE", "kagzi_runtime"), "the role the services connect as (env KAGZI_DB_RUNTIME_ROLE)")
	c.Flags().StringVar(&roles.SQL, "sql-role", envOr("KAGZI_DB_SQL_ROLE", "kagzi_sql"), "the role that may only call kagzi.start_run, kagzi.send_event and kagzi.publish; empty: none (env KAGZI_DB_SQL_ROLE)")
	return c
}

// sessionHint adds to err, a session URL found to reach a pooler, what
// to do about it (a usage error: exit 2).
func sessionHint(err error) error {
	if !errors.Is(err, store.ErrSessionPooled) {
		return err
	}
	return cliutil.Usagef("%w\nmigrating needs a direct connection to Postgres: give the database's direct URL as "+
		"--database-session-url (or KAGZI_DATABASE_SESSION_URL); --database-url may stay on the pooler", err)
}

// sessionFlag names where the session URL came from, for messages.
func sessionFlag(a *cliutil.App) string {
	if a.DatabaseSessionURL != "" {
		return "--database-session-url or KAGZI_DATABASE_SESSION_URL"
	}
	return "--database-url or KAGZI_DATABASE_URL"
}

// createDatabase creates the database named in dbURL through the
// "postgres" database of the same server. It reports false when another
// process created it first.
func createDatabase(cmd *cobra.Command, dbURL string) (bool, error) {
	name, err := databaseName(dbURL)
	if err != nil {
		return false, err
	}
	admin, err := dbadmin.DatabaseURL(dbURL, "postgres")
	if err != nil {
		return false, cliutil.Usagef("--database-url: %v", err)
	}
	// Through the session URL's server directly: refused through a
	// pooler, as migrating after it would be.
	if err := pgsession.Check(cmd.Context(), admin); errors.Is(err, store.ErrSessionPooled) {
		return false, fmt.Errorf("database %q does not exist, and migrate creates it only through a direct connection: %w", name, err)
	}
	err = dbadmin.DatabaseCreate(cmd.Context(), admin, name, "")
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrConflict), strings.Contains(err.Error(), "SQLSTATE 42P04"): // already exists
		return false, nil
	default:
		return false, fmt.Errorf("database %q does not exist and creating it failed: %w\n"+
			"Create it yourself (CREATE DATABASE %s) or use a role allowed to create databases.", name, err, name)
	}
}

// databaseName is the database a connection string names.
func databaseName(dbURL string) (string, error) {
	if strings.Contains(dbURL, "://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", cliutil.Usagef("--database-url: %v", err)
		}
		if name := strings.TrimPrefix(u.Path, "/"); name != "" {
			return name, nil
		}
		return "", cliutil.Usagef("--database-url %s names no database; add one, e.g. postgres://host:5432/kagzi", cliutil.RedactURL(dbURL))
	}
	for _, f := range strings.Fields(dbURL) {
		if k, v, ok := strings.Cut(f, "="); ok && k == "dbname" {
			return strings.Trim(v, "'"), nil
		}
	}
	return "", cliutil.Usagef("--database-url names no database; add dbname=kagzi")
}
