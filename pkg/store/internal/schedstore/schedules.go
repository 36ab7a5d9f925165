package schedstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Schedules' statements, written in sql/schedules.sql.
var (
	schedulesCreateSQL   = stmt("SchedulesCreate")
	schedulesGetSQL      = stmt("SchedulesGet")
	schedulesListSQL     = stmt("SchedulesList")
	schedulesPauseSQL    = stmt("SchedulesPause")
	schedulesResumeSQL   = stmt("SchedulesResume")
	schedulesDeleteSQL   = stmt("SchedulesDelete")
	schedulesHistorySQL  = stmt("SchedulesHistory")
	schedulesDueSQL      = stmt("SchedulesDue")
	schedulesNextDueSQL  = stmt("SchedulesNextDue")
	schedulesFireSQL     = stmt("SchedulesFire")
	schedulesInstanceSQL = stmt("SchedulesInstance")
)

// scanSchedule reads a row of a schedule's columns (sql/schedules.sql) and
// then extra.
func scanSchedule(row pgx.Row, extra ...any) (Schedule, error) {
	var overlap string
	var jitterMS int64
	var buffered, held *time.Time
	var ckey, rkey string
	run, err := scanRun(row, append([]any{&overlap, &jitterMS, &buffered, &held, &ckey, &rkey}, extra...)...)
	if err != nil {
		return Schedule{}, err
	}
	sc := scheduleFromRun(run)
	sc.ConcurrencyKey, sc.RateLimitKey = ckey, rkey
	sc.Overlap, sc.Jitter, sc.BufferedFireAt = OverlapPolicy(overlap), time.Duration(jitterMS)*time.Millisecond, buffered
	sc.HeldNextAt = held
	return sc, nil
}

func collectSchedules(rows pgx.Rows) ([]Schedule, error) {
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

func scheduleFromRun(r Run) Schedule {
	sc := Schedule{ID: r.ID, Namespace: r.Namespace, Queue: r.Queue, Type: r.Type, Version: r.Version,
		Cron: r.CronExpr, Timezone: r.Timezone, Input: r.Input, MaxCatchup: r.MaxCatchup, Status: r.Status,
		LastFiredAt: r.LastFiredAt, CreatedAt: r.CreatedAt, RetryPolicy: r.RetryPolicy}
	if r.Status == StatusScheduled {
		sc.NextFireAt = r.AvailableAt
	}
	return sc
}

// SchedulesCreateParams describe a schedule.
type SchedulesCreateParams struct {
	// ScheduleID is optional; a UUID v7 is generated when zero. Creating a
	// schedule with an id that exists is ErrConflict, so a caller that
	// derives the id from a name gets idempotent creation.
	ScheduleID uuid.UUID
	Namespace  string
	Queue      string
	Type       string
	Version    string
	Cron       string
	// Timezone is an IANA zone; empty means UTC.
	Timezone string
	Input    []byte
	// MaxCatchup bounds how many missed fire times (older than the
	// scheduler's catch-up window) are fired after downtime (see CatchUp);
	// 0 skips them. At most MaxCatchupLimit.
	MaxCatchup  int
	RetryPolicy *retry.Policy
	// Overlap is what a fire does while an instance is live; "" means
	// OverlapAllowAll.
	Overlap OverlapPolicy
	// Jitter delays each fire's run by a delay in [0, Jitter) derived from
	// the schedule and the fire time (JitterDelay); whole milliseconds, at
	// most MaxJitter. The run's fire time stays the nominal one.
	Jitter time.Duration
	// ConcurrencyKey and RateLimitKey are given to every run the schedule
	// starts, as RunsCreateParams's.
	ConcurrencyKey, RateLimitKey string
	// Attributes are the search attributes every run the schedule fires,
	// backfills or is triggered to start is given, as
	// RunsCreateParams.Attributes.
	Attributes map[string]any
	// Now is when the schedule starts; zero means time.Now().
	Now time.Time
}

// SchedulesCreate stores a schedule, first firing at the cron's first time
// strictly after Now. An invalid expression or zone, or an expression with
// no time after Now, is ErrInvalidArgument and stores nothing.
func (s *Schedules) SchedulesCreate(ctx context.Context, p SchedulesCreateParams) (Schedule, error) {
	for _, f := range []struct {
		field, v string
		required bool
	}{{"namespace", p.Namespace, true}, {"queue", p.Queue, true}, {"workflow type", p.Type, true}, {"version", p.Version, false}} {
		if err := checkName(f.field, f.v, f.required); err != nil {
			return Schedule{}, err
		}
	}
	cron := strings.TrimSpace(p.Cron)
	if err := ParseCron(cron); err != nil {
		return Schedule{}, err
	}
	loc, tz, err := loadZone(p.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	switch {
	case p.MaxCatchup > MaxCatchupLimit:
		return Schedule{}, invalidf("max catch-up %d is above the maximum %d", p.MaxCatchup, MaxCatchupLimit)
	case p.MaxCatchup < 0:
		return Schedule{}, invalidf("max catch-up %d must be between 0 and %d", p.MaxCatchup, MaxCatchupLimit)
	}
	overlap, err := ParseOverlap(string(p.Overlap))
	if err != nil {
		return Schedule{}, err
	}
	switch {
	case p.Jitter > MaxJitter:
		return Schedule{}, invalidf("jitter %s is above the maximum %s", durations.Format(p.Jitter), durations.Format(MaxJitter))
	case p.Jitter < 0 || p.Jitter%time.Millisecond != 0:
		return Schedule{}, invalidf("jitter %s must be whole milliseconds between 0 and %s", durations.Format(p.Jitter),
			durations.Format(MaxJitter))
	}
	var jitterMS *int64
	if p.Jitter > 0 {
		ms := p.Jitter.Milliseconds()
		jitterMS = &ms
	}
	if err := checkFlowKeys(p.ConcurrencyKey, p.RateLimitKey); err != nil {
		return Schedule{}, err
	}
	if err := s.h.CheckPayload(ctx, "input", p.Input); err != nil {
		return Schedule{}, err
	}
	policy, err := encodePolicy(p.RetryPolicy)
	if err != nil {
		return Schedule{}, err
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	first := cronNext(cron, loc, now)
	if first == nil {
		return Schedule{}, invalidf("cron expression %q has no fire time after %s in %s", cron, now.In(loc).Format(time.RFC3339), tz)
	}
	if p.ScheduleID == uuid.Nil {
		if p.ScheduleID, err = uuid.NewV7(); err != nil {
			return Schedule{}, fmt.Errorf("generate schedule id: %w", err)
		}
	}
	attrRows, err := core.CheckAttributes(ctx, s.h.DB, p.Namespace, p.Attributes, nil)
	if err != nil {
		return Schedule{}, err
	}
	var attrs core.AttrArrays
	attrs.Add(nil, attrRows)
	row := schedulesCreateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"run_id": p.ScheduleID, "namespace": p.Namespace, "queue": p.Queue, "type": p.Type,
		"version": p.Version, "available_at": first, "retry_policy": policy, "cron": cron, "timezone": tz,
		"max_catchup": p.MaxCatchup, "input": p.Input, "overlap": core.OverlapColumn(overlap), "jitter_ms": jitterMS,
		"concurrency_key": nullText(p.ConcurrencyKey), "rate_key": nullText(p.RateLimitKey),
		"attr_names": attrs.Names, "attr_texts": attrs.Texts, "attr_ints": attrs.Ints, "attr_floats": attrs.Floats,
		"attr_bools": attrs.Bools, "attr_times": attrs.Times})
	sc, err := scanSchedule(row)
	if err != nil {
		return Schedule{}, mapErr(fmt.Sprintf("create schedule %s", p.ScheduleID), err)
	}
	sc.Input = p.Input
	return sc, nil
}

// SchedulesGet returns a schedule of the namespace with its input. A run id
// that is not a schedule is ErrNotFound.
func (s *Schedules) SchedulesGet(ctx context.Context, namespace string, id uuid.UUID) (Schedule, error) {
	row := schedulesGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	var in []byte
	sc, err := scanSchedule(row, &in)
	if err != nil {
		return Schedule{}, mapErr(fmt.Sprintf("get schedule %s", id), err)
	}
	sc.Input = in
	return sc, nil
}

// SchedulesListParams page a listing of schedules.
type SchedulesListParams struct {
	Namespace string
	// Limit is the page size (0: DefaultPageSize, at most MaxPageSize).
	Limit int
	// After continues a previous page.
	After *Cursor
}

// SchedulesList lists the namespace's schedules, newest first, without
// their inputs. next is nil on the last page.
func (s *Schedules) SchedulesList(ctx context.Context, p SchedulesListParams) (schedules []Schedule, next *Cursor, err error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return nil, nil, err
	}
	if p.Limit, err = pageLimit(p.Limit); err != nil {
		return nil, nil, err
	}
	var afterTS *time.Time
	var afterID *uuid.UUID
	if p.After != nil {
		afterTS, afterID = &p.After.CreatedAt, &p.After.ID
	}
	rows, err := schedulesListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "after_created_at": afterTS, "after_run_id": afterID, "limit": p.Limit + 1})
	if err != nil {
		return nil, nil, mapErr("list schedules", err)
	}
	schedules, err = collectSchedules(rows)
	if err != nil {
		return nil, nil, mapErr("list schedules", err)
	}
	if len(schedules) > p.Limit {
		schedules = schedules[:p.Limit]
		last := schedules[len(schedules)-1]
		next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if schedules == nil {
		schedules = []Schedule{}
	}
	return schedules, next, nil
}

// SchedulesPause pauses a schedule: it fires nothing until resumed, and a
// fire an OverlapBufferOne schedule held is dropped (resuming skips what
// was missed). Pausing a paused schedule is a no-op.
func (s *Schedules) SchedulesPause(ctx context.Context, namespace string, id uuid.UUID) (Schedule, error) {
	row := schedulesPauseSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	sc, err := scanSchedule(row)
	if err == nil {
		return sc, nil
	}
	if !isNoRows(err) {
		return Schedule{}, mapErr(fmt.Sprintf("pause schedule %s", id), err)
	}
	sc, err = s.SchedulesGet(ctx, namespace, id)
	if err != nil {
		return Schedule{}, fmt.Errorf("pause schedule: %w", err)
	}
	sc.Input = nil
	return sc, nil
}

// SchedulesResume resumes a paused schedule at its first fire time strictly
// after now: the times missed while paused are skipped, not caught up.
// Resuming a running schedule is a no-op. A schedule whose cron has no
// time after now is ErrConflict (it stays paused).
func (s *Schedules) SchedulesResume(ctx context.Context, namespace string, id uuid.UUID, now time.Time) (Schedule, error) {
	if now.IsZero() {
		now = time.Now()
	}
	// The cron and zone never change, so reading them outside the update's
	// lock is safe; the update re-checks the status.
	sc, err := s.SchedulesGet(ctx, namespace, id)
	if err != nil {
		return Schedule{}, fmt.Errorf("resume schedule: %w", err)
	}
	sc.Input = nil
	if sc.Status == StatusScheduled {
		return sc, nil
	}
	next, err := NextFireTime(sc.Cron, sc.Timezone, now)
	if err != nil {
		return Schedule{}, fmt.Errorf("resume schedule %s: %w", id, err)
	}
	if next == nil {
		return Schedule{}, fmt.Errorf("resume schedule %s: %w: cron expression %q has no fire time after %s",
			id, ErrConflict, sc.Cron, now.UTC().Format(time.RFC3339))
	}
	row := schedulesResumeSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id, "available_at": next})
	resumed, err := scanSchedule(row)
	if err == nil {
		return resumed, nil
	}
	if !isNoRows(err) {
		return Schedule{}, mapErr(fmt.Sprintf("resume schedule %s", id), err)
	}
	// Resumed (or deleted) concurrently.
	sc, err = s.SchedulesGet(ctx, namespace, id)
	if err != nil {
		return Schedule{}, fmt.Errorf("resume schedule: %w", err)
	}
	sc.Input = nil
	return sc, nil
}

// SchedulesDelete deletes a schedule and its input. The runs it fired
// stay, with no schedule id (the foreign key sets it NULL).
func (s *Schedules) SchedulesDelete(ctx context.Context, namespace string, id uuid.UUID) error {
	tag, err := schedulesDeleteSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	if err != nil {
		return mapErr(fmt.Sprintf("delete schedule %s", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", id, ErrNotFound)
	}
	return nil
}

// SchedulesHistory returns the runs a schedule fired, newest fire time
// first, at most limit (0: DefaultPageSize, at most MaxPageSize). An
// unknown schedule is ErrNotFound.
func (s *Schedules) SchedulesHistory(ctx context.Context, namespace string, id uuid.UUID, limit int) ([]Run, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := schedulesHistorySQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "schedule_id": id, "limit": limit})
	if err != nil {
		return nil, mapErr("schedule history", err)
	}
	runs, err := collectRuns(rows)
	if err != nil {
		return nil, mapErr("schedule history", err)
	}
	if len(runs) == 0 {
		if _, err := s.SchedulesGet(ctx, namespace, id); err != nil {
			return nil, fmt.Errorf("schedule history: %w", err)
		}
		return []Run{}, nil
	}
	return runs, nil
}

// SchedulesDue returns up to limit running schedules (of every namespace)
// whose next fire time is at or before now, earliest first, without their
// inputs: the scheduler's work list.
func (s *Schedules) SchedulesDue(ctx context.Context, now time.Time, limit int) ([]Schedule, error) {
	if limit <= 0 {
		return nil, invalidf("limit %d must be positive", limit)
	}
	rows, err := schedulesDueSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"now": now, "limit": limit})
	if err != nil {
		return nil, mapErr("due schedules", err)
	}
	out, err := collectSchedules(rows)
	if err != nil {
		return nil, mapErr("due schedules", err)
	}
	return out, nil
}

// SchedulesNextDue returns the earliest next fire time of any running
// schedule (past or future), or nil when none runs. The scheduler arms its
// timer with it.
func (s *Schedules) SchedulesNextDue(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := schedulesNextDueSQL.QueryRowPos(ctx, s.h.DB).Scan(&t)
	return t, mapErr("next due schedule", err)
}

// SchedulesFireParams name one fire of a schedule.
type SchedulesFireParams struct {
	Namespace  string
	ScheduleID uuid.UUID
	// FireAt is the fire time fired: the instance's schedule_fire_at.
	FireAt time.Time
	// Due is the schedule's next fire time as the caller read it; the fire
	// applies only if it is still that. Zero means FireAt. It differs from
	// FireAt when a catch-up skips times (see CatchUp).
	Due time.Time
	// Next is the schedule's next fire time after this one, after FireAt;
	// nil means the cron has no later time, and the schedule is then paused
	// after this fire (it stays listed with its history, never comes due,
	// and cannot be resumed).
	Next         *time.Time
	TraceContext string
}

// SchedulesFire fires a schedule once: it advances the schedule from Due
// to Next, only if its next fire time is still Due and it is not paused,
// and if so creates the instance run for FireAt (due now, with the
// schedule's queue, type, version, input and retry policy), all in one
// statement. Firing the same time twice, one after the other or at once
// from several connections, creates one instance: every other call gets
// fired=false, no error, and the instance if it exists. The run is
// returned without its input. An unknown schedule is ErrNotFound.
func (s *Schedules) SchedulesFire(ctx context.Context, p SchedulesFireParams) (run Run, fired bool, err error) {
	if p.Due.IsZero() {
		p.Due = p.FireAt
	}
	if p.FireAt.IsZero() {
		return Run{}, false, invalidf("fire time is required")
	}
	if p.FireAt.Before(p.Due) {
		return Run{}, false, invalidf("fire time %s is before the due time %s", p.FireAt.Format(time.RFC3339Nano), p.Due.Format(time.RFC3339Nano))
	}
	out, err := s.schedulesFire(ctx, []scheduleFiring{{namespace: p.Namespace, id: p.ScheduleID, due: p.Due,
		fires: []time.Time{p.FireAt}, next: p.Next}}, p.TraceContext)
	if err != nil {
		return Run{}, false, fmt.Errorf("fire schedule %s: %w", p.ScheduleID, err)
	}
	if len(out[0].runs) == 1 {
		return out[0].runs[0], true, nil
	}
	// Not advanced (fired already, paused, deleted or unknown), or advanced
	// onto a fire time a trigger had already taken.
	run, err = s.scheduleInstance(ctx, p.Namespace, p.ScheduleID, p.FireAt)
	if err != nil {
		return Run{}, false, fmt.Errorf("fire schedule: %w", err)
	}
	return run, false, nil
}

// SchedulesFireDue is SchedulesFireDueMany for one schedule: it returns
// the runs it created, and advanced=false when the schedule was not due or
// another scheduler (or a pause, resume or delete) changed it first. A
// schedule it cannot work out is an error.
func (s *Schedules) SchedulesFireDue(
	ctx context.Context,
	sc Schedule,
	now time.Time,
	window time.Duration,
	traceContext string,
) (runs []Run, advanced bool, err error) {
	res, err := s.SchedulesFireDueMany(ctx, []Schedule{sc}, now, window, traceContext)
	if err != nil {
		return nil, false, err
	}
	if res[0].Err != nil {
		return nil, false, res[0].Err
	}
	return res[0].Runs, res[0].Advanced, nil
}

// SchedulesFireDueManyResult is what SchedulesFireDueMany did to one
// schedule.
type SchedulesFireDueManyResult struct {
	ScheduleID uuid.UUID
	// Advanced is true when this call moved the schedule past now, firing
	// its due times or skipping missed ones. It is false when the schedule
	// was not due, or another scheduler (or a pause, resume or delete)
	// changed it first: losing that race is not an error.
	Advanced bool
	// Runs are the instances this call created, oldest fire time first,
	// without their inputs. An advanced schedule may have none: every due
	// time was missed and skipped, or already had an instance (a trigger
	// for the same instant).
	Runs []Run
	// Err is why the schedule was left untouched: its cron, zone or
	// catch-up could not be worked out, or (a schedule with an overlap
	// policy, fired in a transaction of its own) its transaction failed.
	// The other schedules fire anyway.
	Err error
	// Dropped are the due times its overlap policy started nothing for
	// (an instance was live, or a later fire superseded them).
	Dropped []time.Time
	// Buffered is the fire time an OverlapBufferOne schedule holds after
	// the fire, if any.
	Buffered *time.Time
	// Stopped are the live instances cancelled or terminated by
	// OverlapCancelOther or OverlapTerminateOther.
	Stopped []uuid.UUID
}

// SchedulesFireDueMany does a scheduler's whole work for the due schedules
// it read with SchedulesDue: for each, it fires the times CatchUp picks
// (with the catch-up window; 0 means DefaultCatchUpWindow) and advances the schedule past
// now. It is one statement however many schedules there are, so they
// all fire in one transaction and one commit. Each schedule advances only
// if its next fire time is still the one read, so schedulers firing the
// same schedules at once fire each time once between them, and neither
// fails. Each instance gets a trace context of its own (traceContext only
// when the call fires a single instance), so each is a trace of its own.
// Results are in the order of scs; listing a schedule twice is
// ErrInvalidArgument.
func (s *Schedules) SchedulesFireDueMany(
	ctx context.Context,
	scs []Schedule,
	now time.Time,
	window time.Duration,
	traceContext string,
) ([]SchedulesFireDueManyResult, error) {
	out := make([]SchedulesFireDueManyResult, len(scs))
	firings := make([]scheduleFiring, 0, len(scs))
	at := make([]int, 0, len(scs))
	for i, sc := range scs {
		out[i].ScheduleID = sc.ID
		if sc.NextFireAt == nil || sc.Status != StatusScheduled {
			continue
		}
		from := *sc.NextFireAt
		if sc.HeldNextAt != nil && sc.HeldNextAt.After(from) {
			// Due early to start a held fire: the times before the held
			// next fire time were planned already.
			from = *sc.HeldNextAt
		}
		fires, next, err := CatchUp(sc.Cron, sc.Timezone, from, now, sc.MaxCatchup, window)
		if err != nil {
			out[i].Err = fmt.Errorf("fire schedule %s: %w", sc.ID, err)
			continue
		}
		if len(fires) == 0 && next != nil && next.Equal(*sc.NextFireAt) {
			continue
		}
		if sc.Overlap != "" && sc.Overlap != OverlapAllowAll {
			// Its live instances decide: a transaction of its own.
			r, err := s.schedulesFireOverlap(ctx, sc, *sc.NextFireAt, fires, next)
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i] = r
			continue
		}
		firings = append(firings, scheduleFiring{namespace: sc.Namespace, id: sc.ID, due: *sc.NextFireAt, fires: fires, next: next, jitter: sc.Jitter})
		at = append(at, i)
	}
	if len(firings) == 0 {
		return out, nil
	}
	fired, err := s.schedulesFire(ctx, firings, traceContext)
	if err != nil {
		return nil, err
	}
	for k, f := range fired {
		out[at[k]].Advanced, out[at[k]].Runs = f.advanced, f.runs
	}
	return out, nil
}

// scheduleFiring is one schedule's part of schedulesFire: advance it from
// due to next (nil: it has no later time and is paused), creating an
// instance per fire time.
type scheduleFiring struct {
	namespace string
	id        uuid.UUID
	due       time.Time
	fires     []time.Time
	next      *time.Time
	// jitter delays each instance (JitterDelay).
	jitter time.Duration
}

type scheduleFired struct {
	advanced bool
	runs     []Run
}

// schedulesFire is the conditional advance of many schedules and the
// creation of their instances, in one statement. The advance is the guard:
// of the callers that read the same due time, exactly one passes it (READ
// COMMITTED re-checks it on the row a concurrent winner committed), and
// only the schedules it advanced get instances; the unique (schedule_id,
// schedule_fire_at) index backs it up. Results are in the order of fs.
func (s *Schedules) schedulesFire(ctx context.Context, fs []scheduleFiring, trace string) ([]scheduleFired, error) {
	n := len(fs)
	var (
		index                = make(map[uuid.UUID]int, n)
		nss                  = make([]string, n)
		ids                  = make([]uuid.UUID, n)
		dues                 = make([]time.Time, n)
		nexts, lastFires     = make([]*time.Time, n), make([]*time.Time, n)
		runIDs, runSchedules = []uuid.UUID{}, []uuid.UUID{}
		fireAts              = []time.Time{}
		availableAts         = []*time.Time{}
		traces               = []string{}
	)
	for i, f := range fs {
		if _, dup := index[f.id]; dup {
			return nil, invalidf("schedule %s is listed twice", f.id)
		}
		index[f.id] = i
		nss[i], ids[i], dues[i], nexts[i] = f.namespace, f.id, f.due, f.next
		if k := len(f.fires); k > 0 {
			last := f.fires[k-1]
			lastFires[i] = &last
			if f.next != nil && !f.next.After(last) {
				return nil, invalidf("schedule %s: next fire time %s is not after fire time %s", f.id,
					f.next.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
			}
		}
		for _, at := range f.fires {
			id, err := newRunID()
			if err != nil {
				return nil, err
			}
			// Each instance is a trace of its own: the caller's context
			// only when it fires one instance (a trigger), else a fresh one.
			tc := trace
			if tc == "" || len(fs) > 1 || len(f.fires) > 1 {
				if tc, err = newTraceParent(); err != nil {
					return nil, err
				}
			}
			runIDs, runSchedules, fireAts = append(runIDs, id), append(runSchedules, f.id), append(fireAts, at)
			availableAts = append(availableAts, jitteredAt(f.id, at, f.jitter))
			traces = append(traces, tc)
		}
	}
	// l locks the schedules in id order, so two schedulers advancing
	// overlapping sets wait for each other instead of deadlocking; a row a
	// winner committed meanwhile is re-read and, no longer due, dropped.
	// The instances copy the template as the update left it, its input
	// included (checked against the limits when the schedule was created).
	rows, err := schedulesFireSQL.Query(ctx, s.h.DB,
		pgx.NamedArgs{"namespaces": nss, "schedule_ids": ids, "dues": dues, "nexts": nexts, "last_fires": lastFires,
			"run_ids": runIDs, "run_schedule_ids": runSchedules, "fire_ats": fireAts, "available_ats": availableAts,
			"trace_contexts": traces})
	if err != nil {
		return nil, mapErr("fire schedules", err)
	}
	defer rows.Close()
	out := make([]scheduleFired, n)
	for rows.Next() {
		var instance bool
		run, err := scanRun(rows, &instance)
		if err != nil {
			return nil, mapErr("fire schedules", err)
		}
		if !instance {
			out[index[run.ID]].advanced = true
			continue
		}
		k := index[*run.ScheduleID]
		out[k].runs = append(out[k].runs, run)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("fire schedules", err)
	}
	for k := range out {
		slices.SortFunc(out[k].runs, func(a, b Run) int { return a.ScheduleFireAt.Compare(*b.ScheduleFireAt) })
	}
	return out, nil
}

// scheduleInstance returns the run a schedule fired for a fire time, or a
// zero Run when there is none; an unknown schedule is ErrNotFound.
func (s *Schedules) scheduleInstance(ctx context.Context, namespace string, id uuid.UUID, fireAt time.Time) (Run, error) {
	var found bool
	var run Run
	rows, err := schedulesInstanceSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "schedule_id": id, "fire_at": fireAt})
	if err != nil {
		return Run{}, mapErr("find fired run", err)
	}
	runs, err := collectRuns(rows)
	if err != nil {
		return Run{}, mapErr("find fired run", err)
	}
	if len(runs) > 0 {
		run, found = runs[0], true
	}
	if !found {
		if _, err := s.SchedulesGet(ctx, namespace, id); err != nil {
			return Run{}, err
		}
	}
	return run, nil
}

// SchedulesTrigger fires a schedule now, outside its cron, paused or not:
// an instance with schedule_fire_at = now, due at once. The schedule's next
// fire time does not move. Triggering twice for the same instant returns
// the same run. A cron fire for exactly the same instant would be that
// run too, and create nothing.
func (s *Schedules) SchedulesTrigger(ctx context.Context, namespace string, id uuid.UUID, now time.Time) (Run, error) {
	if now.IsZero() {
		now = time.Now()
	}
	// Postgres keeps microseconds; the fire time must compare equal to
	// what is stored.
	now = now.Truncate(time.Microsecond)
	sc, err := s.SchedulesGet(ctx, namespace, id)
	if err != nil {
		return Run{}, fmt.Errorf("trigger schedule: %w", err)
	}
	attrs, err := core.RunAttributes(ctx, s.h.DB, namespace, id)
	if err != nil {
		return Run{}, fmt.Errorf("trigger schedule: %w", err)
	}
	run, _, err := s.RunsCreate(ctx, RunsCreateParams{
		Namespace: sc.Namespace, Queue: sc.Queue, Type: sc.Type, Version: sc.Version,
		Input: sc.Input, RetryPolicy: sc.RetryPolicy, ScheduleID: &sc.ID, ScheduleFireAt: &now, Attributes: attrs,
	})
	if errors.Is(err, ErrNotFound) {
		// Deleted between the read and the insert (the foreign key).
		return Run{}, fmt.Errorf("trigger schedule %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("trigger schedule %s: %w", id, err)
	}
	return run, nil
}
