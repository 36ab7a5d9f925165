package opsstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// The queries of the web console (pkg/console): searches and summaries
// over the same tables, each bounded by an index or a LIMIT, so a view
// costs the same with millions of finished runs.

// The console's statements, written in sql/console.sql.
var (
	consoleRunsSearchPathSQL    = stmt("ConsoleRunsSearchPath")
	consoleRunsSearchSQL        = stmt("ConsoleRunsSearch")
	consoleRunsGetManySQL       = stmt("ConsoleRunsGetMany")
	consoleRunsCreatedAfterSQL  = stmt("ConsoleRunsCreatedAfter")
	consoleRunsNewestSQL        = stmt("ConsoleRunsNewest")
	consoleRunsDeadLettersSQL   = stmt("ConsoleRunsDeadLetters")
	consoleRunsDeadLetterIDsSQL = stmt("ConsoleRunsDeadLetterIDs")
	consoleRunsQueueStatsSQL    = stmt("ConsoleRunsQueueStats")
	consoleNamespacesSQL        = stmt("ConsoleNamespaces")
	consoleRunsLiveStatusesSQL  = stmt("ConsoleRunsLiveStatuses")
	consoleRunsHeldBySQL        = stmt("ConsoleRunsHeldBy")
)

// RunsSearchParams filter and page the console's run search. Zero fields
// do not filter.
type RunsSearchParams struct {
	Namespace string
	// Statuses filter; empty means every status but the template ones.
	Statuses   []RunStatus
	Type       string
	Queue      string
	ScheduleID *uuid.UUID
	ParentID   *uuid.UUID
	ExternalID string
	// CreatedFrom and CreatedTo bound created_at (from inclusive, to
	// exclusive).
	CreatedFrom, CreatedTo *time.Time
	// FinishedBefore, if set, takes only runs that finished before it.
	FinishedBefore *time.Time
	// InputMatch and OutputMatch are SQL/JSON path predicates evaluated
	// against the payload (e.g. `$.customer == "ada"`); a payload that is
	// not JSON, or for which the predicate is not a boolean, does not match.
	InputMatch, OutputMatch string
	// Query filters further in the filter package's language, over the
	// built-in fields and the namespace's search attributes (see
	// BuildWhere); "" does not filter.
	Query string
	// Limit is the page size (0: DefaultPageSize, at most MaxPageSize).
	Limit int
	// After continues a previous page.
	After *Cursor
}

// The page size of a listing of runs or schedules.
const (
	// DefaultPageSize is the page size when none is given (0).
	DefaultPageSize = 50
	// MaxPageSize bounds one page: what one statement reads and one
	// answer carries. More is read page by page, with the cursor.
	MaxPageSize = 1000
)

// pageLimit is a listing's page size: limit, DefaultPageSize when 0, at
// most MaxPageSize. A negative limit is a mistake, not a request for the
// default.
func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageSize, nil
	case limit < 0:
		return 0, invalidf("limit %d is negative; give 1 to %d, or 0 for %d", limit, MaxPageSize, DefaultPageSize)
	case limit > MaxPageSize:
		return 0, invalidf("limit %d is above the maximum %d", limit, MaxPageSize)
	}
	return limit, nil
}

// RunsSearch lists runs newest first with every filter (RunsList is its
// plain form). Without payload filters it reads one page of the listing
// index.
func (s *Ops) RunsSearch(ctx context.Context, p RunsSearchParams) (runs []Run, next *Cursor, err error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return nil, nil, err
	}
	if p.Limit, err = pageLimit(p.Limit); err != nil {
		return nil, nil, err
	}
	statuses := make([]string, 0, len(p.Statuses))
	for _, st := range p.Statuses {
		if !st.Valid() {
			return nil, nil, invalidf("unknown status %q", st)
		}
		statuses = append(statuses, string(st))
	}
	for _, m := range []string{p.InputMatch, p.OutputMatch} {
		if m == "" {
			continue
		}
		var ok bool
		if err := consoleRunsSearchPathSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"path": m}).Scan(&ok); err != nil {
			return nil, nil, invalidf("%q is not a JSON path: %v", m, err)
		}
	}
	var afterTS *time.Time
	var afterID *uuid.UUID
	if p.After != nil {
		afterTS, afterID = &p.After.CreatedAt, &p.After.ID
	}
	args := pgx.NamedArgs{"namespace": p.Namespace, "statuses": statuses, "type": p.Type, "queue": p.Queue,
		"schedule_id": p.ScheduleID, "external_id": p.ExternalID, "created_from": p.CreatedFrom, "created_to": p.CreatedTo,
		"finished_before":  p.FinishedBefore,
		"after_created_at": afterTS, "after_run_id": afterID, "input_match": p.InputMatch, "output_match": p.OutputMatch,
		"limit": p.Limit + 1, "parent_run_id": p.ParentID}
	if p.Query == "" {
		rows, err := consoleRunsSearchSQL.Query(ctx, s.h.DB, args)
		if err != nil {
			return nil, nil, mapErr("search runs", err)
		}
		if runs, err = collectSearchRuns(rows); err != nil {
			return nil, nil, mapErr("search runs", err)
		}
	} else {
		attrs, err := s.fields(ctx, p.Namespace)
		if err != nil {
			return nil, nil, err
		}
		clause, drive, qargs, err := buildSearch(p.Query, attrs, true)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range qargs {
			args[k] = v
		}
		text := withQuery(consoleRunsSearchSQL, clause)
		if drive != "" {
			text = withDrive(text, drive)
		}
		err = s.queryTx(ctx, "search runs", func(tx *Ops) error {
			rows, err := tx.h.DB.Query(ctx, text, args)
			if err != nil {
				return mapErr("search runs", err)
			}
			runs, err = collectSearchRuns(rows)
			return mapErr("search runs", err)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if len(runs) > p.Limit {
		runs = runs[:p.Limit]
		last := runs[len(runs)-1]
		next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return runs, next, nil
}

// collectSearchRuns reads ConsoleRunsSearch's rows: the runs, each with
// its pause.
func collectSearchRuns(rows pgx.Rows) ([]Run, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) {
		var at *time.Time
		var by, reason string
		r, err := scanRun(row, &at, &by, &reason)
		if err == nil && at != nil {
			r.Paused = &core.Pause{By: by, Reason: reason, At: *at}
		}
		return r, err
	})
}

// RunsGetMany returns the runs of a namespace with these ids (without
// payloads), in no particular order; missing ids are left out.
func (s *Ops) RunsGetMany(ctx context.Context, namespace string, ids []uuid.UUID) ([]Run, error) {
	rows, err := consoleRunsGetManySQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_ids": ids})
	if err != nil {
		return nil, mapErr("get runs", err)
	}
	runs, err := collectRuns(rows)
	return runs, mapErr("get runs", err)
}

// RunsCreatedAfter returns up to limit runs (templates excluded) of a
// namespace created after the cursor, oldest first: what a view that has
// seen everything up to the cursor has not seen yet.
func (s *Ops) RunsCreatedAfter(ctx context.Context, namespace string, after Cursor, limit int) ([]Run, error) {
	rows, err := consoleRunsCreatedAfterSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "after_created_at": after.CreatedAt, "after_run_id": after.ID, "limit": limit})
	if err != nil {
		return nil, mapErr("runs created after", err)
	}
	runs, err := collectRuns(rows)
	return runs, mapErr("runs created after", err)
}

// RunsNewest returns the cursor of the namespace's newest run (templates
// included), or the zero cursor when it has none.
func (s *Ops) RunsNewest(ctx context.Context, namespace string) (Cursor, error) {
	var c Cursor
	err := consoleRunsNewestSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace}).Scan(&c.CreatedAt, &c.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, nil
	}
	return c, mapErr("newest run", err)
}

// DeadLetterGroup is a set of failed runs of one type with errors of one
// shape (digits, hex ids and quoted values masked).
type DeadLetterGroup struct {
	Type        string
	Fingerprint string
	// Example is the error of the newest run of the group.
	Example string
	Count   int64
	Newest  time.Time
	Oldest  time.Time
}

// DeadLetterScan bounds how many of the newest failed runs the dead-letter
// view groups and a bulk retry walks: the failed-runs index is read in that
// order, so the cost is bounded too.
const DeadLetterScan = 10000

// RunsDeadLetters groups the namespace's newest failed runs (at most
// DeadLetterScan) by type and error fingerprint, biggest group first.
func (s *Ops) RunsDeadLetters(ctx context.Context, namespace string) ([]DeadLetterGroup, error) {
	rows, err := consoleRunsDeadLettersSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "scan": DeadLetterScan})
	if err != nil {
		return nil, mapErr("dead letters", err)
	}
	defer rows.Close()
	var out []DeadLetterGroup
	for rows.Next() {
		var g DeadLetterGroup
		var newest, oldest *time.Time
		if err := rows.Scan(&g.Type, &g.Fingerprint, &g.Example, &g.Count, &newest, &oldest); err != nil {
			return nil, mapErr("dead letters", err)
		}
		if newest != nil {
			g.Newest, g.Oldest = *newest, *oldest
		}
		out = append(out, g)
	}
	return out, mapErr("dead letters", rows.Err())
}

// RunsDeadLetterIDs returns the ids of up to limit of the namespace's
// newest failed runs (within DeadLetterScan) of type typ ("" any) whose
// error has this fingerprint ("" any), newest first.
func (s *Ops) RunsDeadLetterIDs(ctx context.Context, namespace, typ, fingerprint string, limit int) ([]uuid.UUID, error) {
	rows, err := consoleRunsDeadLetterIDsSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "type": typ, "fingerprint": fingerprint, "limit": limit, "scan": DeadLetterScan})
	if err != nil {
		return nil, mapErr("dead letter ids", err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr("dead letter ids", err)
		}
		out = append(out, id)
	}
	return out, mapErr("dead letter ids", rows.Err())
}

// QueueTypeStats are the live runs of one workflow type in one queue.
type QueueTypeStats struct {
	Queue    string
	Type     string
	Due      int64
	Running  int64
	Sleeping int64
	// OldestDue is the available_at of the longest-waiting due run.
	OldestDue *time.Time
}

// RunsQueueStats counts the namespace's live runs per queue and type:
// due (claimable now), running, and sleeping (suspended until a known
// time). It reads the claim and lease indexes only, never finished runs.
func (s *Ops) RunsQueueStats(ctx context.Context, namespace string) ([]QueueTypeStats, error) {
	rows, err := consoleRunsQueueStatsSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("queue stats", err)
	}
	defer rows.Close()
	var out []QueueTypeStats
	for rows.Next() {
		var q QueueTypeStats
		if err := rows.Scan(&q.Queue, &q.Type, &q.Due, &q.Running, &q.Sleeping, &q.OldestDue); err != nil {
			return nil, mapErr("queue stats", err)
		}
		out = append(out, q)
	}
	return out, mapErr("queue stats", rows.Err())
}

// Namespaces lists the namespaces that have runs or workers (at most 200,
// by name). It walks the namespace-leading indexes with skip scans, one
// index probe per namespace.
func (s *Ops) Namespaces(ctx context.Context) ([]string, error) {
	rows, err := consoleNamespacesSQL.QueryPos(ctx, s.h.DB)
	if err != nil {
		return nil, mapErr("namespaces", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			return nil, mapErr("namespaces", err)
		}
		out = append(out, ns)
	}
	return out, mapErr("namespaces", rows.Err())
}

// LiveRun is a live run's status and queue, as the console keeps it.
type LiveRun struct {
	Status RunStatus
	Queue  string
}

// RunsLiveStatuses returns the status and queue of each live (pending,
// running, sleeping) run of a namespace, at most limit of them: the
// console's starting point for keeping counts, per status and per queue,
// from events.
func (s *Ops) RunsLiveStatuses(ctx context.Context, namespace string, limit int) (map[uuid.UUID]LiveRun, error) {
	rows, err := consoleRunsLiveStatusesSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "limit": limit})
	if err != nil {
		return nil, mapErr("live statuses", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]LiveRun{}
	// A namespace has few queues: each name is kept once, not per run.
	queues := map[string]string{}
	for rows.Next() {
		var id uuid.UUID
		var r LiveRun
		if err := rows.Scan(&id, &r.Status, &r.Queue); err != nil {
			return nil, mapErr("live statuses", err)
		}
		if q, ok := queues[r.Queue]; ok {
			r.Queue = q
		} else {
			queues[r.Queue] = r.Queue
		}
		out[id] = r
	}
	return out, mapErr("live statuses", rows.Err())
}

// RunsHeldBy counts the running runs each of these workers holds (through
// the lease index).
func (s *Ops) RunsHeldBy(ctx context.Context, namespace string, workers []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := consoleRunsHeldBySQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "worker_ids": workers})
	if err != nil {
		return nil, mapErr("runs held", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var w uuid.UUID
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			return nil, mapErr("runs held", err)
		}
		out[w] = n
	}
	return out, mapErr("runs held", rows.Err())
}

// RunsListParams filter and page a listing of runs.
type RunsListParams struct {
	Namespace string
	// Statuses filter; empty means every status but the template ones.
	Statuses   []RunStatus
	Type       string
	Queue      string
	ScheduleID *uuid.UUID
	ParentID   *uuid.UUID
	// Query filters in the filter package's language (e.g. `customer =
	// '42' AND status = 'FAILED'`), ANDed with the fields above; ""
	// does not filter. A listing by a query stops after QueryTimeout.
	Query string
	// Limit is the page size (0: DefaultPageSize, at most MaxPageSize).
	Limit int
	// After continues a previous page.
	After *Cursor
}

// RunsList lists runs newest first. next is nil on the last page.
func (s *Ops) RunsList(ctx context.Context, p RunsListParams) (runs []Run, next *Cursor, err error) {
	return s.RunsSearch(ctx, RunsSearchParams{Namespace: p.Namespace, Statuses: p.Statuses, Type: p.Type, Queue: p.Queue,
		ScheduleID: p.ScheduleID, ParentID: p.ParentID, Query: p.Query, Limit: p.Limit, After: p.After})
}

// PageLimit is pageLimit, for the listings of package store.
func PageLimit(limit int) (int, error) { return pageLimit(limit) }
