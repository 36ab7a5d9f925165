package opsstore

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

// historyInsertFinishedSQL is RunsInsertFinished's statement.
var historyInsertFinishedSQL = stmt("HistoryInsertFinished")

// RunsInsertFinished inserts p.Count COMPLETED runs, each with its payload
// row (input and output) and one completed step, in one statement (INSERT
// … SELECT over generate_series): the history of a busy system, which the
// hot paths must not slow down on. Run ids are UUID v7 of their creation
// time, as RunsCreate makes them. It returns the runs inserted.
func (s *Ops) RunsInsertFinished(ctx context.Context, p RunsInsertFinishedParams) (int64, error) {
	if p.Count <= 0 || p.From < 0 {
		return 0, invalidf("finished runs: from %d count %d", p.From, p.Count)
	}
	var n int64
	err := historyInsertFinishedSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "type": p.Type, "from": p.From,
		"count": p.Count, "before": p.Before}).Scan(&n)
	return n, mapErr("insert finished runs", err)
}

// historyAnalyzeSQL is Analyze's statement.
var historyAnalyzeSQL = stmt("HistoryAnalyze")

// Analyze refreshes the planner's statistics of Kagzi's tables: after a
// bulk load (RunsInsertFinished) the plans measured next must be those of
// a table that size, not of the empty one autovacuum last saw.
func (s *Ops) Analyze(ctx context.Context) error {
	_, err := historyAnalyzeSQL.ExecPos(ctx, s.h.DB)
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

// historyScheduleFiresSQL is SchedulesFires' statement.
var historyScheduleFiresSQL = stmt("HistoryScheduleFires")

// SchedulesFires lists the runs fired for times in [from, to) by the
// namespace's schedules, oldest first.
func (s *Ops) SchedulesFires(ctx context.Context, namespace string, from, to time.Time) ([]ScheduleFire, error) {
	rows, err := historyScheduleFiresSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "from": from, "to": to})
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
