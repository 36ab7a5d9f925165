package store

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statements `kagzi bench` (cmd/kagzi/internal/bench) needs to measure what Kagzi
// costs Postgres: server statistics, connection counts, bulk history,
// and the few reads its scenarios make. None is used by a service.

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

// BenchDBStats reads the counters of database datname. Read it over a
// connection to another database (the bench's admin URL), so the read
// itself is not counted in datname's figures.
func (s *Store) BenchDBStats(ctx context.Context, datname string) (DBStats, error) {
	var st DBStats
	err := s.db.QueryRow(ctx, `
SELECT clock_timestamp(), d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted, d.tup_returned,
	d.tup_fetched, d.blks_read, d.blks_hit, w.wal_records, w.wal_bytes::bigint
FROM pg_stat_database d CROSS JOIN pg_stat_wal w WHERE d.datname = @datname`, pgx.NamedArgs{"datname": datname}).Scan(
		&st.At, &st.XactCommit, &st.XactRollback, &st.TupInserted, &st.TupUpdated, &st.TupDeleted, &st.TupReturned,
		&st.TupFetched, &st.BlksRead, &st.BlksHit, &st.WALRecords, &st.WALBytes)
	return st, mapErr("database statistics of "+datname, err)
}

// BenchStatementCalls returns the number of statements pg_stat_statements
// has counted in the current database, creating the extension first. It
// fails where the module is not loaded (shared_preload_libraries): callers
// fall back to BenchDBStats.
func (s *Store) BenchStatementCalls(ctx context.Context) (int64, error) {
	if _, err := s.db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return 0, mapErr("create extension pg_stat_statements", err)
	}
	var n int64
	err := s.db.QueryRow(ctx, `
SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	return n, mapErr("read pg_stat_statements", err)
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

// BenchActivity lists the client backends connected to database datname.
func (s *Store) BenchActivity(ctx context.Context, datname string) ([]Backend, error) {
	rows, err := s.db.Query(ctx, `
SELECT pid, coalesce(application_name, ''), coalesce(backend_type, ''), coalesce(state, ''), query_start, left(coalesce(query, ''), 400)
FROM pg_stat_activity WHERE datname = @datname AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
		pgx.NamedArgs{"datname": datname})
	if err != nil {
		return nil, mapErr("activity of "+datname, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Backend, error) {
		var b Backend
		err := r.Scan(&b.PID, &b.ApplicationName, &b.BackendType, &b.State, &b.QueryStart, &b.Query)
		return b, err
	})
	return out, mapErr("activity of "+datname, err)
}

// BenchAdvisoryLockHeld reports whether a session of the current database
// holds the advisory lock key (as store.Leader and store.Listener take it):
// the bench waits on it for the reaper's and the relay's leaders.
func (s *Store) BenchAdvisoryLockHeld(ctx context.Context, key int64) (bool, error) {
	var held bool
	err := s.db.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key)`, pgx.NamedArgs{"key": key}).Scan(&held)
	return held, mapErr("advisory lock", err)
}

// BenchFinishedParams describe the finished history BenchInsertFinished
// makes.
type BenchFinishedParams struct {
	Namespace, Queue, Type string
	// From numbers the first row; rows From to From+Count-1 are made, so
	// successive calls with disjoint ranges never collide.
	From, Count int64
	// Before: the rows were created one millisecond apart, the last one
	// (From+Count-1) at Before minus a millisecond per row after it.
	Before time.Time
}

// BenchInsertFinished inserts p.Count COMPLETED runs, each with its
// payload row (input and output) and one completed step, in one statement
// (INSERT … SELECT over generate_series): the history of a busy system,
// which the hot paths must not slow down on. Run ids are UUID v7 of their
// creation time, as RunsCreate makes them. It returns the runs inserted.
func (s *Store) BenchInsertFinished(ctx context.Context, p BenchFinishedParams) (int64, error) {
	if p.Count <= 0 || p.From < 0 {
		return 0, invalidf("bench history: from %d count %d", p.From, p.Count)
	}
	var n int64
	err := s.db.QueryRow(ctx, `
WITH g AS (
	SELECT i, @before::timestamptz - (@from::bigint + @count::bigint - 1 - i) * interval '1 millisecond' AS t
	FROM generate_series(@from::bigint, @from::bigint + @count::bigint - 1) AS i
), r AS (
	INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, attempts, lease_token,
		created_at, started_at, finished_at)
	SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid,
		@namespace, @queue, @type, 'COMPLETED', 1, 1, t, t + interval '1 millisecond', t + interval '3 millisecond'
	FROM g
	RETURNING run_id, started_at
), p AS (
	INSERT INTO kagzi.workflow_payloads (run_id, input, output) SELECT run_id, '{"steps":1}', '1' FROM r
), st AS (
	INSERT INTO kagzi.step_runs (run_id, step_id, attempt_number, namespace_id, kind, status, output, created_at,
		started_at, finished_at, run_attempt)
	SELECT run_id, 's0', 1, @namespace, 'FUNCTION', 'COMPLETED', '0', started_at, started_at, started_at + interval '1 millisecond', 1 FROM r
)
SELECT count(*) FROM r`, pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "type": p.Type, "from": p.From,
		"count": p.Count, "before": p.Before}).Scan(&n)
	return n, mapErr("insert finished runs", err)
}

// BenchAnalyze refreshes the planner's statistics of Kagzi's tables.
func (s *Store) BenchAnalyze(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `ANALYZE kagzi.workflow_runs, kagzi.workflow_payloads, kagzi.step_runs`)
	return mapErr("analyze", err)
}

// BenchCheckpoint forces a checkpoint (superuser or pg_checkpoint), so the
// writes of a bulk load are not flushed during the next measurement.
func (s *Store) BenchCheckpoint(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `CHECKPOINT`)
	return mapErr("checkpoint", err)
}

// BenchLockedBy counts, among runs ids of the namespace, the RUNNING ones
// per holder.
func (s *Store) BenchLockedBy(ctx context.Context, namespace string, ids []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := s.db.Query(ctx, `
SELECT locked_by, count(*) FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND run_id = ANY(@run_ids::uuid[]) AND status = 'RUNNING' AND locked_by IS NOT NULL
GROUP BY locked_by`, pgx.NamedArgs{"namespace": namespace, "run_ids": ids})
	if err != nil {
		return nil, mapErr("runs by holder", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var w uuid.UUID
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			return nil, mapErr("runs by holder", err)
		}
		out[w] = n
	}
	return out, mapErr("runs by holder", rows.Err())
}

// ScheduleFire is one run a schedule fired.
type ScheduleFire struct {
	ScheduleID uuid.UUID
	RunID      uuid.UUID
	FireAt     time.Time
	// LateMS is the run's created_at minus its fire time, in milliseconds
	// (microsecond resolution): how late the scheduler's transaction began.
	LateMS float64
}

// BenchScheduleFires lists the runs fired for times in [from, to) by the
// namespace's schedules, oldest first.
func (s *Store) BenchScheduleFires(ctx context.Context, namespace string, from, to time.Time) ([]ScheduleFire, error) {
	rows, err := s.db.Query(ctx, `
SELECT schedule_id, run_id, schedule_fire_at, extract(epoch FROM created_at - schedule_fire_at)::float8 * 1000
FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND schedule_id IS NOT NULL AND schedule_fire_at >= @from AND schedule_fire_at < @to
ORDER BY schedule_fire_at, schedule_id`, pgx.NamedArgs{"namespace": namespace, "from": from, "to": to})
	if err != nil {
		return nil, mapErr("schedule fires", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduleFire, error) {
		var f ScheduleFire
		err := r.Scan(&f.ScheduleID, &f.RunID, &f.FireAt, &f.LateMS)
		return f, err
	})
	return out, mapErr("schedule fires", err)
}

// StatementTally counts the statements sent through the pools it traces
// (ConnectTraced), by statement text, batched statements included (unlike
// StatementCounter, which sees only single statements). `kagzi bench`
// uses it to show what one run costs, statement by statement.
type StatementTally struct {
	mu sync.Mutex
	n  map[string]int64
}

// NewStatementTally returns an empty tally.
func NewStatementTally() *StatementTally { return &StatementTally{n: map[string]int64{}} }

func (t *StatementTally) add(sql string) {
	t.mu.Lock()
	t.n[sql]++
	t.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *StatementTally) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.add(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *StatementTally) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (t *StatementTally) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: each statement of a batch
// counts.
func (t *StatementTally) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.add(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *StatementTally) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Snapshot returns the counts so far by statement text (whitespace
// collapsed).
func (t *StatementTally) Snapshot() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.n))
	for sql, n := range t.n {
		out[strings.Join(strings.Fields(sql), " ")] += n
	}
	return out
}

// PingStatement is the text a StatementTally counts a pool's liveness
// ping under (pgxpool pings a connection idle for more than a second
// before handing it out: one more round trip and transaction).
const PingStatement = "-- ping"

// ConnectTraced is Connect with every statement traced by tracer; when it
// is a *StatementTally it counts the pool's pings too (PingStatement).
func ConnectTraced(ctx context.Context, url string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	return connect(ctx, url, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = tracer
		if t, ok := tracer.(*StatementTally); ok {
			// pgxpool's default rule, counted.
			cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
				if p.IdleDuration > time.Second {
					t.add(PingStatement)
					return true
				}
				return false
			}
		}
	})
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

// BenchStatementsReset creates pg_stat_statements in the current database
// and clears its counters (server-wide: call it only on a cluster of its
// own). It fails where the module is not preloaded.
func (s *Store) BenchStatementsReset(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return mapErr("create extension pg_stat_statements", err)
	}
	_, err := s.db.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return mapErr("reset pg_stat_statements", err)
}

// BenchStatements lists what pg_stat_statements counted in database
// datname since the last reset, the most expensive first.
func (s *Store) BenchStatements(ctx context.Context, datname string) ([]StatementStat, error) {
	rows, err := s.db.Query(ctx, `
SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 300), calls, total_exec_time, total_plan_time, rows, shared_blks_hit + shared_blks_read, toplevel FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = @datname) ORDER BY total_exec_time + total_plan_time DESC`,
		pgx.NamedArgs{"datname": datname})
	if err != nil {
		return nil, mapErr("read pg_stat_statements", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatementStat, error) {
		var st StatementStat
		err := r.Scan(&st.Query, &st.Calls, &st.ExecMS, &st.PlanMS, &st.Rows, &st.Blocks, &st.TopLevel)
		return st, err
	})
	return out, mapErr("read pg_stat_statements", err)
}

// BenchRiverCompleted counts the completed jobs in River's table of the
// current database (the bench's River comparison).
func (s *Store) BenchRiverCompleted(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n)
	return n, mapErr("count completed river jobs", err)
}
