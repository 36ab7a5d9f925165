package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bench's own reads of Postgres: server statistics (pg_stat_*), River's
// job count and the checks of its fixtures. No service makes them, so they
// live here rather than in pkg/store; they go straight to a pool.

// DBStats is a snapshot of a database's counters in pg_stat_database and
// the server's in pg_stat_wal. Postgres 15 flushes a backend's counters
// lazily (within about a second when busy, up to ten seconds after its
// last transaction when idle), so a snapshot lags the activity a little.
type DBStats struct {
	At time.Time
	// XactCommit and XactRollback count transactions; every autocommit
	// statement is one.
	XactCommit, XactRollback int64
	// Rows written and read.
	TupInserted, TupUpdated, TupDeleted, TupReturned, TupFetched int64
	// Blocks read from disk and found in shared buffers.
	BlksRead, BlksHit int64
	// WALRecords and WALBytes are server-wide (pg_stat_wal).
	WALRecords, WALBytes int64
}

// Xacts is the number of transactions, committed or rolled back.
func (s DBStats) Xacts() int64 { return s.XactCommit + s.XactRollback }

// Sub returns s minus an earlier snapshot b (At is s's).
func (s DBStats) Sub(b DBStats) DBStats {
	return DBStats{At: s.At,
		XactCommit: s.XactCommit - b.XactCommit, XactRollback: s.XactRollback - b.XactRollback,
		TupInserted: s.TupInserted - b.TupInserted, TupUpdated: s.TupUpdated - b.TupUpdated,
		TupDeleted: s.TupDeleted - b.TupDeleted, TupReturned: s.TupReturned - b.TupReturned, TupFetched: s.TupFetched - b.TupFetched,
		BlksRead: s.BlksRead - b.BlksRead, BlksHit: s.BlksHit - b.BlksHit,
		WALRecords: s.WALRecords - b.WALRecords, WALBytes: s.WALBytes - b.WALBytes}
}

// ReadDBStats reads the counters of database datname. Read them over a pool on
// another database (the bench's admin URL), so the read itself is not
// counted in datname's figures.
func ReadDBStats(ctx context.Context, db *pgxpool.Pool, datname string) (DBStats, error) {
	var st DBStats
	err := db.QueryRow(ctx, `
SELECT clock_timestamp(), d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted, d.tup_returned,
	d.tup_fetched, d.blks_read, d.blks_hit, w.wal_records, w.wal_bytes::bigint
FROM pg_stat_database d CROSS JOIN pg_stat_wal w WHERE d.datname = @datname`, pgx.NamedArgs{"datname": datname}).Scan(
		&st.At, &st.XactCommit, &st.XactRollback, &st.TupInserted, &st.TupUpdated, &st.TupDeleted, &st.TupReturned,
		&st.TupFetched, &st.BlksRead, &st.BlksHit, &st.WALRecords, &st.WALBytes)
	if err != nil {
		return DBStats{}, fmt.Errorf("bench: database statistics of %s: %w", datname, err)
	}
	return st, nil
}

// StatementCalls returns the number of statements pg_stat_statements has
// counted in db's database, creating the extension first. It fails where
// the module is not loaded (shared_preload_libraries): callers fall back
// to ReadDBStats.
func StatementCalls(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return 0, fmt.Errorf("bench: create extension pg_stat_statements: %w", err)
	}
	var n int64
	if err := db.QueryRow(ctx, `
SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		return 0, fmt.Errorf("bench: read pg_stat_statements: %w", err)
	}
	return n, nil
}

// Backend is one server process as pg_stat_activity shows it.
type Backend struct {
	PID             int
	ApplicationName string
	BackendType     string
	// State is active, idle, idle in transaction …
	State string
	// QueryStart is when its current or last statement started (nil:
	// none yet).
	QueryStart *time.Time
	// Query is its current or last statement (clipped).
	Query string
}

// Activity lists the client backends connected to database datname, the
// reading one left out: read from another database, it lists only what
// the measured processes hold.
func Activity(ctx context.Context, db *pgxpool.Pool, datname string) ([]Backend, error) {
	rows, err := db.Query(ctx, `
SELECT pid, coalesce(application_name, ''), coalesce(backend_type, ''), coalesce(state, ''), query_start, left(coalesce(query, ''), 400)
FROM pg_stat_activity WHERE datname = @datname AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
		pgx.NamedArgs{"datname": datname})
	if err != nil {
		return nil, fmt.Errorf("bench: activity of %s: %w", datname, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Backend, error) {
		var b Backend
		err := r.Scan(&b.PID, &b.ApplicationName, &b.BackendType, &b.State, &b.QueryStart, &b.Query)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: activity of %s: %w", datname, err)
	}
	return out, nil
}

// AdvisoryLockHeld reports whether a session of db's database holds the
// advisory lock key (as pgsession.Leader and pgsession.LockedConnect take it): the
// bench waits on it for the reaper's and the relay's leaders.
func AdvisoryLockHeld(ctx context.Context, db *pgxpool.Pool, key int64) (bool, error) {
	var held bool
	if err := db.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key)`, pgx.NamedArgs{"key": key}).Scan(&held); err != nil {
		return false, fmt.Errorf("bench: advisory lock %#x: %w", key, err)
	}
	return held, nil
}

// Checkpoint forces a checkpoint (superuser or pg_checkpoint), so the
// writes of a bulk load are not flushed during the next measurement.
func Checkpoint(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := db.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("bench: checkpoint: %w", err)
	}
	return nil
}

// RunsLockedBy counts, among runs ids of the namespace, the RUNNING ones
// per holder: the recovery scenario polls it to time when a dead worker's
// runs moved to the live one.
func RunsLockedBy(ctx context.Context, db *pgxpool.Pool, namespace string, ids []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := db.Query(ctx, `
SELECT locked_by, count(*) FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND run_id = ANY(@run_ids::uuid[]) AND status = 'RUNNING' AND locked_by IS NOT NULL
GROUP BY locked_by`, pgx.NamedArgs{"namespace": namespace, "run_ids": ids})
	if err != nil {
		return nil, fmt.Errorf("bench: runs by holder: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var w uuid.UUID
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			return nil, fmt.Errorf("bench: runs by holder: %w", err)
		}
		out[w] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bench: runs by holder: %w", err)
	}
	return out, nil
}

// StatementStat is one normalised statement as pg_stat_statements counts
// it.
type StatementStat struct {
	Query string
	Calls int64
	// ExecMS is the time spent executing it, planning excluded.
	ExecMS float64
	// PlanMS is the time spent planning it (track_planning on).
	PlanMS float64
	Rows   int64
	// Blocks is shared buffers hit and read: how much it scanned.
	Blocks int64
	// TopLevel is false for a statement run inside a function (a
	// trigger's), counted with pg_stat_statements.track = all.
	TopLevel bool
}

// StatementStatsReset creates pg_stat_statements in db's database and
// clears its counters (server-wide: call it only on a cluster of its own).
// It fails where the module is not preloaded.
func StatementStatsReset(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Errorf("bench: create extension pg_stat_statements: %w", err)
	}
	if _, err := db.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return fmt.Errorf("bench: reset pg_stat_statements: %w", err)
	}
	return nil
}

// StatementStats lists what pg_stat_statements counted in database datname
// since the last reset, the most expensive first.
func StatementStats(ctx context.Context, db *pgxpool.Pool, datname string) ([]StatementStat, error) {
	rows, err := db.Query(ctx, `
SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 300), calls, total_exec_time, total_plan_time, rows, shared_blks_hit + shared_blks_read, toplevel FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = @datname) ORDER BY total_exec_time + total_plan_time DESC`,
		pgx.NamedArgs{"datname": datname})
	if err != nil {
		return nil, fmt.Errorf("bench: read pg_stat_statements: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatementStat, error) {
		var st StatementStat
		err := r.Scan(&st.Query, &st.Calls, &st.ExecMS, &st.PlanMS, &st.Rows, &st.Blocks, &st.TopLevel)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: read pg_stat_statements: %w", err)
	}
	return out, nil
}

// RiverCompleted counts the completed jobs in River's table of db's
// database: River's completion events may be dropped by a full channel,
// so the River comparison stops its clock on the table.
func RiverCompleted(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("bench: count completed river jobs: %w", err)
	}
	return n, nil
}

// TableStats is the size and tuple counts of a set of kagzi tables.
type TableStats struct {
	// Bytes is pg_total_relation_size summed: heap, TOAST and indexes.
	Bytes int64
	// Dead and Live are n_dead_tup and n_live_tup summed (estimates the
	// statistics collector keeps; they lag by its flush interval).
	Dead, Live int64
	// Vacuums counts the vacuums (manual and automatic) of the tables so
	// far.
	Vacuums int64
}

// ReadTableStats reads the size and tuple counts of tables of the kagzi
// schema over db, a pool on the database that holds them (sizes and
// pg_stat_user_tables are per database).
func ReadTableStats(ctx context.Context, db *pgxpool.Pool, tables []string) (TableStats, error) {
	var s TableStats
	if err := db.QueryRow(ctx, `
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint,
	coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.vacuum_count + s.autovacuum_count), 0)::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = 'kagzi' AND c.relkind = 'r' AND c.relname = ANY(@tables::text[])`,
		pgx.NamedArgs{"tables": tables}).Scan(&s.Bytes, &s.Dead, &s.Live, &s.Vacuums); err != nil {
		return TableStats{}, fmt.Errorf("bench: table statistics: %w", err)
	}
	return s, nil
}
