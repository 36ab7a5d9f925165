package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
