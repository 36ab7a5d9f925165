package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Statements over the history of finished runs that no service makes:
// `kagzi bench` and the console's benchmark fill a namespace with a busy
// system's history, and the chaos test and the bench read back what
// schedules fired.

// RunsInsertFinishedParams describe the finished history
// RunsInsertFinished makes.
type RunsInsertFinishedParams struct {
	Namespace, Queue, Type string
	// From numbers the first row; rows From to From+Count-1 are made, so
	// successive calls with disjoint ranges never collide.
	From, Count int64
	// Before: the rows were created one millisecond apart, the last one
	// (From+Count-1) at Before minus a millisecond per row after it.
	Before time.Time
}

// RunsInsertFinished inserts p.Count COMPLETED runs, each with its payload
// row (input and output) and one completed step, in one statement (INSERT
// … SELECT over generate_series): the history of a busy system, which the
// hot paths must not slow down on. Run ids are UUID v7 of their creation
// time, as RunsCreate makes them. It returns the runs inserted.
func (s *Store) RunsInsertFinished(ctx context.Context, p RunsInsertFinishedParams) (int64, error) {
	if p.Count <= 0 || p.From < 0 {
		return 0, invalidf("finished runs: from %d count %d", p.From, p.Count)
	}
	var n int64
	err := s.db.QueryRow(ctx, `
WITH g AS (
	SELECT i, @before::timestamptz - (@from::bigint + @count::bigint - 1 - i) * interval '1 millisecond' AS t
	FROM generate_series(@from::bigint, @from::bigint + @count::bigint - 1) AS i
), r AS (
	INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, attempts, lease_token,
		created_at, started_at, finished_at, input, output)
	SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid,
		@namespace, @queue, @type, 'COMPLETED', 1, 1, t, t + interval '1 millisecond', t + interval '3 millisecond',
		'{"steps":1}', '1'
	FROM g
	RETURNING run_id, started_at
), st AS (
	INSERT INTO kagzi.step_runs (run_id, step_id, attempt_number, namespace_id, kind, status, output, created_at,
		started_at, finished_at, run_attempt)
	SELECT run_id, 's0', 1, @namespace, 'FUNCTION', 'COMPLETED', '0', started_at, started_at, started_at + interval '1 millisecond', 1 FROM r
)
SELECT count(*) FROM r`, pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "type": p.Type, "from": p.From,
		"count": p.Count, "before": p.Before}).Scan(&n)
	return n, mapErr("insert finished runs", err)
}

// Analyze refreshes the planner's statistics of Kagzi's tables: after a
// bulk load (RunsInsertFinished) the plans measured next must be those of
// a table that size, not of the empty one autovacuum last saw.
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `ANALYZE kagzi.workflow_runs, kagzi.step_runs`)
	return mapErr("analyze", err)
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

// SchedulesFires lists the runs fired for times in [from, to) by the
// namespace's schedules, oldest first.
func (s *Store) SchedulesFires(ctx context.Context, namespace string, from, to time.Time) ([]ScheduleFire, error) {
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
