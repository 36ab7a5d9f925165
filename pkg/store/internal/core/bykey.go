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
// QueryByKey and ExecByKey run such a statement with enable_seqscan off in
// the transaction that runs it: set, the statement, set back, in one round
// trip. Outside a caller's transaction the batch is one implicit
// transaction, which would end the setting anyway; inside one (or on a
// connection given to the store in any state) the setting must not
// outlive the statement.
// TestReportsReachRunsByKey and TestTriggersPlannedForTheTableAsItIs
// check both.

var (
	plannerSeqScanOff = stmt("PlannerSeqScanOff")
	plannerSeqScanOn  = stmt("PlannerSeqScanOn")
)

// sendByKey sends q's batch: the setting, q, and the setting back. It
// returns the batch with the setting's result read, so that the next
// result is q's.
func (q *NamedSQL) sendByKey(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	plannerSeqScanOff.Queue(b, nil)
	q.Queue(b, args)
	plannerSeqScanOn.Queue(b, nil)
	br := db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// QueryByKey is Query for a statement that must reach its rows by
// primary key (see above). The rows end the batch: whatever the
// transaction's end reports (a failed commit) is their Err.
func (q *NamedSQL) QueryByKey(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgx.Rows, error) {
	br, err := q.sendByKey(ctx, db, args)
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

// ExecByKey is Exec for a statement that must reach its rows by primary
// key (see above).
func (q *NamedSQL) ExecByKey(ctx context.Context, db DBTX, args pgx.NamedArgs) (pgconn.CommandTag, error) {
	br, err := q.sendByKey(ctx, db, args)
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
