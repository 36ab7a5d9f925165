package core

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A report joins a batch of leases (arrays) with workflow_runs. Planned as
// the table's statistics suggest, it reached the runs two wrong ways:
//   - through workflow_runs_lease_idx (partial: status = 'RUNNING'),
//     reading every running run, whenever the statistics made running
//     runs look few, which they do at any table size (RUNNING is a rare
//     value), so every report cost O(runs running). The statements
//     compare the status with a column of the batch instead of the
//     constant, which no partial index matches;
//   - with a sequential scan, when the session planned the statement
//     while the table was small (a fresh database) and kept that plan as
//     it grew. So these statements are planned with sequential scans off:
//     the primary key is then their only way in, whatever the table's size
//     and statistics.
//
// Planned per execution, a report of one run or a few (at a low rate)
// also paid its planning every time, often: Postgres plans a prepared
// statement afresh while a plan for the actual arguments looks cheaper
// than the generic one, which for array parameters assumes ten elements,
// and planning a statement on workflow_runs, with its two dozen indexes,
// costs as much as running it (0.3 ms for a one-run report, 0.28 ms for a
// start). By primary key one plan serves a report of any size, so the
// reports force the generic plan too, and each session plans them once.
// (The step statement does not: its generic plan ran 6 % slower at the
// ten-step bench's batches of about 60 steps than the plans made for
// them, and a step report of fewer than ten steps takes the statements of
// one step each.)
//
// QueryByKey and ExecByKey run a statement with enable_seqscan off,
// QueryByKeyOnce with plan_cache_mode force_generic_plan as well, and
// QueryGeneric with only the latter, in the transaction that runs it:
// set, the statement, set back, in one round trip. Outside a caller's
// transaction the batch is one implicit transaction, which would end the
// settings anyway; inside one (or on a connection given to the store in
// any state) they must not outlive the statement.
// TestReportsReachRunsByKey, TestTriggersPlannedForTheTableAsItIs,
// TestReportsPlannedOnce and TestRunsCreatePlannedOnce check them.

var (
	plannerSeqScanOff   = stmt("PlannerSeqScanOff")
	plannerSeqScanOn    = stmt("PlannerSeqScanOn")
	plannerByKeyOnceOn  = stmt("PlannerByKeyOnceOn")
	plannerByKeyOnceOff = stmt("PlannerByKeyOnceOff")
	plannerGenericOn    = stmt("PlannerGenericOn")
	plannerGenericOff   = stmt("PlannerGenericOff")
)

// sendWith sends q's batch: the setting on, q, and the setting off. It
// returns the batch with the setting's result read, so that the next
// result is q's.
func (q *NamedSQL) sendWith(ctx context.Context, db DBTX, on, off *NamedSQL, args pgx.NamedArgs) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	on.Queue(b, nil)
	q.Queue(b, args)
	off.Queue(b, nil)
	br := db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// queryWith is Query with a setting on for q alone. The rows end the
// batch: whatever the transaction's end reports (a failed commit) is their
// Err.
func (q *NamedSQL) queryWith(ctx context.Context, db DBTX, on, off *NamedSQL, args pgx.NamedArgs) (pgx.Rows, error) {
	br, err := q.sendWith(ctx, db, on, off, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryByKey is Query for a statement that must reach its rows by
// primary key (see above).
func (q *NamedSQL) QueryByKey(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.Rows, error) {
	return q.queryWith(ctx, db, plannerSeqScanOff, plannerSeqScanOn, args)
}

// QueryByKeyOnce is QueryByKey for a statement planned once per session
// (see above).
func (q *NamedSQL) QueryByKeyOnce(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.Rows, error) {
	return q.queryWith(ctx, db, plannerByKeyOnceOn, plannerByKeyOnceOff, args)
}

// QueryGeneric is Query for a statement whose one plan serves any
// arguments, planned once per session (see above).
func (q *NamedSQL) QueryGeneric(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.Rows, error) {
	return q.queryWith(ctx, db, plannerGenericOn, plannerGenericOff, args)
}

// ExecByKey is Exec for a statement that must reach its rows by primary
// key (see above).
func (q *NamedSQL) ExecByKey(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgconn.CommandTag, error) {
	br, err := q.sendWith(ctx, db, plannerSeqScanOff, plannerSeqScanOn, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// batchRows are a batch's last rows: once read or closed, the batch is
// closed too, and its error is theirs.
type batchRows struct {
	pgx.Rows
	br   pgx.BatchResults
	done bool
	err  error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *batchRows) Close() { r.finish() }

func (r *batchRows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Rows.Err()
}

func (r *batchRows) finish() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	r.err = r.Rows.Err()
	if err := r.br.Close(); r.err == nil {
		r.err = err
	}
}
