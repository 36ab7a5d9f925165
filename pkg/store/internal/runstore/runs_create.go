package runstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Starting runs: validation, the insert of one or many runs, and the
// lookup of the run an insert conflicted with.

// RunsCreateParams describe a run to start.
type RunsCreateParams struct {
	// RunID is optional; a UUID v7 is generated when zero.
	RunID      uuid.UUID
	Namespace  string
	ExternalID string // optional idempotency key, unique among live runs
	Queue      string
	Type       string
	Version    string // optional; see RunsClaim for how an empty version is pinned
	Input      []byte
	// AvailableAt delays the first claim; nil means now.
	AvailableAt  *time.Time
	DeadlineAt   *time.Time
	RetryPolicy  *retry.Policy
	Priority     int
	ParentRunID  *uuid.UUID
	ParentStepID string
	TraceContext string
	// ScheduleID and ScheduleFireAt mark a run fired by a schedule.
	ScheduleID     *uuid.UUID
	ScheduleFireAt *time.Time
	// ConcurrencyKey counts the run against its type's per-key limit under
	// this key; RateLimitKey counts each of its claims against the key's
	// rate limit (see runs_keys.go). Both are optional.
	ConcurrencyKey string
	RateLimitKey   string
	// RequireWorker refuses the start with ErrNoWorker, creating nothing,
	// when no live worker serves Type@Version on Queue (WorkersServing),
	// checked in the insert's own statement. The check comes before the
	// external id's: a repeated start is refused too.
	RequireWorker bool
	// Debounce merges this start into the open debounced run of its type
	// and key, if any (runs_debounce.go); nil: no debounce.
	Debounce *Debounce
	// IDReuse says whether ExternalID may name a new run, given the runs
	// that held it and ended (runs_reuse.go); "" is IDReuseAllowDuplicate.
	// IDReuseWindow bounds how long ago such a run ended to count (0:
	// every run retention keeps).
	IDReuse       IDReusePolicy
	IDReuseWindow time.Duration
	// Attributes are the run's search attributes, each declared in the
	// namespace (AttributesDeclare), of a Go type that fits its kind (see
	// core.AttributeRows); a mismatch is ErrAttribute. They are inserted
	// with the run, in its statement.
	Attributes map[string]any

	// attrRows are Attributes checked by validateCreate.
	attrRows []core.AttrRow
}

// validateCreate checks p; kinds, if not nil, keeps the declared
// attribute kinds it reads for the next params of the same call.
func (s *Runs) validateCreate(ctx context.Context, p *RunsCreateParams, kinds core.KindsRead) ([]byte, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return nil, err
	}
	if err := checkName("queue", p.Queue, true); err != nil {
		return nil, err
	}
	if err := checkName("workflow type", p.Type, true); err != nil {
		return nil, err
	}
	if err := checkName("version", p.Version, false); err != nil {
		return nil, err
	}
	if err := checkExternalID(p.ExternalID); err != nil {
		return nil, err
	}
	if err := checkFlow(p); err != nil {
		return nil, err
	}
	if err := checkFlowKeys(p.ConcurrencyKey, p.RateLimitKey); err != nil {
		return nil, err
	}
	// The priority column is a 32-bit integer: pgx refuses a larger int
	// with an untyped error, and RunsCreateMany's conversion would wrap it.
	if p.Priority < math.MinInt32 || p.Priority > math.MaxInt32 {
		return nil, invalidf("priority %d is outside the 32-bit range", p.Priority)
	}
	if err := checkTime("start time", p.AvailableAt); err != nil {
		return nil, err
	}
	if err := checkTime("deadline", p.DeadlineAt); err != nil {
		return nil, err
	}
	if (p.ScheduleID == nil) != (p.ScheduleFireAt == nil) {
		return nil, invalidf("schedule id and fire time go together")
	}
	if err := s.h.CheckPayload(ctx, "input", p.Input); err != nil {
		return nil, err
	}
	rows, err := core.CheckAttributes(ctx, s.h.DB, p.Namespace, p.Attributes, kinds)
	if err != nil {
		return nil, err
	}
	p.attrRows = rows
	if p.RunID == uuid.Nil {
		id, err := newRunID()
		if err != nil {
			return nil, err
		}
		p.RunID = id
	}
	tc, err := traceOr(ctx, p.TraceContext)
	if err != nil {
		return nil, err
	}
	p.TraceContext = tc
	return encodePolicy(p.RetryPolicy)
}

// runsCreateSQL inserts runs, one per element of the array parameters,
// skipping a row whose external id a live run holds (or whose schedule
// fire time or run id exists): ON CONFLICT DO NOTHING. It returns the
// inserted runs. If a row that requires a worker has no live one (see
// RunsCreateParams.RequireWorker), kagzi.require_worker fails the
// statement and nothing is inserted.
var runsCreateSQL = stmt("RunsCreate")

// RunsCreate starts a run. With an external id that a live run already
// holds, it returns that run and created=false instead. It is
// RunsCreateMany's statement for one run.
func (s *Runs) RunsCreate(ctx context.Context, p RunsCreateParams) (run Run, created bool, err error) {
	policy, err := s.validateCreate(ctx, &p, nil)
	if err != nil {
		return Run{}, false, err
	}
	if p.flow() {
		return s.runsCreateFlow(ctx, p, policy)
	}
	runs, made, err := s.runsCreate(ctx, []RunsCreateParams{p}, [][]byte{policy})
	if err != nil {
		return Run{}, false, err
	}
	return runs[0], made[0], nil
}

// runsCreate inserts the validated runs ps (policies[i] is the encoded
// policy of ps[i]) and returns, for each, the run inserted or the live run
// that holds its external id (or fire time, or id), with created telling
// which. A holder can finish between the insert and the lookup, which
// frees the external id: such rows are inserted again.
func (s *Runs) runsCreate(ctx context.Context, ps []RunsCreateParams, policies [][]byte) ([]Run, []bool, error) {
	runs := make([]Run, len(ps))
	created := make([]bool, len(ps))
	todo := make([]int, len(ps))
	for i := range todo {
		todo[i] = i
	}
	for try := 0; try < 3 && len(todo) > 0; try++ {
		inserted, err := s.runsInsert(ctx, ps, policies, todo)
		if err != nil {
			return nil, nil, err
		}
		var again []int
		for _, i := range todo {
			if run, ok := inserted[ps[i].RunID]; ok {
				run.Input = ps[i].Input
				runs[i], created[i] = run, true
				continue
			}
			existing, err := s.runsFindConflict(ctx, ps[i])
			if isNoRows(err) {
				again = append(again, i)
				continue
			}
			if err != nil {
				return nil, nil, mapErr(rowWhat(len(ps), i), err)
			}
			runs[i] = existing
		}
		todo = again
	}
	if len(todo) > 0 {
		i := todo[0]
		return nil, nil, fmt.Errorf("%s: %w: external id %q keeps changing hands", rowWhat(len(ps), i), ErrConflict, ps[i].ExternalID)
	}
	return runs, created, nil
}

// rowWhat names row i of n runs being created, for errors.
func rowWhat(n, i int) string {
	if n == 1 {
		return "create run"
	}
	return fmt.Sprintf("create runs: row %d", i)
}

// runsInsert runs runsCreateSQL for the rows rows of ps and returns the
// runs it inserted by id.
func (s *Runs) runsInsert(ctx context.Context, ps []RunsCreateParams, policies [][]byte, rows []int) (map[uuid.UUID]Run, error) {
	n := len(rows)
	var (
		ids                          = make([]uuid.UUID, n)
		nss, queues, types, versions = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		exts, pstep                  = make([]*string, n), make([]*string, n)
		avail, deadlines, fireAts    = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		pols                         = make([]*string, n)
		prios                        = make([]int32, n)
		parents, schedules           = make([]*uuid.UUID, n), make([]*uuid.UUID, n)
		traces                       = make([]*string, n)
		inputs                       = make([][]byte, n)
		require                      = make([]bool, n)
		ckeys, rkeys                 = make([]*string, n), make([]*string, n)
		attrs                        core.AttrArrays
	)
	for k, i := range rows {
		p := &ps[i]
		ids[k], nss[k], exts[k], queues[k], types[k], versions[k] = p.RunID, p.Namespace, nullText(p.ExternalID), p.Queue, p.Type, p.Version
		avail[k], deadlines[k], prios[k] = p.AvailableAt, p.DeadlineAt, int32(p.Priority)
		parents[k], pstep[k], traces[k] = p.ParentRunID, nullText(p.ParentStepID), nullText(p.TraceContext)
		schedules[k], fireAts[k] = p.ScheduleID, p.ScheduleFireAt
		if policies[i] != nil {
			pol := string(policies[i])
			pols[k] = &pol
		}
		inputs[k] = p.Input
		require[k] = p.RequireWorker
		ckeys[k], rkeys[k] = nullText(p.ConcurrencyKey), nullText(p.RateLimitKey)
		attrs.Add(p.RunID, p.attrRows)
	}
	what := "create runs"
	if len(ps) == 1 {
		what = "create run"
	}
	args := pgx.NamedArgs{
		"run_ids": ids, "namespaces": nss, "external_ids": exts, "queues": queues, "types": types, "versions": versions,
		"available_ats": avail, "deadlines": deadlines, "retry_policies": pols, "priorities": prios,
		"parent_run_ids": parents, "parent_step_ids": pstep, "trace_contexts": traces, "schedule_ids": schedules,
		"schedule_fire_ats": fireAts, "require_workers": require, "inputs": inputs,
		"concurrency_keys": ckeys, "rate_keys": rkeys,
	}
	// Only a start with attributes takes the statement that inserts them:
	// the common start's statement is the same as without the feature.
	create := runsCreateSQL
	if len(attrs.Names) > 0 {
		create = runsCreateAttributesSQL
		args["attr_run_ids"], args["attr_names"], args["attr_texts"], args["attr_ints"] = attrs.RunIDs, attrs.Names, attrs.Texts, attrs.Ints
		args["attr_floats"], args["attr_bools"], args["attr_times"] = attrs.Floats, attrs.Bools, attrs.Times
	}
	res, err := create.QueryGeneric(ctx, s.h.DB, args)
	if err != nil {
		return nil, mapErr(what, err)
	}
	runs, err := collectRuns(res)
	if err != nil {
		return nil, mapErr(what, err)
	}
	out := make(map[uuid.UUID]Run, len(runs))
	for _, r := range runs {
		out[r.ID] = r
	}
	return out, nil
}

// runsFindConflictSQL is runsFindConflict's statement.
var runsFindConflictSQL = stmt("RunsFindConflict")

// runsFindConflict finds the run that made an insert of p conflict.
func (s *Runs) runsFindConflict(ctx context.Context, p RunsCreateParams) (Run, error) {
	row := runsFindConflictSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "external_id": nullText(p.ExternalID), "schedule_id": p.ScheduleID,
		"schedule_fire_at": p.ScheduleFireAt, "run_id": p.RunID})
	var input []byte
	run, err := scanRun(row, &input)
	run.Input = input
	return run, err
}

// RunsCreateManyResult is the outcome of one row of RunsCreateMany.
type RunsCreateManyResult struct {
	RunID   uuid.UUID
	Created bool // false: an existing live run with the same external id
}

// RunsCreateMany starts many runs in one statement, idempotent per
// external id like RunsCreate. Results are in the order of ps. If a row
// with RequireWorker has no live worker, the statement creates nothing
// and returns ErrNoWorker naming that type.
func (s *Runs) RunsCreateMany(ctx context.Context, ps []RunsCreateParams) ([]RunsCreateManyResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	policies := make([][]byte, len(ps))
	kinds := core.KindsRead{}
	for i := range ps {
		p := &ps[i]
		if p.ScheduleID != nil {
			return nil, invalidf("row %d: fired schedule instances are created by the schedule methods", i)
		}
		pol, err := s.validateCreate(ctx, p, kinds)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		policies[i] = pol
	}
	create := s.runsCreate
	if slices.ContainsFunc(ps, RunsCreateParams.flow) {
		create = s.runsCreateMixed
	}
	runs, created, err := create(ctx, ps, policies)
	if err != nil {
		return nil, err
	}
	out := make([]RunsCreateManyResult, len(ps))
	for i := range ps {
		out[i] = RunsCreateManyResult{RunID: runs[i].ID, Created: created[i]}
	}
	return out, nil
}
