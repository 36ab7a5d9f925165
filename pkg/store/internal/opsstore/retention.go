package opsstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Retention: finished runs are deleted, with every row that belongs to
// them, once they are older than their retention period (migration
// 009_retention.sql). The reaper's leader deletes them in bounded batches
// (RunsDeleteExpired), armed by a timer at the next expiry
// (RunsNextExpiry); operators set the periods (RetentionSet).

// The default retention periods, which migration 009_retention.sql writes
// as the policy of every namespace without one of its own.
const (
	// DefaultKeepCompleted keeps COMPLETED and CANCELLED runs for a week:
	// the history an operator looks back at when something went wrong
	// (last Monday's batch, the previous run of a weekly job).
	DefaultKeepCompleted = 7 * 24 * time.Hour
	// DefaultKeepFailed keeps FAILED runs, the dead letters, for 30 days:
	// someone must look at each and may retry it, which can wait for a
	// holiday or a month-end.
	DefaultKeepFailed = 30 * 24 * time.Hour
)

// Bounds of RunsDeleteExpiredParams.Limit.
const (
	// DefaultDeleteBatch runs a batch: with their steps, payloads and
	// events some thousands of rows, a transaction of about a tenth of a
	// second.
	DefaultDeleteBatch = 1000
	// MaxDeleteBatch bounds what one transaction locks, writes to the WAL
	// and holds back from vacuum.
	MaxDeleteBatch = 10000
)

// RetentionPolicy is one row of kagzi.retention: how long the finished
// runs of a namespace, or of one workflow type in it, are kept.
type RetentionPolicy struct {
	// Namespace is "" for the default policy of every namespace without
	// one of its own.
	Namespace string
	// Type is "" for the namespace's policy, which applies to its types
	// without one of their own.
	Type string
	// KeepCompleted: COMPLETED and CANCELLED runs are deleted this long
	// after they finished. KeepFailed: the same for FAILED runs. Zero
	// keeps them for ever; nil inherits from the next policy out (a
	// type's from its namespace's, a namespace's from the default). The
	// default policy sets both.
	KeepCompleted, KeepFailed *time.Duration
	UpdatedAt                 time.Time
}

// Retention is the periods that apply to the finished runs of one
// namespace or workflow type, inheritance resolved (zero: kept for ever).
type Retention struct {
	KeepCompleted, KeepFailed time.Duration
}

// RetentionFor resolves the periods of workflow type typ in namespace
// (typ "": of the namespace's types without a policy of their own) from
// policies, as RetentionList returns them; RunsDeleteExpired resolves
// them the same way in SQL.
func RetentionFor(policies []RetentionPolicy, namespace, typ string) Retention {
	var out Retention
	var haveC, haveF bool
	// Innermost first: the type's, the namespace's, the default.
	scopes := [][2]string{{namespace, ""}, {"", ""}}
	if typ != "" {
		scopes = append([][2]string{{namespace, typ}}, scopes...)
	}
	for _, k := range scopes {
		for _, p := range policies {
			if p.Namespace != k[0] || p.Type != k[1] {
				continue
			}
			if !haveC && p.KeepCompleted != nil {
				out.KeepCompleted, haveC = *p.KeepCompleted, true
			}
			if !haveF && p.KeepFailed != nil {
				out.KeepFailed, haveF = *p.KeepFailed, true
			}
		}
	}
	return out
}

// checkKeep checks one period of a policy (nil: not given).
func checkKeep(what string, d *time.Duration) error {
	if d == nil || *d == 0 {
		return nil
	}
	switch {
	case *d > MaxKeep:
		return invalidf("%s retention %s is above the maximum %s (0 keeps for ever)", what, durations.Format(*d), durations.Format(MaxKeep))
	case *d < MinKeep:
		return invalidf("%s retention %s: 0 (keep for ever) or %s to %s", what, durations.Format(*d), durations.Format(MinKeep),
			durations.Format(MaxKeep))
	}
	return nil
}

// RetentionSetParams change one retention policy.
type RetentionSetParams struct {
	// Namespace "" sets the default policy (Type must then be "").
	Namespace string
	// Type "" sets the namespace's policy.
	Type string
	// KeepCompleted and KeepFailed are the new periods (0: keep for
	// ever); nil keeps the policy's current value, or inherits for a new
	// policy. One of them at least must be given.
	KeepCompleted, KeepFailed *time.Duration
}

// RetentionSet creates or changes a retention policy and returns it. The
// reaper's leader applies it at its next look at what expires, within an
// hour (see RunsNextExpiry).
func (s *Ops) RetentionSet(ctx context.Context, p RetentionSetParams) (RetentionPolicy, error) {
	if err := checkName("namespace", p.Namespace, false); err != nil {
		return RetentionPolicy{}, err
	}
	if err := checkName("workflow type", p.Type, false); err != nil {
		return RetentionPolicy{}, err
	}
	if p.Namespace == "" && p.Type != "" {
		return RetentionPolicy{}, invalidf("a workflow type's retention belongs to a namespace")
	}
	if p.KeepCompleted == nil && p.KeepFailed == nil {
		return RetentionPolicy{}, invalidf("retention: give the period of completed runs, of failed runs, or both")
	}
	if err := checkKeep("completed runs'", p.KeepCompleted); err != nil {
		return RetentionPolicy{}, err
	}
	if err := checkKeep("failed runs'", p.KeepFailed); err != nil {
		return RetentionPolicy{}, err
	}
	// The row proposed for insertion takes the stored periods not given,
	// since constraints are checked on it before the conflict is; the
	// update takes them from the row as it is then.
	row := retentionSetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "type": p.Type,
		"keep_completed": p.KeepCompleted, "keep_failed": p.KeepFailed})
	pol, err := scanRetention(row)
	return pol, mapErr("set retention", err)
}

// RetentionDelete removes the policy of a namespace (typ "") or of one
// workflow type in it, which then inherit again; an absent one is
// ErrNotFound. The default policy cannot be removed (ErrInvalidArgument):
// change it instead.
func (s *Ops) RetentionDelete(ctx context.Context, namespace, typ string) error {
	if namespace == "" {
		return invalidf("the default retention cannot be removed; set it instead")
	}
	tag, err := retentionDeleteSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "type": typ})
	if err != nil {
		return mapErr("remove retention", err)
	}
	if tag.RowsAffected() == 0 {
		what := "namespace " + namespace
		if typ != "" {
			what = "workflow type " + typ
		}
		return fmt.Errorf("remove retention of %s: %w: it has none of its own", what, ErrNotFound)
	}
	return nil
}

// RetentionList returns the policies that bear on namespace: the default
// first, then the namespace's own (if any), then its types' by name.
// RetentionFor resolves them.
func (s *Ops) RetentionList(ctx context.Context, namespace string) ([]RetentionPolicy, error) {
	rows, err := retentionListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list retention", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RetentionPolicy, error) { return scanRetention(r) })
	return out, mapErr("list retention", err)
}

// scanRetention reads a row of a policy's columns (sql/retention.sql).
func scanRetention(row pgx.Row) (RetentionPolicy, error) {
	var p RetentionPolicy
	err := row.Scan(&p.Namespace, &p.Type, &p.KeepCompleted, &p.KeepFailed, &p.UpdatedAt)
	return p, err
}

// Retention's statements, written in sql/retention.sql.
var (
	retentionSetSQL           = stmt("RetentionSet")
	retentionDeleteSQL        = stmt("RetentionDelete")
	retentionListSQL          = stmt("RetentionList")
	retentionNextExpirySQL    = stmt("RetentionNextExpiry")
	retentionDeleteExpiredSQL = stmt("RetentionDeleteExpired")
	retentionOrphansSQL       = stmt("RetentionOrphans")
)

// RunsExpiry is what RunsNextExpiry found.
type RunsExpiry struct {
	// Next is when the next finished run that may be deleted outlives its
	// period (nil: none, with the policies as they are). It may be past:
	// runs are due now.
	Next *time.Time
	// OldestFinished is when the oldest finished run still stored
	// finished (nil: there is none), whatever its period.
	OldestFinished *time.Time
	// ShortestKeep is the shortest period of any policy (0: every policy
	// keeps runs for ever). A run that finishes from now on is due no
	// sooner than that from now.
	ShortestKeep time.Duration
}

// RunsNextExpiry reads when the next finished run outlives its retention
// period: a loose scan of the finished runs per (namespace, type, status)
// on workflow_runs_finished_idx, which costs the same with millions of
// finished runs. A child whose parent has not finished is not
// due (RunsDeleteExpired spares it); the first one after it is looked at
// instead.
func (s *Ops) RunsNextExpiry(ctx context.Context) (RunsExpiry, error) {
	var out RunsExpiry
	var shortest *time.Duration
	err := retentionNextExpirySQL.QueryRowPos(ctx, s.h.DB).Scan(&out.OldestFinished, &out.Next, &shortest)
	if err != nil {
		return RunsExpiry{}, mapErr("next expiry", err)
	}
	if shortest != nil {
		out.ShortestKeep = *shortest
	}
	return out, nil
}

// RunsDeleteExpiredParams bound one batch of RunsDeleteExpired.
type RunsDeleteExpiredParams struct {
	// Now is the time periods are measured back from (the reaper's clock).
	Now time.Time
	// Limit is the most runs deleted (default DefaultDeleteBatch, at most
	// MaxDeleteBatch).
	Limit int
}

// RunsDeleteExpired deletes up to p.Limit finished runs older than their
// retention period, each with every row that belongs to it (its steps,
// payloads and events), in one statement: a run goes whole or not at all,
// and a batch commits whole or not at all (with the caller's transaction,
// when the Store is bound to one). It returns how many runs it deleted; fewer than the limit means it found
// no more that it could take.
//
// It never deletes a run that has not finished, a schedule template, or a
// child whose parent has not finished (it goes once the parent has). A run
// another transaction holds (a retry of a dead letter, a parent's child
// ending) is skipped, and its parent, for a child, is locked until the
// batch commits, so neither can come back to life under the deletion.
// Groups are taken in index order, each one's oldest runs first.
func (s *Ops) RunsDeleteExpired(ctx context.Context, p RunsDeleteExpiredParams) (int64, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultDeleteBatch
	}
	if p.Limit > MaxDeleteBatch {
		return 0, invalidf("delete batch %d: at most %d", p.Limit, MaxDeleteBatch)
	}
	if err := checkTime("retention time", &p.Now); err != nil {
		return 0, err
	}
	var n int64
	var st *string
	// One statement, so one transaction even on a pool: its
	// data-modifying CTEs commit together or not at all.
	err := retentionDeleteExpiredSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"now": p.Now, "limit": p.Limit, "run_id": nil,
		"namespace": ""}).Scan(&n, &st)
	if err != nil {
		return 0, mapErr("delete expired runs", err)
	}
	return n, nil
}

// RunsDelete deletes one finished run of the namespace with every row that
// belongs to it, as retention deletes a run (RunsDeleteExpired's
// statement, by id): a batch's delete. A run that is not finished, or a
// child whose parent has not finished, or a run another transaction holds
// (a retry under way) is ErrConflict; no such run (a schedule template is
// none) is ErrNotFound.
func (s *Ops) RunsDelete(ctx context.Context, namespace string, id uuid.UUID) error {
	var n int64
	var st *string
	err := retentionDeleteExpiredSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"now": time.Now(), "limit": 1, "run_id": id,
		"namespace": namespace}).Scan(&n, &st)
	switch {
	case err != nil:
		return mapErr(fmt.Sprintf("delete run %s", id), err)
	case n == 1:
		return nil
	case st == nil:
		return fmt.Errorf("delete run %s: %w", id, ErrNotFound)
	case !slices.Contains(finishedStatuses, *st):
		return fmt.Errorf("delete run %s: %w: it is %s; only a finished run is deleted", id, ErrConflict, *st)
	}
	return fmt.Errorf("delete run %s: %w: its parent has not finished, or another transaction holds it", id, ErrConflict)
}

// finishedStatuses are the statuses of a finished run, which retention and
// a batch's delete take.
var finishedStatuses = []string{string(core.StatusCompleted), string(core.StatusFailed), string(core.StatusCancelled)}

// Orphans counts the rows of the tables that belong to runs (step_runs,
// workflow_events) whose run does not exist. A run goes
// whole or not at all, so every count is zero; operators' checks and the
// tests read it after a cleanup was killed. It reads every such row.
type Orphans struct {
	Steps, Events int64
}

// RunsOrphans counts the rows whose run is gone (see Orphans).
func (s *Ops) RunsOrphans(ctx context.Context) (Orphans, error) {
	var o Orphans
	err := retentionOrphansSQL.QueryRowPos(ctx, s.h.DB).Scan(&o.Steps, &o.Events)
	return o, mapErr("count orphans", err)
}
