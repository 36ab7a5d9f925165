package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// runCols is the column list every run query returns, in scanRun's order.
const runCols = `r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch`

// liveStatuses are the statuses of runs that may still change by themselves.
const liveStatuses = `('PENDING', 'RUNNING', 'SLEEPING')`

func scanRun(row pgx.Row, extra ...any) (Run, error) {
	var r Run
	var policy []byte
	dest := []any{&r.ID, &r.Namespace, &r.ExternalID, &r.Queue, &r.Type, &r.Version,
		&r.Status, &r.Attempts, &r.AvailableAt, &r.LockedBy, &r.LeaseToken, &r.LeaseExpiresAt, &r.Error,
		&r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.DeadlineAt, &policy, &r.ParentRunID,
		&r.ParentStepID, &r.CronExpr, &r.Timezone, &r.MaxCatchup,
		&r.LastFiredAt, &r.ScheduleID, &r.ScheduleFireAt, &r.TraceContext, &r.Priority,
		&r.CancelRequestedAt, &r.ParentClosePolicy, &r.Epoch}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Run{}, err
	}
	if len(policy) > 0 {
		var p retry.Policy
		if err := json.Unmarshal(policy, &p); err != nil {
			return Run{}, fmt.Errorf("decode retry policy of run %s: %w", r.ID, err)
		}
		p = p.WithDefaults()
		r.RetryPolicy = &p
	}
	return r, nil
}

// The store checks names with the same rules and limits as every other
// edge (package protocol), so a name it stores can always be delivered.
const (
	maxNameLen = protocol.MaxNameLen
	maxErrLen  = protocol.MaxErrorLen
)

// checkName checks a namespace, queue, workflow type or version.
func checkName(field, v string, required bool) error {
	if v == "" && !required {
		return nil
	}
	if err := protocol.ValidToken(field, v); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// checkEventName checks the name of an event.
func checkEventName(v string) error {
	if err := protocol.ValidEventName(v); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// minDBTime and endDBTime bound a Postgres timestamptz. pgx does not
// refuse a time outside them: it wraps it into another time.
var (
	minDBTime = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	endDBTime = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)
)

func checkTime(field string, t *time.Time) error {
	if t != nil && (t.Before(minDBTime) || !t.Before(endDBTime)) {
		return invalidf("%s %s is outside the years Postgres stores", field, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// pgText reports whether Postgres can store s as text: it refuses NUL
// bytes and invalid UTF-8 with an error the store cannot type.
func pgText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// checkExternalID checks an optional idempotency key: any text up to
// maxNameLen bytes without control characters. Every edge that takes an
// external id (a start, an event by external id) checks it here. The id
// is printed where operators read (the CLI's tables, the console), so
// one holding a terminal's escape sequence would act on their screen.
func checkExternalID(v string) error {
	if len(v) > maxNameLen {
		return invalidf("external id is %d bytes, at most %d", len(v), maxNameLen)
	}
	return checkPrintable("external id", v)
}

// checkPrintable checks an id or key the caller chose (an external id, a
// debounce, concurrency or rate key): UTF-8 text without control
// characters (NUL included), so that printing it is safe.
func checkPrintable(what, v string) error {
	if !pgText(v) {
		return invalidf("%s %q is not UTF-8 text without NUL bytes", what, protocol.Echo(v))
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return invalidf("%s %q holds a control character (%U at byte %d)", what, protocol.Echo(v), []rune(v[i:])[0], i)
	}
	return nil
}

// clipError and clipText make text that came from user code (error
// messages and types) storable: Postgres text takes neither NUL nor
// invalid UTF-8, and a report it refused would fail its run.
func clipError(s string) string { return protocol.ClipText(s, maxErrLen) }

func encodePolicy(p *retry.Policy) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	if err := p.Validate(); err != nil {
		return nil, invalidf("%v", err)
	}
	q := p.WithDefaults()
	return json.Marshal(q)
}

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
}

func (s *Store) validateCreate(ctx context.Context, p *RunsCreateParams) ([]byte, error) {
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
	if err := s.checkPayload(ctx, "input", p.Input); err != nil {
		return nil, err
	}
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

// newRunID is the id of a run the store starts: a UUID v7, so ids sort by
// creation.
func newRunID() (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("generate run id: %w", err)
	}
	return id, nil
}

func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
func (s *Store) RunsCreate(ctx context.Context, p RunsCreateParams) (run Run, created bool, err error) {
	policy, err := s.validateCreate(ctx, &p)
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
func (s *Store) runsCreate(ctx context.Context, ps []RunsCreateParams, policies [][]byte) ([]Run, []bool, error) {
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
func (s *Store) runsInsert(ctx context.Context, ps []RunsCreateParams, policies [][]byte, rows []int) (map[uuid.UUID]Run, error) {
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
	}
	what := "create runs"
	if len(ps) == 1 {
		what = "create run"
	}
	res, err := runsCreateSQL.query(ctx, s.db, pgx.NamedArgs{
		"run_ids": ids, "namespaces": nss, "external_ids": exts, "queues": queues, "types": types, "versions": versions,
		"available_ats": avail, "deadlines": deadlines, "retry_policies": pols, "priorities": prios,
		"parent_run_ids": parents, "parent_step_ids": pstep, "trace_contexts": traces, "schedule_ids": schedules,
		"schedule_fire_ats": fireAts, "require_workers": require, "inputs": inputs,
		"concurrency_keys": ckeys, "rate_keys": rkeys,
	})
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
func (s *Store) runsFindConflict(ctx context.Context, p RunsCreateParams) (Run, error) {
	row := runsFindConflictSQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": p.Namespace, "external_id": nullText(p.ExternalID), "schedule_id": p.ScheduleID,
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
func (s *Store) RunsCreateMany(ctx context.Context, ps []RunsCreateParams) ([]RunsCreateManyResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	policies := make([][]byte, len(ps))
	for i := range ps {
		p := &ps[i]
		if p.ScheduleID != nil {
			return nil, invalidf("row %d: fired schedule instances are created by the schedule methods", i)
		}
		pol, err := s.validateCreate(ctx, p)
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

// runsGetSQL is RunsGet's statement.
var runsGetSQL = stmt("RunsGet")

// RunsGet returns a run of the namespace with its input and output.
func (s *Store) RunsGet(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	row := runsGetSQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	var in, out []byte
	var cont *uuid.UUID
	var dkey, ckey, rkey string
	var dstarts int
	run, err := scanRun(row, &in, &out, &cont, &dkey, &dstarts, &ckey, &rkey)
	if err != nil {
		return Run{}, mapErr(fmt.Sprintf("get run %s", id), err)
	}
	run.Input, run.Output, run.ContinuedAs = in, out, cont
	run.DebounceKey, run.DebounceStarts = dkey, dstarts
	run.ConcurrencyKey, run.RateLimitKey = ckey, rkey
	return run, nil
}

// runsGetByExternalIDSQL is RunsGetByExternalID's statement.
var runsGetByExternalIDSQL = stmt("RunsGetByExternalID")

// RunsGetByExternalID returns the newest run of the namespace with that
// external id (the live one if any).
func (s *Store) RunsGetByExternalID(ctx context.Context, namespace, externalID string) (Run, error) {
	row := runsGetByExternalIDSQL.queryRow(ctx, s.db,
		pgx.NamedArgs{"namespace": namespace, "external_id": externalID})
	run, err := scanRun(row)
	if err != nil {
		return Run{}, mapErr(fmt.Sprintf("get run by external id %q", protocol.Echo(externalID)), err)
	}
	return run, nil
}

// Cursor marks a position in a newest-first listing.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// String encodes the cursor as an opaque token.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "/" + c.ID.String()))
}

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(tok string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return Cursor{}, invalidf("cursor %q is not a token this store made", tok)
	}
	ts, id, ok := strings.Cut(string(b), "/")
	if !ok {
		return Cursor{}, invalidf("cursor %q is not a token this store made", tok)
	}
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Cursor{}, invalidf("cursor %q is not a token this store made", tok)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return Cursor{}, invalidf("cursor %q is not a token this store made", tok)
	}
	at := time.UnixMicro(us).UTC()
	if checkTime("cursor time", &at) != nil {
		return Cursor{}, invalidf("cursor %q is not a token this store made", tok)
	}
	return Cursor{CreatedAt: at, ID: u}, nil
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
	// Limit is the page size (0: DefaultPageSize, at most MaxPageSize).
	Limit int
	// After continues a previous page.
	After *Cursor
}

// RunsList lists runs newest first. next is nil on the last page.
func (s *Store) RunsList(ctx context.Context, p RunsListParams) (runs []Run, next *Cursor, err error) {
	return s.RunsSearch(ctx, RunsSearchParams{Namespace: p.Namespace, Statuses: p.Statuses, Type: p.Type, Queue: p.Queue,
		ScheduleID: p.ScheduleID, ParentID: p.ParentID, Limit: p.Limit, After: p.After})
}

func collectRuns(rows pgx.Rows) ([]Run, error) {
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// runsCountSQL is RunsCount's statement.
var runsCountSQL = stmt("RunsCount")

// RunsCount counts the namespace's runs by status (templates included under
// their own statuses).
func (s *Store) RunsCount(ctx context.Context, namespace string) (map[RunStatus]int64, error) {
	rows, err := runsCountSQL.query(ctx, s.db,
		pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("count runs", err)
	}
	defer rows.Close()
	out := map[RunStatus]int64{}
	for rows.Next() {
		var st RunStatus
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, mapErr("count runs", err)
		}
		out[st] = n
	}
	return out, mapErr("count runs", rows.Err())
}

// runsCancelSQL is the statement of RunsCancel.
var runsCancelSQL = stmt("RunsCancel")

// RunsCancel asks a live run to cancel, and with it every live run it
// started as a child, recursively, except children started with the
// ABANDON parent-close policy (and their descendants). Cancellation is a
// request the workflow handles: a running run's holder is told (its
// workflow context is cancelled), a sleeping or waiting run, or one backing
// off before a retry, becomes due at once so its workflow sees the request;
// the workflow may run cleanup and ends CANCELLED if it returns an error
// (see RunsFailAttempt). A run that never started is cancelled at once. A
// repeated request changes nothing. Cancelling a finished run or a
// template is ErrConflict. Returns the run as it is now.
func (s *Store) RunsCancel(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	return s.retryDeadlock(ctx, "cancel run", func() (Run, error) {
		return scanRun(runsCancelSQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": namespace, "run_id": id}))
	}, namespace, id)
}

// TerminatedError is the error recorded on a terminated run (followed by
// ": " and the reason, if one was given).
const TerminatedError = "terminated"

// runsTerminateSQL is the statement of RunsTerminate.
var runsTerminateSQL = stmt("RunsTerminate")

// RunsTerminate ends a live run at once, CANCELLED, with the error
// "terminated" and reason: no cleanup runs, and a running run's lease is
// void at once (its holder is told; its later reports get ErrLeaseLost).
// Its children get their parent-close policies, as when any run ends.
// Terminating a finished run or a template is ErrConflict. Returns the run
// as it is now.
func (s *Store) RunsTerminate(ctx context.Context, namespace string, id uuid.UUID, reason string) (Run, error) {
	msg := TerminatedError
	if reason != "" {
		msg += ": " + reason
	}
	return s.retryDeadlock(ctx, "terminate run", func() (Run, error) {
		return scanRun(runsTerminateSQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": namespace, "run_id": id, "error": clipError(msg)}))
	}, namespace, id)
}

// retryDeadlock runs one statement that changes a run and returns it,
// again when Postgres aborted it to break a deadlock (a run's end locks
// its children after itself, a child's end its parent after itself: the
// two can meet), and maps "no row" to the run's state: ErrNotFound, or
// ErrConflict for a run that is not live.
func (s *Store) retryDeadlock(ctx context.Context, what string, stmt func() (Run, error), namespace string, id uuid.UUID) (Run, error) {
	for tries := 1; ; tries++ {
		run, err := stmt()
		if err == nil {
			return run, nil
		}
		if isDeadlock(err) && tries < 5 {
			continue
		}
		if !isNoRows(err) {
			return Run{}, mapErr(what, err)
		}
		cur, err := s.RunsGet(ctx, namespace, id)
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", what, err)
		}
		return Run{}, fmt.Errorf("%s %s: %w: it is %s", what, id, ErrConflict, cur.Status)
	}
}

// runsRetrySQL is the statement of RunsRetry.
var runsRetrySQL = stmt("RunsRetry")

// RunsRetry gives a FAILED run a fresh start, resuming from its last
// completed step: it becomes PENDING and claimable now, with its attempt
// count reset to 0 (so the run's retry policy grants a full budget again),
// its error and finish time cleared, and a deadline that already passed
// dropped (the reaper would fail it again at once). Completed steps stay
// memoized. Its failed steps get a fresh budget too: their attempts are
// moved to an earlier retry epoch (run_attempt NULL), so the SDK counts a
// step's attempts from the retry on and retries a step whose failure was
// final. The run keeps its trace context: the retry's executions continue
// the run's one trace (a run from before trace contexts gets one now).
// Only a FAILED run can be retried (ErrConflict otherwise); one
// whose external id a live run took meanwhile is ErrConflict too.
func (s *Store) RunsRetry(ctx context.Context, namespace string, id uuid.UUID) (Run, error) {
	tc, err := newTraceParent()
	if err != nil {
		return Run{}, err
	}
	row := runsRetrySQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": namespace, "run_id": id, "trace_context": tc})
	run, err := scanRun(row)
	if err == nil {
		return run, nil
	}
	if !isNoRows(err) {
		return Run{}, mapErr(fmt.Sprintf("retry run %s", id), err)
	}
	cur, err := s.RunsGet(ctx, namespace, id)
	if err != nil {
		return Run{}, fmt.Errorf("retry run: %w", err)
	}
	return Run{}, fmt.Errorf("retry run %s: %w: only a FAILED run can be retried; it is %s", id, ErrConflict, cur.Status)
}

// RunsClaimParams ask for up to Limit due runs of one namespace and queue.
type RunsClaimParams struct {
	Namespace string
	Queue     string
	WorkerID  uuid.UUID
	// Types are what the worker registered, a type possibly at several
	// versions: a run without a version is pinned to the first listed
	// version of its type.
	Types []TypeVersion
	Limit int
	// Lease is how long the claim holds before the reaper may take it back
	// (heartbeats extend it).
	Lease time.Duration
	// InlineBytes is the largest input or step output the claim returns;
	// larger ones come back as their size only (ClaimedRun.InputSize,
	// StepState.OutputSize) and are read with PayloadsRead when needed, so
	// a claim's size does not grow with the sizes of a run's payloads.
	// Zero means protocol.InlinePayloadBytes.
	InlineBytes int
}

// runsClaimSQL is the claim statement when none of the requested types has
// a concurrency limit (the common case); RunsClaim runs it and
// RunsClaimExplain explains it, with the arguments claimArgs builds. The
// NOT EXISTS is uncorrelated: a one-time filter, evaluated once, that makes
// the statement claim nothing when a requested type has a limit (RunsClaim
// then runs runsClaimLimitedSQL); it leaves the plan on the claim index.
// The second makes it claim nothing when a run with a rate key of a
// requested type is due (RunsClaim then runs runsClaimFlowSQL): one probe
// of workflow_runs_claim_rate_due_idx, which holds only rate-keyed runs
// and is empty when no run has a rate key.
//
// Every claim statement (this one, runsClaimLimitedSQL, runsClaimFlowSQL)
// ends with the same update: it claims the runs of CTE c and returns them
// with their inputs and the latest attempt of each of their steps, read in
// one scan of the latest-step index per run (st, ordered by step id);
// tries (the retry budget used) is counted only for a failed latest
// attempt. Payloads larger than @inline_bytes bytes are returned as their
// size only (octet_length reads a stored value's size without reading the
// value). scanClaimed reads its rows.
var runsClaimSQL = stmt("RunsClaim")

// runsClaimLimitedSQL is the claim statement when some requested types
// (@limited_types) have a concurrency limit. The unlimited types are claimed by c1 as
// in runsClaimSQL. Each limited type is claimed by c2, up to the free slots
// kagzi.claim_slots counts for it — locking its limit row until the claim
// commits, so that claims of a limited type serialise and never overshoot
// (see 003_durable.sql) — and marked limited, which puts them in the index
// that count uses. c picks the best @limit of both by priority and age.
var runsClaimLimitedSQL = stmt("RunsClaimLimited")

// limitedTypesSQL lists which of the requested types (@types) have a
// concurrency limit in the namespace and queue, whether one of those has a
// per-key limit, and whether a run with a rate key is due (claimRoute).
var limitedTypesSQL = stmt("RunsClaimRoute")

// claimStatement picks the claim statement RunsClaim would run for args.
func (s *Store) claimStatement(ctx context.Context, db DBTX, args pgx.NamedArgs) (*namedSQL, pgx.NamedArgs, error) {
	var r claimRoute
	if err := limitedTypesSQL.queryRow(ctx, db, limitedTypesArgs(args)).Scan(&r.limited, &r.keyed, &r.rateDue); err != nil {
		return nil, nil, mapErr("claim runs: read limits", err)
	}
	q, qargs := r.statement(args)
	return q, qargs, nil
}

// limitedTypesArgs are the arguments of limitedTypesSQL for a claim with
// args.
func limitedTypesArgs(args pgx.NamedArgs) pgx.NamedArgs {
	return pgx.NamedArgs{"namespace": args["namespace"], "queue": args["queue"], "types": args["types"]}
}

// claimLimitedArgs are the arguments of runsClaimLimitedSQL: those of
// runsClaimSQL and the limited types.
func claimLimitedArgs(args pgx.NamedArgs, limited []string) pgx.NamedArgs {
	out := maps.Clone(args)
	out["limited_types"] = limited
	return out
}

// claimArgs validates p and returns the arguments of runsClaimSQL.
func claimArgs(p RunsClaimParams) (pgx.NamedArgs, error) {
	if p.Limit <= 0 {
		return nil, invalidf("claim limit %d must be positive", p.Limit)
	}
	if len(p.Types) == 0 {
		return nil, invalidf("claim needs at least one workflow type")
	}
	if p.Lease <= 0 {
		return nil, invalidf("lease %v must be positive", p.Lease)
	}
	types := make([]string, len(p.Types))
	pairs := make([]string, len(p.Types))
	versions := make([]string, len(p.Types))
	seen := make(map[string]bool, len(p.Types))
	for i, tv := range p.Types {
		if seen[tv.Type+"@"+tv.Version] {
			return nil, invalidf("workflow type %q at version %q registered twice", tv.Type, tv.Version)
		}
		seen[tv.Type+"@"+tv.Version] = true
		types[i], versions[i], pairs[i] = tv.Type, tv.Version, tv.Type+"@"+tv.Version
	}
	inline := p.InlineBytes
	if inline <= 0 {
		inline = protocol.InlinePayloadBytes
	}
	return pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "types": types, "type_versions": pairs, "versions": versions,
		"limit": p.Limit, "worker_id": p.WorkerID, "lease_ms": p.Lease.Milliseconds(), "inline_bytes": inline}, nil
}

// RunsClaim claims up to Limit due runs in one claim statement: highest
// priority first; within a priority, runs that have begun (resumed after a
// sleep, an event, a child or a retry: started_at set) before runs not yet
// started, so a run due again is not queued behind a backlog of new
// starts (runs with a rate key keep their age order: a run claimed again
// waits behind the runs its key's full windows hold); then oldest
// available_at. It skips rows other claimers hold,
// claims only runs of the registered types, and no more runs of a type with
// a concurrency limit (LimitsSet) than the limit leaves free. Types with
// per-key or rate limits are claimed by kagzi.claim_flow, which ranks runs
// round-robin across keys first (see runsClaimFlowSQL). (The plain
// claim statement goes in one round trip with a read of the requested
// types' limits; only when some have one does a second statement claim
// them: see runsClaimSQL and runsClaimLimitedSQL.) A run of a registered type started
// without a version matches any version and is pinned to the claimer's
// first listed version of its type, so its replays stay on one version. Each claim sets RUNNING, the
// worker, a new lease token and the lease expiry, and returns the run's
// input and the latest attempt of each of its steps.
func (s *Store) RunsClaim(ctx context.Context, p RunsClaimParams) ([]ClaimedRun, error) {
	return s.runsClaim(ctx, p, nil)
}

// runsClaim is RunsClaim, recording in stats (if not nil) what a flow
// claim held back.
func (s *Store) runsClaim(ctx context.Context, p RunsClaimParams, stats *ClaimStats) ([]ClaimedRun, error) {
	args, err := claimArgs(p)
	if err != nil {
		return nil, err
	}
	// One round trip for the common case: the plain claim (which claims
	// nothing if a requested type has a limit) and the read of the limits.
	b := &pgx.Batch{}
	runsClaimSQL.queue(b, args)
	limitedTypesSQL.queue(b, limitedTypesArgs(args))
	br := s.db.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, mapErr("claim runs", err)
	}
	out, err := scanClaimed(rows)
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	var r claimRoute
	if err := br.QueryRow().Scan(&r.limited, &r.keyed, &r.rateDue); err != nil {
		_ = br.Close()
		return nil, mapErr("claim runs: read limits", err)
	}
	if err := br.Close(); err != nil {
		return nil, mapErr("claim runs", err)
	}
	if len(r.limited) == 0 && !r.rateDue {
		return out, nil
	}
	q, qargs := r.statement(args)
	if q == runsClaimFlowSQL {
		return s.runsClaimFlow(ctx, qargs, stats)
	}
	rows, err = q.query(ctx, s.db, qargs)
	if err != nil {
		return nil, mapErr("claim runs", err)
	}
	return scanClaimed(rows)
}

// scanClaimed reads the rows of a claim statement.
func scanClaimed(rows pgx.Rows) ([]ClaimedRun, error) {
	defer rows.Close()
	var out []ClaimedRun
	for rows.Next() {
		var (
			input       []byte
			inputSize   int
			ids         []string
			statuses    []string
			attempts    []int32
			outputs     [][]byte
			outSizes    []int32
			errs        []string
			errTypes    []string
			retryAts    []*time.Time
			runAttempts []int32
			tries       []int64
			nonRetry    []bool
		)
		var due time.Time
		var eventSeq int64
		run, err := scanRun(rows, &due, &input, &inputSize, &ids, &statuses, &attempts, &outputs, &outSizes, &errs, &errTypes,
			&retryAts, &runAttempts, &tries, &nonRetry, &eventSeq)
		if err != nil {
			return nil, mapErr("claim runs", err)
		}
		run.Input = input
		c := ClaimedRun{Run: run, DueAt: due, InputSize: inputSize, EventSeq: eventSeq}
		if len(ids) > 0 {
			c.Steps = make([]StepState, len(ids))
			for i := range ids {
				c.Steps[i] = StepState{StepID: ids[i], Status: StepStatus(statuses[i]), Attempt: int(attempts[i]),
					Output: outputs[i], OutputSize: int(outSizes[i]), Error: errs[i], ErrorType: errTypes[i], RetryAt: retryAts[i],
					RunAttempt: int(runAttempts[i]), Tries: int(tries[i]), NonRetryable: nonRetry[i]}
				if len(c.Steps[i].Output) == 0 {
					c.Steps[i].Output = nil
				}
			}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("claim runs", err)
	}
	return out, nil
}

// RunsClaimExplain runs EXPLAIN (ANALYZE, BUFFERS) of the claim statement
// RunsClaim would run for p, inside a transaction it rolls back (so nothing
// is claimed), and returns the plan as text. Tests and `kagzi bench` use it
// to check the claim stays on its partial index.
func (s *Store) RunsClaimExplain(ctx context.Context, p RunsClaimParams) (string, error) {
	args, err := claimArgs(p)
	if err != nil {
		return "", err
	}
	tx, err := s.beginTx(ctx)
	if err != nil {
		return "", mapErr("explain claim: begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q, args, err := s.claimStatement(ctx, tx, args)
	if err != nil {
		return "", err
	}
	if q == runsClaimFlowSQL {
		// The flow claim claims what its pick, run first, locked.
		if _, err := runsClaimFlowPickSQL.exec(ctx, tx, runsClaimFlowPickSQL.only(args)); err != nil {
			return "", mapErr("explain claim: pick", err)
		}
		args = runsClaimFlowSQL.only(args)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "+q.text, args)
	if err != nil {
		return "", mapErr("explain claim", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", mapErr("explain claim", err)
	}
	return strings.Join(lines, "\n"), nil
}

// runsNextDueSQL is RunsNextDue's statement. It reads the claim index
// (namespace, queue, priority DESC, begun-or-not, available_at) by a loose
// scan: p walks the queue's distinct priorities, highest first, one probe
// each; g takes each priority's two groups (begun runs, runs not begun)
// and the earliest due time of each (the first entry of its range); only
// a group with a run due already takes another probe, for its earliest due
// time in the future. A queue holds few distinct priorities, so this is a
// handful of index probes, with no index of its own ordered by due time
// alone, in which every run made or woken would write an entry.
var runsNextDueSQL = stmt("RunsNextDue")

// RunsNextDue returns, for the namespace and queue, the earliest due time
// in the future of a claimable run (nil when there is none), and whether
// some run is due already. The dispatcher arms its timer with the first,
// right after a claim: runs still due then were left by that claim (another
// type set's, a type at its concurrency limit, a row another transaction
// held), so they are retried on other signals, not at once.
func (s *Store) RunsNextDue(ctx context.Context, namespace, queue string) (next *time.Time, pastDue bool, err error) {
	err = runsNextDueSQL.queryRow(ctx, s.db, pgx.NamedArgs{"namespace": namespace, "queue": queue}).Scan(&next, &pastDue)
	if err != nil {
		return nil, false, mapErr("next due run", err)
	}
	return next, pastDue, nil
}

// QueueDue is a queue with claimable runs and its earliest due time.
type QueueDue struct {
	Namespace string
	Queue     string
	DueAt     time.Time
}

// runsQueuesDueSQL is the statement of RunsQueuesDue.
var runsQueuesDueSQL = stmt("RunsQueuesDue")

// RunsQueuesDue lists every queue with claimable runs and the earliest
// due time of each: the backlog a dispatcher reads on start and reconnect.
func (s *Store) RunsQueuesDue(ctx context.Context) ([]QueueDue, error) {
	rows, err := runsQueuesDueSQL.queryPos(ctx, s.db)
	if err != nil {
		return nil, mapErr("due queues", err)
	}
	defer rows.Close()
	var out []QueueDue
	for rows.Next() {
		var q QueueDue
		if err := rows.Scan(&q.Namespace, &q.Queue, &q.DueAt); err != nil {
			return nil, mapErr("due queues", err)
		}
		out = append(out, q)
	}
	return out, mapErr("due queues", rows.Err())
}

// Lease names the lease a report is made under.
type Lease struct {
	Namespace string
	RunID     uuid.UUID
	Token     int64
}

// leaseWhere ends an update of a run made under a lease: it applies only
// while the lease is current (status RUNNING and the token matches).
const leaseWhere = `
WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'`

// leaseArgs adds the lease's arguments (those of leaseWhere) to args.
func leaseArgs(l Lease, args pgx.NamedArgs) pgx.NamedArgs {
	args["namespace"], args["run_id"], args["token"] = l.Namespace, l.RunID, l.Token
	return args
}

// leaseTransition runs q, an update ending in leaseWhere, with args and
// the lease's arguments. If it matched no run, it succeeds anyway when the
// run already shows the same token and status done (a retried report), else
// it is ErrLeaseLost.
func (s *Store) leaseTransition(ctx context.Context, what string, l Lease, done RunStatus, q *namedSQL, args pgx.NamedArgs) error {
	tag, err := q.exec(ctx, s.db, leaseArgs(l, args))
	if err != nil {
		return mapErr(what, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, what, l, done)
}

// leaseCheckSQL reads the state of a run a report under a lease matched.
var leaseCheckSQL = stmt("RunsLeaseCheck")

// leaseCheckDone decides what a report that matched no running lease means.
func (s *Store) leaseCheckDone(ctx context.Context, what string, l Lease, done RunStatus) error {
	var st RunStatus
	var tok int64
	err := leaseCheckSQL.queryRow(ctx, s.db,
		pgx.NamedArgs{"namespace": l.Namespace, "run_id": l.RunID}).Scan(&st, &tok)
	if err != nil {
		return mapErr(fmt.Sprintf("%s %s", what, l.RunID), err)
	}
	if tok == l.Token && st == done {
		return nil
	}
	return fmt.Errorf("%s %s: %w (run is %s under lease %d, report names lease %d)", what, l.RunID, ErrLeaseLost, st, tok, l.Token)
}

// RunsComplete records a run's successful end and its output (and, for a
// child, wakes its parent: see parentWakeCTEs). It is RunsCompleteMany for
// one run, so a completion means the same whichever way it arrives.
func (s *Store) RunsComplete(ctx context.Context, l Lease, output []byte) error {
	errs, _, err := s.RunsCompleteMany(ctx, []RunsCompleteItem{{Lease: l, Output: output}})
	if err != nil {
		return err
	}
	return errs[0]
}

// runsFailSQL is RunsFail's statement.
var runsFailSQL = stmt("RunsFail")

// RunsFail records a run's final failure (and, for a child, wakes its
// parent).
func (s *Store) RunsFail(ctx context.Context, l Lease, errMsg string) error {
	var n int64
	err := runsFailSQL.queryRow(ctx, s.db, leaseArgs(l, pgx.NamedArgs{"error": clipError(errMsg)})).Scan(&n)
	if err != nil {
		return mapErr("fail run", err)
	}
	if n == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, "fail run", l, StatusFailed)
}

// RunsSleep suspends a run until the given time (nil: until something wakes
// it, e.g. an event or a child finishing). It releases the lease and the
// worker's slot.
func (s *Store) RunsSleep(ctx context.Context, l Lease, until *time.Time) error {
	// A run asked to cancel whose workflow has not been delivered the
	// request yet is due at once: its workflow handles the request.
	return s.leaseTransition(ctx, "sleep run", l, StatusSleeping, runsSleepSQL, pgx.NamedArgs{"until": until})
}

// runsSleepSQL is RunsSleep's statement.
var runsSleepSQL = stmt("RunsSleep")

// RunsRetryAt ends the current attempt with an error and makes the run
// claimable again at the given time as its next attempt.
func (s *Store) RunsRetryAt(ctx context.Context, l Lease, at time.Time, errMsg string) error {
	return s.leaseTransition(ctx, "retry run", l, StatusPending, runsRetryAtSQL, pgx.NamedArgs{"at": at, "error": clipError(errMsg)})
}

// runsRetryAtSQL is RunsRetryAt's statement.
var runsRetryAtSQL = stmt("RunsRetryAt")

// RunsRelease gives a claimed run back, claimable at once, without counting
// an attempt: a delivery nobody received, or a worker draining.
// It is RunsReleaseMany for one run, with the repeated report told from a
// lost lease.
func (s *Store) RunsRelease(ctx context.Context, l Lease) error {
	n, err := s.RunsReleaseMany(ctx, []Lease{l})
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	return s.leaseCheckDone(ctx, "release run", l, StatusPending)
}

// recoverFrom computes, per run r, whether its attempts are exhausted and the
// backoff delay, from its retry policy with the defaults of package retry. It
// mirrors retry.Policy.Delay (jitter included) in SQL so a whole batch moves
// in one statement.
const recoverFrom = `
	CROSS JOIN LATERAL (
		SELECT coalesce((r.retry_policy->>'max_attempts')::int, 5) AS max_attempts,
		       coalesce((r.retry_policy->>'initial_interval_ms')::float8, 1000) AS initial_ms,
		       coalesce((r.retry_policy->>'backoff_coefficient')::float8, 2) AS coef,
		       coalesce((r.retry_policy->>'max_interval_ms')::float8, 60000) AS max_ms,
		       coalesce((r.retry_policy->>'jitter')::float8, 0.2) AS jitter
	) pol
	CROSS JOIN LATERAL (
		SELECT (pol.max_attempts > 0 AND r.attempts >= pol.max_attempts) AS exhausted,
		       -- Past e^600 the max interval is reached long since; power()
		       -- would overflow float8 (an error that fails the whole batch).
		       CASE WHEN greatest(r.attempts - 1, 0) * ln(greatest(pol.coef, 1)) >= 600 THEN pol.max_ms
		            ELSE least(pol.initial_ms * power(pol.coef, greatest(r.attempts - 1, 0)), pol.max_ms) END
		         * (1 + greatest(pol.jitter, 0) * (2 * random() - 1)) AS delay_ms
	) x`

// lostSet takes runs back from a holder that went away (recoverRunsSQL;
// @error is the error message): retried with the policy's backoff while attempts
// remain, failed once exhausted. Only a run its holder is known to have
// received — t.held: a heartbeat of the holder listed it since the claim —
// counts the lost attempt, and may fail as exhausted. A run that never
// reached its holder (the dispatcher died between claim and delivery, or
// the worker died with a request the dispatcher then served) goes back to
// PENDING, claimable at once, its attempts and error unchanged.
const lostSet = `
	locked_by = NULL, lease_expires_at = NULL, held = false,
	error = CASE WHEN t.held THEN @error ELSE r0.error END,
	status = CASE WHEN t.held AND x.exhausted THEN 'FAILED' ELSE 'PENDING' END,
	finished_at = CASE WHEN t.held AND x.exhausted THEN now() END,
	attempts = CASE WHEN t.held AND NOT x.exhausted THEN r0.attempts + 1 ELSE r0.attempts END,
	available_at = CASE WHEN NOT t.held THEN now() WHEN x.exhausted THEN NULL
		ELSE now() + x.delay_ms * interval '1 millisecond' END`

// RecoveredRun is a run taken back from a lost holder.
type RecoveredRun struct {
	Namespace string
	RunID     uuid.UUID
	Queue     string
	Status    RunStatus // PENDING (retried) or FAILED (attempts exhausted)
	// AvailableAt is when the retry is due (nil when failed).
	AvailableAt *time.Time
	// Undelivered is true for a run its holder never confirmed receiving
	// (no heartbeat listed it): it is PENDING again, claimable at once,
	// without counting an attempt.
	Undelivered bool
}

// recoverHead and recoverTail make a statement that takes back the
// running runs a condition between them picks (see lostSet): the runs
// @received lists were received by their holder, whatever their held flag.
const (
	recoverHead = `t AS (
	SELECT run_id, held OR run_id = ANY(@received::uuid[]) AS held FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' AND `
	recoverTail = ` FOR UPDATE SKIP LOCKED
), u AS (
	UPDATE kagzi.workflow_runs r0 SET ` + lostSet + `
	FROM t JOIN kagzi.workflow_runs r ON r.run_id = t.run_id ` + recoverFrom + `
	WHERE r0.run_id = t.run_id
	RETURNING r0.namespace_id, r0.run_id, r0.task_queue, r0.status, r0.available_at, r0.parent_run_id, r0.parent_step_id, r0.error,
		NOT t.held AS undelivered
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status = 'FAILED'
), touched AS (
	SELECT run_id FROM u
), ` + parentWakeCTEs + `
SELECT namespace_id, run_id, task_queue, status, available_at, undelivered FROM u`
)

// leaseHolders is a CTE, h, that walks the lease index (locked_by,
// lease_expires_at over running runs) by a loose scan: one probe per
// worker that holds running runs, each yielding the worker and its
// earliest lease expiry (the first entry of its range). Workers holding
// runs are few next to the runs they hold, and every running run has a
// holder (workflow_runs_running_holder_check), so the walk sees them all.
const leaseHolders = `h AS (
	(SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' ORDER BY locked_by, lease_expires_at LIMIT 1)
	UNION ALL
	SELECT n.locked_by, n.first FROM h CROSS JOIN LATERAL (
		SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
		WHERE status = 'RUNNING' AND locked_by > h.locked_by
		ORDER BY locked_by, lease_expires_at LIMIT 1) n
)`

var (
	runsRecoverWorkerSQL = stmt("RunsRecoverWorker")
	// The expired leases are, for each holder whose earliest lease expired,
	// a range of its entries in the lease index.
	runsExpireLeasesSQL    = stmt("RunsExpireLeases")
	runsNextLeaseExpirySQL = stmt("RunsNextLeaseExpiry")
)

func (s *Store) recoverRuns(ctx context.Context, what string, q *namedSQL, args pgx.NamedArgs) ([]RecoveredRun, error) {
	rows, err := q.query(ctx, s.db, args)
	if err != nil {
		return nil, mapErr(what, err)
	}
	defer rows.Close()
	var out []RecoveredRun
	for rows.Next() {
		var rr RecoveredRun
		if err := rows.Scan(&rr.Namespace, &rr.RunID, &rr.Queue, &rr.Status, &rr.AvailableAt, &rr.Undelivered); err != nil {
			return nil, mapErr(what, err)
		}
		out = append(out, rr)
	}
	return out, mapErr(what, rows.Err())
}

// RunsRecoverWorker takes back every run the worker holds: each it had
// received is retried with backoff if attempts remain, else failed; each it
// never received is claimable again at once, without an attempt counted
// (see lostSet). A run is received when a persisted heartbeat marked it
// held, or when it is among received: the runs the worker's last heartbeat
// listed, which the caller heard (a flush may have skipped marking them).
func (s *Store) RunsRecoverWorker(ctx context.Context, workerID uuid.UUID, received ...uuid.UUID) ([]RecoveredRun, error) {
	if received == nil {
		received = []uuid.UUID{}
	}
	return s.recoverRuns(ctx, "recover worker runs", runsRecoverWorkerSQL,
		pgx.NamedArgs{"error": "worker " + workerID.String() + " lost", "worker_id": workerID, "received": received})
}

// RunsExpireLeases takes back every running run whose lease expired at or
// before now, like RunsRecoverWorker (a run is received when held).
func (s *Store) RunsExpireLeases(ctx context.Context, now time.Time) ([]RecoveredRun, error) {
	return s.recoverRuns(ctx, "expire leases", runsExpireLeasesSQL,
		pgx.NamedArgs{"error": "lease expired", "now": now, "received": []uuid.UUID{}})
}

// RunsNextLeaseExpiry returns the earliest lease expiry of a running run, or
// nil when none runs.
func (s *Store) RunsNextLeaseExpiry(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextLeaseExpirySQL.queryRow(ctx, s.db, pgx.NamedArgs{}).Scan(&t)
	return t, mapErr("next lease expiry", err)
}

// DeadlineError is the error recorded on a run that missed its deadline.
const DeadlineError = "deadline exceeded"

// runsFailPastDeadlineSQL is the statement of RunsFailPastDeadline.
var runsFailPastDeadlineSQL = stmt("RunsFailPastDeadline")

// RunsFailPastDeadline fails every live run whose deadline is at or before
// now, whatever its state, and returns them.
func (s *Store) RunsFailPastDeadline(ctx context.Context, now time.Time) ([]Run, error) {
	rows, err := runsFailPastDeadlineSQL.query(ctx, s.db, pgx.NamedArgs{"now": now, "error": DeadlineError})
	if err != nil {
		return nil, mapErr("fail past deadline", err)
	}
	runs, err := collectRuns(rows)
	return runs, mapErr("fail past deadline", err)
}

// runsNextDeadlineSQL is the statement of RunsNextDeadline.
var runsNextDeadlineSQL = stmt("RunsNextDeadline")

// RunsNextDeadline returns the earliest deadline of a live run, or nil.
func (s *Store) RunsNextDeadline(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := runsNextDeadlineSQL.queryRowPos(ctx, s.db).Scan(&t)
	return t, mapErr("next deadline", err)
}

// RunsExtendLeasesParams: one live worker's heartbeat, as the reaper
// persists it.
type RunsExtendLeasesParams struct {
	WorkerID uuid.UUID
	// RunIDs are the runs the worker says it holds.
	RunIDs []uuid.UUID
	Until  time.Time
}

// runsExtendLeasesSQL is RunsExtendLeases' statement.
var runsExtendLeasesSQL = stmt("RunsExtendLeases")

// RunsExtendLeases persists heartbeats in one statement: the leases of the
// runs each worker lists are extended to its Until, and those runs are
// marked held (received by their worker, so a lost attempt counts: see
// lostSet); a run locked to one of
// these workers that it no longer lists (a delivery lost on the way) is
// released, claimable at once, if its lease was last set more than grace
// before the heartbeat (so a delivery still in flight when the heartbeat was
// sent is left alone). It returns the number extended and released.
func (s *Store) RunsExtendLeases(ctx context.Context, hbs []RunsExtendLeasesParams, grace time.Duration) (extended, released int64, err error) {
	if len(hbs) == 0 {
		return 0, 0, nil
	}
	var workers, runWorkers, runs []uuid.UUID
	var untils []time.Time
	for _, hb := range hbs {
		workers = append(workers, hb.WorkerID)
		untils = append(untils, hb.Until)
		for _, r := range hb.RunIDs {
			runWorkers = append(runWorkers, hb.WorkerID)
			runs = append(runs, r)
		}
	}
	// Rows a report transaction holds are skipped rather than waited for:
	// that transaction is about to move the run on anyway, and waiting
	// would let its row locks and ours, taken in different orders,
	// deadlock. A skipped lease is extended by the next heartbeat's flush,
	// long before it expires.
	err = runsExtendLeasesSQL.queryRow(ctx, s.db, pgx.NamedArgs{"worker_ids": workers, "untils": untils,
		"run_worker_ids": runWorkers, "run_ids": runs, "grace_ms": grace.Milliseconds()}).Scan(&extended, &released)
	if err != nil {
		return 0, 0, mapErr("extend leases", err)
	}
	return extended, released, nil
}
