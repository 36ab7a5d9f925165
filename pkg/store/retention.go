package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
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

// Bounds of a retention period (0, keep for ever, aside).
const (
	// MinKeep is the shortest period: a client that waits for a run's
	// result reads the run after its end, so a run must outlive that read.
	MinKeep = time.Minute
	// MaxKeep is the longest period short of keeping for ever.
	MaxKeep = 100 * 365 * 24 * time.Hour
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
func (s *Store) RetentionSet(ctx context.Context, p RetentionSetParams) (RetentionPolicy, error) {
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
	row := s.db.QueryRow(ctx, `
INSERT INTO kagzi.retention AS k (namespace_id, workflow_type, keep_completed, keep_failed)
SELECT @namespace, @type, coalesce(@keep_completed::interval, o.keep_completed), coalesce(@keep_failed::interval, o.keep_failed)
FROM (VALUES (1)) AS v(x)
LEFT JOIN kagzi.retention o ON o.namespace_id = @namespace AND o.workflow_type = @type
ON CONFLICT (namespace_id, workflow_type) DO UPDATE SET
	keep_completed = coalesce(@keep_completed::interval, k.keep_completed),
	keep_failed = coalesce(@keep_failed::interval, k.keep_failed),
	updated_at = now()
RETURNING `+retentionCols, pgx.NamedArgs{"namespace": p.Namespace, "type": p.Type,
		"keep_completed": p.KeepCompleted, "keep_failed": p.KeepFailed})
	pol, err := scanRetention(row)
	return pol, mapErr("set retention", err)
}

// RetentionDelete removes the policy of a namespace (typ "") or of one
// workflow type in it, which then inherit again; an absent one is
// ErrNotFound. The default policy cannot be removed (ErrInvalidArgument):
// change it instead.
func (s *Store) RetentionDelete(ctx context.Context, namespace, typ string) error {
	if namespace == "" {
		return invalidf("the default retention cannot be removed; set it instead")
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM kagzi.retention WHERE namespace_id = @namespace AND workflow_type = @type`,
		pgx.NamedArgs{"namespace": namespace, "type": typ})
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
func (s *Store) RetentionList(ctx context.Context, namespace string) ([]RetentionPolicy, error) {
	rows, err := s.db.Query(ctx, `
SELECT `+retentionCols+` FROM kagzi.retention k
WHERE k.namespace_id = '' OR k.namespace_id = @namespace
ORDER BY k.namespace_id, k.workflow_type`, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list retention", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RetentionPolicy, error) { return scanRetention(r) })
	return out, mapErr("list retention", err)
}

const retentionCols = `k.namespace_id, k.workflow_type, k.keep_completed, k.keep_failed, k.updated_at`

func scanRetention(row pgx.Row) (RetentionPolicy, error) {
	var p RetentionPolicy
	err := row.Scan(&p.Namespace, &p.Type, &p.KeepCompleted, &p.KeepFailed, &p.UpdatedAt)
	return p, err
}

// finishedStatuses are the statuses retention deletes.
const finishedStatuses = `('COMPLETED', 'FAILED', 'CANCELLED')`

// retentionGroups are the CTEs grp, every (namespace, type, status) of
// finished runs, found by a loose scan (one probe per group of the index
// workflow_runs_finished_idx, migration 010), and pol, the period of
// each group: the type's policy, else the namespace's, else the default,
// column by column (a NULL inherits). A group without a period (the
// default row removed by hand) keeps its runs.
const retentionGroups = `
grp(namespace_id, workflow_type, status) AS (
	(SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
	 WHERE r.status IN ` + finishedStatuses + `
	 ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1)
	UNION ALL
	SELECT n.namespace_id, n.workflow_type, n.status FROM grp g CROSS JOIN LATERAL (
		SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
		WHERE r.status IN ` + finishedStatuses + `
		  AND (r.namespace_id, r.workflow_type, r.status) > (g.namespace_id, g.workflow_type, g.status)
		ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1) n
), pol AS MATERIALIZED (
	SELECT g.namespace_id, g.workflow_type, g.status, coalesce(
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = g.workflow_type),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = ''),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = '' AND k.workflow_type = '')) AS keep
	FROM grp g
)`

// inGroup is the condition that run r belongs to pol's group, in the
// form an index of finished runs would serve.
const inGroup = `r.namespace_id = pol.namespace_id AND r.workflow_type = pol.workflow_type AND r.status = pol.status
		  AND r.status IN ` + finishedStatuses + ` AND r.finished_at IS NOT NULL`

// deletable is the condition that finished run r may go: it is no child
// of a run that has not finished (whose history shows it), so a parent's
// children outlive it; a child whose parent is gone may go. The parent is
// read by a scalar subquery, a probe of the primary key per child: as
// NOT EXISTS, Postgres may hash the set of every live run instead, which
// reads the whole table.
const deletable = `(r.parent_run_id IS NULL OR coalesce((SELECT p.status IN ` + finishedStatuses + `
		  FROM kagzi.workflow_runs p WHERE p.run_id = r.parent_run_id), true))`

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

// runsNextExpirySQL is RunsNextExpiry's statement.
const runsNextExpirySQL = `
WITH RECURSIVE ` + retentionGroups + `
SELECT min(o.finished_at), min(e.finished_at + pol.keep),
	(SELECT min(v) FROM kagzi.retention, LATERAL (VALUES (keep_completed), (keep_failed)) AS x(v) WHERE v > interval '0')
FROM pol
CROSS JOIN LATERAL (
	SELECT r.finished_at FROM kagzi.workflow_runs r WHERE ` + inGroup + `
	ORDER BY r.finished_at LIMIT 1) o
LEFT JOIN LATERAL (
	SELECT r.finished_at FROM kagzi.workflow_runs r WHERE ` + inGroup + ` AND pol.keep > interval '0' AND ` + deletable + `
	ORDER BY r.finished_at LIMIT 1) e ON true`

// RunsNextExpiry reads when the next finished run outlives its retention
// period: a loose scan of the finished runs per (namespace, type, status)
// on workflow_runs_finished_idx, which costs the same with millions of
// finished runs. A child whose parent has not finished is not
// due (RunsDeleteExpired spares it); the first one after it is looked at
// instead.
func (s *Store) RunsNextExpiry(ctx context.Context) (RunsExpiry, error) {
	var out RunsExpiry
	var shortest *time.Duration
	err := s.db.QueryRow(ctx, runsNextExpirySQL).Scan(&out.OldestFinished, &out.Next, &shortest)
	if err != nil {
		return RunsExpiry{}, mapErr("next expiry", err)
	}
	if shortest != nil {
		out.ShortestKeep = *shortest
	}
	return out, nil
}

// runsDeleteExpiredSQL is RunsDeleteExpired's statement (@now, @limit).
const runsDeleteExpiredSQL = `
WITH RECURSIVE ` + retentionGroups + `,
cand AS MATERIALIZED (
	SELECT c.run_id, c.parent_run_id, @now::timestamptz - pol.keep AS cutoff FROM pol CROSS JOIN LATERAL (
		SELECT r.run_id, r.parent_run_id FROM kagzi.workflow_runs r
		WHERE ` + inGroup + ` AND r.finished_at < @now::timestamptz - pol.keep AND ` + deletable + `
		ORDER BY r.finished_at LIMIT @limit) c
	WHERE pol.keep > interval '0'
	LIMIT @limit
), parents AS MATERIALIZED (
	-- A finished parent stays finished until the batch commits (a retry
	-- waits for it), so its child is never deleted under a live parent.
	SELECT p.run_id FROM kagzi.workflow_runs p
	WHERE p.run_id IN (SELECT parent_run_id FROM cand)
	  AND p.status IN ` + finishedStatuses + `
	ORDER BY p.run_id
	FOR SHARE OF p SKIP LOCKED
), victims AS MATERIALIZED (
	-- Locked, and checked again as they are now: a run retried (or
	-- retried and finished again) since the scan is not taken, nor a
	-- child whose parent is live or was skipped above. (A scalar
	-- subquery looks for a parent gone: NOT EXISTS may be hashed over
	-- every run.)
	SELECT r.run_id FROM kagzi.workflow_runs r JOIN cand c USING (run_id)
	WHERE r.status IN ` + finishedStatuses + ` AND r.finished_at < c.cutoff
	  AND (r.parent_run_id IS NULL OR r.parent_run_id IN (SELECT run_id FROM parents)
	       OR (SELECT true FROM kagzi.workflow_runs p WHERE p.run_id = r.parent_run_id) IS NULL)
	ORDER BY r.run_id
	FOR UPDATE OF r SKIP LOCKED
), runs AS (
	DELETE FROM kagzi.workflow_runs r USING victims v WHERE r.run_id = v.run_id
	RETURNING r.run_id
), steps AS (
	DELETE FROM kagzi.step_runs s USING victims v WHERE s.run_id = v.run_id
), events AS (
	DELETE FROM kagzi.workflow_events e USING victims v WHERE e.run_id = v.run_id
)
SELECT count(*) FROM runs`

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
func (s *Store) RunsDeleteExpired(ctx context.Context, p RunsDeleteExpiredParams) (int64, error) {
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
	// One statement, so one transaction even on a pool: its
	// data-modifying CTEs commit together or not at all.
	err := s.db.QueryRow(ctx, runsDeleteExpiredSQL, pgx.NamedArgs{"now": p.Now, "limit": p.Limit}).Scan(&n)
	if err != nil {
		return 0, mapErr("delete expired runs", err)
	}
	return n, nil
}

// Orphans counts the rows of the tables that belong to runs (step_runs,
// workflow_events) whose run does not exist. A run goes
// whole or not at all, so every count is zero; operators' checks and the
// tests read it after a cleanup was killed. It reads every such row.
type Orphans struct {
	Steps, Events int64
}

// RunsOrphans counts the rows whose run is gone (see Orphans).
func (s *Store) RunsOrphans(ctx context.Context) (Orphans, error) {
	var o Orphans
	err := s.db.QueryRow(ctx, `
SELECT (SELECT count(*) FROM kagzi.step_runs s WHERE NOT EXISTS (SELECT 1 FROM kagzi.workflow_runs r WHERE r.run_id = s.run_id)),
	(SELECT count(*) FROM kagzi.workflow_events e WHERE NOT EXISTS (SELECT 1 FROM kagzi.workflow_runs r WHERE r.run_id = e.run_id))`).
		Scan(&o.Steps, &o.Events)
	return o, mapErr("count orphans", err)
}
