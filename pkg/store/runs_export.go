package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Export: every row that belongs to a run (those RunsDeleteExpired
// deletes with it), so an operator can archive what retention will
// delete (`kagzi run export`).

// RunRecord is a run with everything that belongs to it.
type RunRecord struct {
	// Run carries its Input and Output.
	Run Run
	// Steps are every attempt of every step, in the order recorded.
	Steps []Step
	// Events are the events sent to the run, oldest first.
	Events []Event
}

// RunsExportParams filter and page an export, as RunsListParams a
// listing.
type RunsExportParams struct {
	Namespace string
	// Statuses filter; empty means every status but the template ones.
	Statuses []RunStatus
	Type     string
	Queue    string
	// FinishedBefore, if set, takes only runs that finished before it:
	// with the retention period, what retention deletes by then.
	FinishedBefore *time.Time
	// Limit is the page size in runs (0: DefaultExportPage, at most
	// MaxPageSize).
	Limit int
	// After continues a previous page.
	After *Cursor
}

// DefaultExportPage is RunsExportParams.Limit when 0: each run comes with
// its payloads, steps and events, so a page is smaller than a listing's.
const DefaultExportPage = 100

// RunsExport returns a page of the namespace's runs, newest first, each
// with its payloads, steps and events, in one round trip after the page's
// listing. next is nil on the last page. The page is read from one
// snapshot (a repeatable-read transaction, unless the Store is bound to a
// caller's transaction, whose isolation then applies): a run that
// retention deletes meanwhile is in it whole or not at all.
func (s *Store) RunsExport(ctx context.Context, p RunsExportParams) (records []RunRecord, next *Cursor, err error) {
	switch {
	case p.Limit == 0:
		p.Limit = DefaultExportPage
	case p.Limit < 0:
		return nil, nil, invalidf("export page size %d is negative", p.Limit)
	}
	if err := checkTime("finished before", p.FinishedBefore); err != nil {
		return nil, nil, err
	}
	_, bound := s.h.DB.(pgx.Tx)
	err = s.InTx(ctx, func(tx *Store) error {
		if !bound {
			if _, err := runsExportSnapshotSQL.ExecPos(ctx, tx.h.DB); err != nil {
				return mapErr("export runs", err)
			}
		}
		records, next, err = tx.runsExport(ctx, p)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return records, next, nil
}

// runsExportSnapshotSQL makes the export's transaction read one snapshot.
var runsExportSnapshotSQL = stmt("RunsExportSnapshot")

// A page's payloads, steps and events, read in one round trip.
var (
	runsExportPayloadsSQL = stmt("RunsExportPayloads")
	runsExportStepsSQL    = stmt("RunsExportSteps")
	runsExportEventsSQL   = stmt("RunsExportEvents")
)

func (s *Store) runsExport(ctx context.Context, p RunsExportParams) (records []RunRecord, next *Cursor, err error) {
	runs, next, err := s.RunsSearch(ctx, RunsSearchParams{Namespace: p.Namespace, Statuses: p.Statuses, Type: p.Type,
		Queue: p.Queue, FinishedBefore: p.FinishedBefore, Limit: p.Limit, After: p.After})
	if err != nil || len(runs) == 0 {
		return nil, next, err
	}
	ids := make([]uuid.UUID, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	args := pgx.NamedArgs{"namespace": p.Namespace, "run_ids": ids}
	b := &pgx.Batch{}
	runsExportPayloadsSQL.Queue(b, args)
	runsExportStepsSQL.Queue(b, args)
	runsExportEventsSQL.Queue(b, args)
	br := s.h.DB.SendBatch(ctx, b)
	defer br.Close()

	type payload struct{ in, out []byte }
	payloads := map[uuid.UUID]payload{}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, mapErr("export payloads", err)
	}
	for rows.Next() {
		var id uuid.UUID
		var pl payload
		if err := rows.Scan(&id, &pl.in, &pl.out); err != nil {
			rows.Close()
			return nil, nil, mapErr("export payloads", err)
		}
		payloads[id] = pl
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr("export payloads", err)
	}

	steps := map[uuid.UUID][]Step{}
	if rows, err = br.Query(); err != nil {
		return nil, nil, mapErr("export steps", err)
	}
	for rows.Next() {
		var st Step
		if err := rows.Scan(&st.RunID, &st.StepID, &st.Attempt, &st.Namespace, &st.Kind, &st.Status, &st.IsLatest,
			&st.Input, &st.Output, &st.Error, &st.CreatedAt, &st.StartedAt, &st.FinishedAt, &st.RetryAt, &st.ChildRunID,
			&st.RunAttempt, &st.ErrorType, &st.NonRetryable); err != nil {
			rows.Close()
			return nil, nil, mapErr("export steps", err)
		}
		steps[st.RunID] = append(steps[st.RunID], st)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr("export steps", err)
	}

	events := map[uuid.UUID][]Event{}
	if rows, err = br.Query(); err != nil {
		return nil, nil, mapErr("export events", err)
	}
	for rows.Next() {
		var ev Event
		if err := rows.Scan(&ev.ID, &ev.Namespace, &ev.RunID, &ev.Name, &ev.Payload, &ev.CreatedAt, &ev.ConsumedAt,
			&ev.ConsumedBy); err != nil {
			rows.Close()
			return nil, nil, mapErr("export events", err)
		}
		events[ev.RunID] = append(events[ev.RunID], ev)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr("export events", err)
	}

	records = make([]RunRecord, 0, len(runs))
	for _, r := range runs {
		pl := payloads[r.ID]
		r.Input, r.Output = pl.in, pl.out
		st, ev := steps[r.ID], events[r.ID]
		if st == nil {
			st = []Step{}
		}
		if ev == nil {
			ev = []Event{}
		}
		records = append(records, RunRecord{Run: r, Steps: st, Events: ev})
	}
	return records, next, nil
}
