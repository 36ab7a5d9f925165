package migrate

// The migrator's statements, each written whole. The version table lives
// in public because the kagzi schema does not exist before the first
// migration. Its layout (one row, one int4 column "version") is the one
// the tern migrator created, which earlier versions of Kagzi used:
// databases they migrated carry on from the version they recorded.
const (
	// sqlLock takes the session advisory lock held while migrating.
	sqlLock = `SELECT pg_advisory_lock(@key)`

	// sqlVersionTableExists reports whether the version table exists.
	sqlVersionTableExists = `SELECT to_regclass('public.kagzi_schema_version') IS NOT NULL`

	// sqlVersionTableCreate makes the version table, one row at version 0:
	// tern's statements, so that the table is the same whichever migrator
	// made it.
	sqlVersionTableCreate = `CREATE TABLE IF NOT EXISTS public.kagzi_schema_version(version int4 NOT NULL);
INSERT INTO public.kagzi_schema_version(version) SELECT 0 WHERE 0 = (SELECT count(*) FROM public.kagzi_schema_version)`

	// sqlVersionRead reads the recorded version.
	sqlVersionRead = `SELECT version FROM public.kagzi_schema_version`

	// sqlVersionSet records a migration's version.
	sqlVersionSet = `UPDATE public.kagzi_schema_version SET version = @version`

	// sqlResetAll undoes the settings a migration made.
	sqlResetAll = `RESET ALL`

	// sqlSetRole runs the migrations as another role; %s is the role's
	// sanitised identifier (a utility statement takes no parameters).
	sqlSetRole = `SET ROLE %s`
)
