package opsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Batch operations (023_batches.sql, docs/batches.md): one action over a
// set of runs fixed at creation. The store resolves the set, records each
// run's outcome and keeps the counters; the reaper's leader acts.

// BatchAction is what a batch does to each of its runs.
type BatchAction string

// The batch actions.
const (
	BatchCancel    BatchAction = "cancel"
	BatchTerminate BatchAction = "terminate"
	BatchSignal    BatchAction = "signal"
	BatchUpdate    BatchAction = "update"
	BatchPause     BatchAction = "pause"
	BatchResume    BatchAction = "resume"
	BatchRetry     BatchAction = "retry"
	BatchFork      BatchAction = "fork"
	// BatchSetAttributes sets search attributes of each run, live or
	// finished; BatchRemoveAttributes removes them by name.
	BatchSetAttributes    BatchAction = "set-attributes"
	BatchRemoveAttributes BatchAction = "remove-attributes"
	// BatchDelete deletes each finished run as retention does.
	BatchDelete BatchAction = "delete"
)

// BatchActions lists the actions in the order documentation shows them.
var BatchActions = []BatchAction{BatchCancel, BatchTerminate, BatchSignal, BatchUpdate, BatchPause, BatchResume, BatchRetry, BatchFork,
	BatchSetAttributes, BatchRemoveAttributes, BatchDelete}

// Statuses are the run statuses the action applies to: a query resolves
// to runs in them, and a listed run in another is refused at creation.
// Schedule templates are in none of them.
func (a BatchAction) Statuses() []string {
	live := []string{string(core.StatusPending), string(core.StatusRunning), string(core.StatusSleeping)}
	switch a {
	case BatchRetry, BatchFork:
		return []string{string(core.StatusFailed)}
	case BatchDelete:
		return slices.Clone(finishedStatuses)
	case BatchSetAttributes, BatchRemoveAttributes:
		// Re-tagging finished runs after an incident is what these are
		// for, as much as live ones.
		return append(live, finishedStatuses...)
	}
	return live
}

// BatchState is where a batch is in its life.
type BatchState string

// The batch states.
const (
	BatchRunning   BatchState = "running"
	BatchPaused    BatchState = "paused"
	BatchCancelled BatchState = "cancelled"
	BatchCompleted BatchState = "completed"
)

// Bounds of a batch.
const (
	// MaxBatchRuns is the most runs one batch acts on: a query matching
	// more is refused (narrow it, or split it by a time bound).
	MaxBatchRuns = 1_000_000
	// MaxBatchIDs is the most run ids a batch may list.
	MaxBatchIDs = 10_000
	// MaxBatchRate caps a batch's rate, in runs per second.
	MaxBatchRate = 10_000
	// DefaultBatchRate is a batch's rate when none is given.
	DefaultBatchRate = 50
	// MaxBatchReasonLen bounds a batch's reason, in bytes.
	MaxBatchReasonLen = 1024
	// MaxBatchPayload bounds a signal batch's payload, in bytes.
	MaxBatchPayload = 256 << 10
	// MaxBatchList is the most batches or batch runs one listing returns.
	MaxBatchList = 1000
)

// BatchCreateParams describe a batch to create.
type BatchCreateParams struct {
	Namespace string
	Action    BatchAction
	// Query (the filter language) or RunIDs (exactly one) gives the set.
	Query  string
	RunIDs []uuid.UUID
	// Reason is a terminate's or pause's reason; By is recorded as who
	// created the batch (and who paused, for a pause).
	Reason string
	By     string
	// EventName and Payload (JSON) are a signal's event, or an update's
	// name and request.
	EventName string
	Payload   json.RawMessage
	// Attributes are a set-attributes batch's values by name, checked
	// against the namespace's declarations as a workflow's SetAttributes
	// is (through their JSON: a string or a list of strings for a
	// keyword, a number for an int or a float, an RFC 3339 string or a
	// time.Time for a time). AttributeNames are a remove-attributes
	// batch's names, each declared. The batch's Payload holds them as a
	// JSON object of name to value, null for a name to remove.
	Attributes     map[string]any
	AttributeNames []string
	// Rate caps the runs acted on per second (0: DefaultBatchRate).
	Rate int
}

// Batch is a batch operation and its progress.
type Batch struct {
	ID        uuid.UUID
	Namespace string
	Action    BatchAction
	// Query is the filter the set was resolved from ("" for a list).
	Query     string
	Reason    string
	EventName string
	Payload   json.RawMessage
	CreatedBy string
	State     BatchState
	Rate      int
	// Total runs; Done, Failed and Skipped count outcomes (Total minus
	// their sum wait).
	Total, Done, Failed, Skipped int
	CreatedAt                    time.Time
	FinishedAt                   *time.Time
}

// Pending is the runs still to act on.
func (b Batch) Pending() int { return b.Total - b.Done - b.Failed - b.Skipped }

// BatchRun is one run of a batch and its outcome ("" while pending).
type BatchRun struct {
	RunID   uuid.UUID
	Outcome string
	Error   string
	// Detail is what a done action made: a fork's run id, an update's id.
	Detail  string
	ActedAt *time.Time
}

// BatchOutcome is the outcome of the action on one run.
type BatchOutcome struct {
	RunID uuid.UUID
	// Outcome is "done", "failed" or "skipped" (the run was no longer in
	// a status the action takes).
	Outcome string
	Error   string
	// Detail is what a done action made (a fork's run id, an update's id).
	Detail string
}

// The statements of batches, written in sql/batches.sql.
var (
	batchesInsertSQL        = stmt("BatchesInsert")
	batchesSetTotalSQL      = stmt("BatchesSetTotal")
	batchRunsCountQuerySQL  = stmt("BatchRunsCountQuery")
	batchRunsInsertQuerySQL = stmt("BatchRunsInsertQuery")
	batchRunsCheckIDsSQL    = stmt("BatchRunsCheckIDs")
	batchRunsInsertIDsSQL   = stmt("BatchRunsInsertIDs")
	batchesGetSQL           = stmt("BatchesGet")
	batchesListSQL          = stmt("BatchesList")
	batchesRunningSQL       = stmt("BatchesRunning")
	batchesSetStateSQL      = stmt("BatchesSetState")
	batchRunsTakeSQL        = stmt("BatchRunsTake")
	batchRunsSettleSQL      = stmt("BatchRunsSettle")
	batchRunsListSQL        = stmt("BatchRunsList")
)

func (p *BatchCreateParams) check() error {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return err
	}
	known := false
	for _, a := range BatchActions {
		known = known || a == p.Action
	}
	if !known {
		names := make([]string, len(BatchActions))
		for i, a := range BatchActions {
			names[i] = string(a)
		}
		return invalidf("batch action %q: want one of %s", protocol.Echo(string(p.Action)), strings.Join(names, ", "))
	}
	if (p.Query == "") == (len(p.RunIDs) == 0) {
		return invalidf("a batch needs a query or a list of run ids (exactly one)")
	}
	if len(p.RunIDs) > MaxBatchIDs {
		return invalidf("a batch lists %d run ids, at most %d: give a query instead", len(p.RunIDs), MaxBatchIDs)
	}
	if p.Rate == 0 {
		p.Rate = DefaultBatchRate
	}
	if p.Rate < 0 || p.Rate > MaxBatchRate {
		return invalidf("batch rate %d runs/s: want 1 to %d", p.Rate, MaxBatchRate)
	}
	if len(p.Reason) > MaxBatchReasonLen {
		return invalidf("batch reason is %d bytes, at most %d", len(p.Reason), MaxBatchReasonLen)
	}
	if err := core.CheckPrintable("batch reason", p.Reason); err != nil {
		return err
	}
	if len(p.By) > maxNameLen {
		return invalidf("batch by is %d bytes, at most %d", len(p.By), maxNameLen)
	}
	if err := core.CheckPrintable("batch by", p.By); err != nil {
		return err
	}
	if p.Action == BatchSignal || p.Action == BatchUpdate {
		valid := protocol.ValidEventName
		if p.Action == BatchUpdate {
			valid = protocol.ValidUpdateName
		}
		if err := valid(p.EventName); err != nil {
			return invalidf("%s batch: %v", p.Action, err)
		}
		if len(p.Payload) > MaxBatchPayload {
			return invalidf("%s batch payload is %d bytes, at most %d", p.Action, len(p.Payload), MaxBatchPayload)
		}
		if len(p.Payload) > 0 && !json.Valid(p.Payload) {
			return invalidf("%s batch payload is not JSON", p.Action)
		}
	} else if p.EventName != "" || len(p.Payload) > 0 {
		return invalidf("a name and payload go with a signal or update batch only, not %s", p.Action)
	}
	switch {
	case p.Action == BatchSetAttributes && len(p.Attributes) == 0:
		return invalidf("a set-attributes batch needs the attributes to set")
	case p.Action == BatchRemoveAttributes && len(p.AttributeNames) == 0:
		return invalidf("a remove-attributes batch needs the names of the attributes to remove")
	case p.Action != BatchSetAttributes && len(p.Attributes) > 0:
		return invalidf("attributes go with a set-attributes batch only, not %s", p.Action)
	case p.Action != BatchRemoveAttributes && len(p.AttributeNames) > 0:
		return invalidf("attribute names go with a remove-attributes batch only, not %s", p.Action)
	}
	return nil
}

// attributesPayload checks a set-attributes or remove-attributes batch's
// attributes against the namespace's declarations and returns them as the
// batch's payload: a JSON object of name to value, null removing the
// name, as a workflow's SetAttributes sends it and the reaper applies it
// to each run (core.MergeAttributes). A name not declared, or a value
// that does not fit its kind, is ErrAttribute.
func (s *Ops) attributesPayload(ctx context.Context, p BatchCreateParams) (json.RawMessage, error) {
	obj := make(map[string]any, len(p.Attributes)+len(p.AttributeNames))
	for n, v := range p.Attributes {
		if v == nil {
			return nil, fmt.Errorf("%w %q: no value to set (a remove-attributes batch removes it)", core.ErrAttribute, n)
		}
		obj[n] = v
	}
	for _, n := range p.AttributeNames {
		obj[n] = nil
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: the values are not JSON: %v", core.ErrAttribute, err)
	}
	declared, err := core.AttributeKinds(ctx, s.h.DB, p.Namespace)
	if err != nil {
		return nil, err
	}
	set, _, err := core.AttributesFromJSON(raw, declared)
	if err != nil {
		return nil, err
	}
	if _, err := core.AttributeRows(set, declared); err != nil {
		return nil, err
	}
	return raw, nil
}

// BatchesCreate creates a batch and resolves its set of runs in one
// transaction: the live runs a query matches now (the FAILED ones for a
// retry), or the listed ids, each of which must be a run of the namespace
// in a status the action takes (ErrNotFound, ErrConflict otherwise). A
// query is checked as a listing's is (ErrInvalidArgument), and one that
// matches more than MaxBatchRuns runs, or none, is refused. Nothing is
// created on an error.
func (s *Ops) BatchesCreate(ctx context.Context, p BatchCreateParams) (Batch, error) {
	if err := p.check(); err != nil {
		return Batch{}, fmt.Errorf("create batch: %w", err)
	}
	if p.Action == BatchSetAttributes || p.Action == BatchRemoveAttributes {
		raw, err := s.attributesPayload(ctx, p)
		if err != nil {
			return Batch{}, fmt.Errorf("create batch: %w", err)
		}
		p.Payload = raw
	}
	args := pgx.NamedArgs{}
	var clause string
	if p.Query != "" {
		attrs, err := s.fields(ctx, p.Namespace)
		if err != nil {
			return Batch{}, err
		}
		if clause, args, err = BuildWhere(p.Query, attrs); err != nil {
			return Batch{}, fmt.Errorf("create batch: %w", err)
		}
	}
	id := uuid.New()
	statuses := p.Action.Statuses()
	var payload, query any
	if len(p.Payload) > 0 {
		payload = string(p.Payload)
	}
	if p.Query != "" {
		query = p.Query
	}
	args["namespace"], args["statuses"] = p.Namespace, statuses
	var total int64
	err := s.queryTx(ctx, "create batch", func(tx *Ops) error {
		if p.Query != "" {
			args["limit"] = MaxBatchRuns + 1
			if err := tx.h.DB.QueryRow(ctx, withQuery(batchRunsCountQuerySQL, clause), args).Scan(&total); err != nil {
				return mapErr("create batch", err)
			}
			if total > MaxBatchRuns {
				return fmt.Errorf("create batch: %w: the query matches more than %d runs; narrow it (a type, a time bound)", core.ErrInvalidArgument, MaxBatchRuns)
			}
			if total == 0 {
				return fmt.Errorf("create batch: %w: the query matches no run a %s takes (%v)", ErrNotFound, p.Action, statuses)
			}
		} else {
			var bad uuid.UUID
			var st *string
			err := batchRunsCheckIDsSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"ids": p.RunIDs, "namespace": p.Namespace, "statuses": statuses}).Scan(&bad, &st)
			switch {
			case err == nil && st == nil:
				return fmt.Errorf("create batch: run %s: %w", bad, ErrNotFound)
			case err == nil:
				return fmt.Errorf("create batch: run %s is %s: %w: a %s takes runs that are %v", bad, *st, ErrConflict, p.Action, statuses)
			case !isNoRows(err):
				return mapErr("create batch", err)
			}
		}
		if _, err := batchesInsertSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"batch_id": id, "namespace": p.Namespace, "action": string(p.Action),
			"query": query, "reason": p.Reason, "event_name": p.EventName, "payload": payload, "by": p.By,
			"rate": p.Rate, "total": 0}); err != nil {
			return mapErr("create batch", err)
		}
		var tag int64
		if p.Query != "" {
			args["limit"], args["batch_id"] = MaxBatchRuns, id
			ct, err := tx.h.DB.Exec(ctx, withQuery(batchRunsInsertQuerySQL, clause), args)
			if err != nil {
				return mapErr("create batch", err)
			}
			tag = ct.RowsAffected()
		} else {
			ct, err := batchRunsInsertIDsSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"batch_id": id, "ids": p.RunIDs})
			if err != nil {
				return mapErr("create batch", err)
			}
			tag = ct.RowsAffected()
		}
		total = tag
		_, err := batchesSetTotalSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"batch_id": id, "total": total})
		return mapErr("create batch", err)
	})
	if err != nil {
		return Batch{}, err
	}
	return s.BatchesGet(ctx, p.Namespace, id)
}

// scanBatch reads a row of BatchesGet's columns.
func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	var payload []byte
	err := row.Scan(&b.ID, &b.Namespace, &b.Action, &b.Query, &b.Reason, &b.EventName, &payload, &b.CreatedBy, &b.State, &b.Rate,
		&b.Total, &b.Done, &b.Failed, &b.Skipped, &b.CreatedAt, &b.FinishedAt)
	if len(payload) > 0 {
		b.Payload = payload
	}
	return b, err
}

// BatchesGet reads a batch of the namespace (ErrNotFound if none).
func (s *Ops) BatchesGet(ctx context.Context, namespace string, id uuid.UUID) (Batch, error) {
	b, err := scanBatch(batchesGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "batch_id": id}))
	return b, mapErr(fmt.Sprintf("batch %s", id), err)
}

// BatchesList lists the namespace's batches, newest first, at most limit
// (1 to MaxBatchList; 0 is 50).
func (s *Ops) BatchesList(ctx context.Context, namespace string, limit int) ([]Batch, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 0 || limit > MaxBatchList {
		return nil, invalidf("limit %d: want 1 to %d", limit, MaxBatchList)
	}
	rows, err := batchesListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "limit": limit})
	if err != nil {
		return nil, mapErr("list batches", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) { return scanBatch(r) })
	return out, mapErr("list batches", err)
}

// BatchesRunning lists the running batches of every namespace, oldest
// first, at most limit.
func (s *Ops) BatchesRunning(ctx context.Context, limit int) ([]Batch, error) {
	rows, err := batchesRunningSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return nil, mapErr("running batches", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) { return scanBatch(r) })
	return out, mapErr("running batches", err)
}

// BatchesSetState moves a batch to state to from one of from: pause
// (running → paused), resume (paused → running), cancel (running or
// paused → cancelled; its pending runs are left as they are). It returns
// the state the batch had and whether it moved; a batch in another state
// is not moved (the caller says why).
func (s *Ops) BatchesSetState(ctx context.Context, namespace string, id uuid.UUID, to BatchState, from ...BatchState) (was BatchState, moved bool, err error) {
	fs := make([]string, len(from))
	for i, f := range from {
		fs[i] = string(f)
	}
	err = batchesSetStateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "batch_id": id, "to": string(to), "from": fs}).Scan(&was, &moved)
	return was, moved, mapErr(fmt.Sprintf("batch %s", id), err)
}

// BatchRunsTake locks up to limit runs of a batch still to act on, for the
// caller's transaction (which must record their outcomes with
// BatchRunsSettle before it commits); runs another transaction holds are
// skipped.
func (s *Ops) BatchRunsTake(ctx context.Context, batch uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := batchRunsTakeSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"batch_id": batch, "limit": limit})
	if err != nil {
		return nil, mapErr("take batch runs", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return ids, mapErr("take batch runs", err)
}

// BatchRunsSettle records outcomes of runs BatchRunsTake took, adds them
// to the batch's counters and completes the batch with its last run. It
// returns the batch's state after it.
func (s *Ops) BatchRunsSettle(ctx context.Context, batch uuid.UUID, outcomes []BatchOutcome) (BatchState, error) {
	ids, outs := make([]uuid.UUID, len(outcomes)), make([]string, len(outcomes))
	errs, details := make([]string, len(outcomes)), make([]string, len(outcomes))
	for i, o := range outcomes {
		ids[i], outs[i], errs[i], details[i] = o.RunID, o.Outcome, o.Error, o.Detail
	}
	var st BatchState
	err := batchRunsSettleSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"batch_id": batch, "run_ids": ids, "outcomes": outs, "errors": errs,
		"details": details}).Scan(&st)
	return st, mapErr("settle batch runs", err)
}

// BatchRunsList lists a batch's runs after the run id after (uuid.Nil:
// from the first), at most limit (1 to MaxBatchList), with their
// outcomes; outcome ("done", "failed", "skipped", "pending"; "" for all)
// filters.
func (s *Ops) BatchRunsList(ctx context.Context, batch uuid.UUID, outcome string, after uuid.UUID, limit int) ([]BatchRun, error) {
	switch outcome {
	case "", "done", "failed", "skipped", "pending":
	default:
		return nil, invalidf("outcome %q: want done, failed, skipped or pending", protocol.Echo(outcome))
	}
	if limit < 1 || limit > MaxBatchList {
		return nil, invalidf("limit %d: want 1 to %d", limit, MaxBatchList)
	}
	rows, err := batchRunsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"batch_id": batch, "outcome": outcome, "after": after, "limit": limit})
	if err != nil {
		return nil, mapErr("list batch runs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchRun, error) {
		var b BatchRun
		err := r.Scan(&b.RunID, &b.Outcome, &b.Error, &b.Detail, &b.ActedAt)
		return b, err
	})
	return out, mapErr("list batch runs", err)
}
