package opsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Rerun from a step (fork). A fork is a new run of an earlier run's type,
// queue, namespace, input, retry policy, priority and version, whose
// history starts as a copy of the earlier run's completed steps recorded
// before a chosen step: those replay by memoization, the chosen step and
// everything after it execute again. The earlier run is not changed; the
// fork names it (forked_from) and the step (forked_at_step, "" for a fork
// from the start, which copies nothing). Forks are unique per (run, step)
// (migration 012_fork.sql).
//
// "Before" is the order of the run's history (StepsList: when each row was
// recorded, by the server's clock): a step is copied when its latest
// attempt is COMPLETED and was recorded before the chosen step's first
// attempt was. For a workflow that runs its steps one after another that is
// every step before the chosen one; a step that ran concurrently with it
// and finished after it was first recorded executes again. Copied rows keep
// their step id, attempt number, kind, input, output, child run and times
// (so the fork's history shows when each result was made), and belong to
// an earlier retry epoch (run_attempt NULL, as RunsRetry leaves them).
//
// What the fork does not take from the earlier run: its external id (an
// idempotency key names one live run, and the earlier one may be live), its
// deadline (a point in time, usually past), its parent (a parent waits for
// its own child only) and its schedule (a fire time fires once). It gets a
// trace of its own.

// MaxForkMany bounds how many runs one RunsForkMany forks, and
// DefaultForkMany is how many when no limit is given.
const (
	MaxForkMany     = DeadLetterScan
	DefaultForkMany = 1000
)

// RunsForkParams ask for a fork of one run.
type RunsForkParams struct {
	Namespace string
	RunID     uuid.UUID
	// Step is the step the fork executes again, with every step recorded
	// after it; "" forks from the start. A step the run did not record is
	// ErrInvalidArgument.
	Step string
	// Version pins the fork to this version; "" keeps the run's version
	// (or, for a run never claimed, gives the type's default version, as a
	// start does).
	Version string
}

// Fork is a fork of a run, as RunsFork and RunsForkMany return it.
type Fork struct {
	// Run is the fork, with its input.
	Run Run
	// From and Step are the run it was forked from and the step it
	// executes again from ("" from the start).
	From uuid.UUID
	Step string
	// Created is false when the fork existed already: a request for the
	// same (run, step) returns it instead of forking again.
	Created bool
}

// ForkLinks are a run's links to the run it was forked from and to its
// own forks.
type ForkLinks struct {
	// ForkedFrom is the run this one was forked from (nil: not a fork), at
	// step ForkedAtStep ("" from the start).
	ForkedFrom   *uuid.UUID
	ForkedAtStep string
	// Forks are the forks made from this run, oldest first.
	Forks []ForkRef
}

// forkPair is one (run, step) to fork, with what the fork gets.
type forkPair struct {
	from    uuid.UUID
	step    string
	version string
}

// runsForkSQL forks every (run, step) of v that names a run of the
// namespace (not a schedule template) and, for a step, one the run
// recorded: it inserts the fork PENDING and due now (the insert's NOTIFY
// wakes the dispatchers, as any start does) with the run's input, and the
// copied steps. A pair whose fork exists meets the unique index and
// inserts nothing (DO NOTHING, so the steps, which join the inserted rows,
// are not written either). Rows are
// inserted in (run, step) order, so concurrent batches wait for each other
// instead of deadlocking. It returns, per row of v, whether its run was
// found, whether its step was, and the fork it inserted (NULL if none).
var runsForkSQL = stmt("RunsFork")

// runsForkFindSQL reads the forks of the (run, step) pairs given.
var runsForkFindSQL = stmt("RunsForkFind")

func checkForkStep(step string) error {
	if len(step) > maxNameLen {
		return invalidf("step id is %d bytes, at most %d", len(step), maxNameLen)
	}
	if !pgText(step) {
		return invalidf("step id %q is not valid text", step)
	}
	return nil
}

// RunsFork forks one run (see the package's note on forks above): a new
// run, PENDING and claimable at once, that reuses the run's completed steps
// recorded before p.Step and executes p.Step and everything after it. A
// repeated request for the same (run, step) returns the existing fork with
// created=false. An unknown run (or a schedule template) is ErrNotFound; a
// step the run did not record is ErrInvalidArgument.
func (s *Ops) RunsFork(ctx context.Context, p RunsForkParams) (Fork, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return Fork{}, err
	}
	if p.RunID == uuid.Nil {
		return Fork{}, invalidf("run id is required")
	}
	if err := checkForkStep(p.Step); err != nil {
		return Fork{}, err
	}
	if err := checkName("version", p.Version, false); err != nil {
		return Fork{}, err
	}
	forks, err := s.runsFork(ctx, p.Namespace, []forkPair{{from: p.RunID, step: p.Step, version: p.Version}})
	if err != nil {
		return Fork{}, err
	}
	f := forks[0]
	switch {
	case f.notFound:
		return Fork{}, fmt.Errorf("fork run %s: %w", p.RunID, ErrNotFound)
	case f.noStep:
		return Fork{}, invalidf("fork run %s: the run recorded no step %q", p.RunID, p.Step)
	}
	return f.Fork, nil
}

// forkResult is the outcome of one pair of runsFork.
type forkResult struct {
	Fork
	notFound, noStep bool
}

// runsFork forks the pairs in one transaction (see runsForkSQL) and
// returns their outcomes in the order of pairs: each fork, made now or
// found. A fork found by the insert's conflict but gone by the time it is
// read (retention deleted it) is made again.
func (s *Ops) runsFork(ctx context.Context, namespace string, pairs []forkPair) ([]forkResult, error) {
	out := make([]forkResult, len(pairs))
	for tries := 1; ; tries++ {
		err := s.inTx(ctx, func(tx *Ops) error { return tx.runsForkTx(ctx, namespace, pairs, out) })
		if err == nil {
			return out, nil
		}
		if (isDeadlock(err) || errors.Is(err, errForkGone)) && tries < 5 {
			continue
		}
		if errors.Is(err, errForkGone) {
			return nil, fmt.Errorf("fork runs: %w: a fork keeps disappearing", ErrConflict)
		}
		return nil, mapErr("fork runs", err)
	}
}

// errForkGone: a pair conflicted with a fork that could not be read back.
var errForkGone = errors.New("fork gone")

func (s *Ops) runsForkTx(ctx context.Context, namespace string, pairs []forkPair, out []forkResult) error {
	order := make([]int, len(pairs))
	for i := range order {
		order[i] = i
	}
	// Rows go in (run, step) order, so batches that overlap take the
	// unique index's entries in the same order.
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(pairs[a].from.String(), pairs[b].from.String()); c != 0 {
			return c
		}
		return strings.Compare(pairs[a].step, pairs[b].step)
	})
	n := len(pairs)
	fromIDs, newIDs := make([]uuid.UUID, n), make([]uuid.UUID, n)
	steps, versions, traces := make([]string, n), make([]string, n), make([]string, n)
	for k, i := range order {
		id, err := newRunID()
		if err != nil {
			return err
		}
		tc, err := newTraceParent()
		if err != nil {
			return err
		}
		fromIDs[k], steps[k], versions[k], newIDs[k], traces[k] = pairs[i].from, pairs[i].step, pairs[i].version, id, tc
	}
	rows, err := runsForkSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "from_ids": fromIDs, "steps": steps,
		"new_ids": newIDs, "versions": versions, "trace_contexts": traces})
	if err != nil {
		return err
	}
	created := make(map[uuid.UUID]bool)
	for rows.Next() {
		var ord int
		var found, stepOK bool
		var made *uuid.UUID
		if err := rows.Scan(&ord, &found, &stepOK, &made); err != nil {
			rows.Close()
			return err
		}
		i := order[ord-1]
		out[i] = forkResult{Fork: Fork{From: pairs[i].from, Step: pairs[i].step}, notFound: !found, noStep: found && !stepOK}
		if made != nil {
			created[*made] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Read back every fork, made now or earlier: a fork a concurrent
	// request committed after this statement began is not in its snapshot,
	// but the conflict waited for its commit, so this statement sees it.
	rows, err = runsForkFindSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "from_ids": fromIDs, "steps": steps})
	if err != nil {
		return err
	}
	type key struct {
		from uuid.UUID
		step string
	}
	found := make(map[key]Run)
	for rows.Next() {
		var k key
		var input []byte
		r, err := scanRun(rows, &k.from, &k.step, &input)
		if err != nil {
			rows.Close()
			return err
		}
		r.Input = input
		found[k] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range out {
		f := &out[i]
		if f.notFound || f.noStep {
			continue
		}
		r, ok := found[key{f.From, f.Step}]
		if !ok {
			return errForkGone
		}
		f.Run, f.Created = r, created[r.ID]
	}
	return nil
}

// RunsForkManyParams select the runs RunsForkMany forks and say from
// where.
type RunsForkManyParams struct {
	Namespace string
	// Type selects runs of this workflow type ("" any).
	Type string
	// RunID selects this run only (uuid.Nil: any).
	RunID uuid.UUID
	// Status selects runs in this status ("" FAILED).
	Status RunStatus
	// ErrorGroup selects runs whose error has this fingerprint, as the
	// dead-letter view groups them (DeadLetterGroup.Fingerprint; "" any).
	ErrorGroup string
	// ErrorType selects runs whose failed step (see FromFailedStep) failed
	// with this error type ("" any).
	ErrorType string
	// FinishedAfter and FinishedBefore select runs that finished in
	// [FinishedAfter, FinishedBefore) (nil: unbounded).
	FinishedAfter, FinishedBefore *time.Time
	// Step forks every run from this step; a run that did not record it is
	// skipped. "" (without FromFailedStep) forks from the start.
	Step string
	// FromFailedStep forks each run from its failed step: the step whose
	// latest attempt failed, the most recently recorded if several did —
	// for a FAILED run, the step whose failure ended it. A run without a
	// failed step (its workflow code failed, or its deadline passed) is
	// forked from the start.
	FromFailedStep bool
	// Version pins the forks ("" keeps each run's version).
	Version string
	// Limit bounds how many runs are selected, newest finished first
	// (0: DefaultForkMany; at most MaxForkMany).
	Limit int
}

// RunsForkManyResult reports a RunsForkMany.
type RunsForkManyResult struct {
	// Matched runs were selected; of them, Forked were forked now,
	// AlreadyForked had a fork from the same step (returned, not made
	// again), and Skipped did not record the step asked for.
	Matched, Forked, AlreadyForked, Skipped int
	// Forks are the forks made or found, newest finished run first.
	Forks []Fork
}

// runsForkSelectSQL selects the runs RunsForkManyParams describe, with the
// step each is forked from and whether it recorded that step.
var runsForkSelectSQL = stmt("RunsForkSelect")

// RunsForkMany forks every run p selects (at most p.Limit), each as
// RunsFork would, in one transaction, and reports how many it forked and
// how many had been forked from the same step already. A second call with
// the same selection forks nothing again.
func (s *Ops) RunsForkMany(ctx context.Context, p RunsForkManyParams) (RunsForkManyResult, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return RunsForkManyResult{}, err
	}
	if p.Type != "" {
		if err := checkName("workflow type", p.Type, false); err != nil {
			return RunsForkManyResult{}, err
		}
	}
	if p.Status == "" {
		p.Status = StatusFailed
	}
	if !p.Status.Valid() || p.Status == StatusScheduled || p.Status == StatusPaused {
		return RunsForkManyResult{}, invalidf("status %q is not a run status", p.Status)
	}
	if p.FromFailedStep && p.Step != "" {
		return RunsForkManyResult{}, invalidf("a step and from-failed-step exclude each other")
	}
	if err := checkForkStep(p.Step); err != nil {
		return RunsForkManyResult{}, err
	}
	if err := checkName("version", p.Version, false); err != nil {
		return RunsForkManyResult{}, err
	}
	for _, t := range []*time.Time{p.FinishedAfter, p.FinishedBefore} {
		if err := checkTime("finish time", t); err != nil {
			return RunsForkManyResult{}, err
		}
	}
	if !pgText(p.ErrorGroup) || !pgText(p.ErrorType) {
		return RunsForkManyResult{}, invalidf("error group and error type must be valid text")
	}
	switch {
	case p.Limit == 0:
		p.Limit = DefaultForkMany
	case p.Limit < 0 || p.Limit > MaxForkMany:
		return RunsForkManyResult{}, invalidf("limit %d is outside 1..%d", p.Limit, MaxForkMany)
	}
	var res RunsForkManyResult
	var runID *uuid.UUID
	if p.RunID != uuid.Nil {
		runID = &p.RunID
	}
	err := s.inTx(ctx, func(tx *Ops) error {
		rows, err := runsForkSelectSQL.Query(ctx, tx.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "status": string(p.Status),
			"type": p.Type, "run_id": runID, "after": p.FinishedAfter, "before": p.FinishedBefore, "error_group": p.ErrorGroup,
			"error_type": p.ErrorType, "step": p.Step, "from_failed": p.FromFailedStep, "limit": p.Limit})
		if err != nil {
			return mapErr("fork runs: select", err)
		}
		var pairs []forkPair
		for rows.Next() {
			var fp forkPair
			var has bool
			if err := rows.Scan(&fp.from, &fp.step, &has); err != nil {
				rows.Close()
				return mapErr("fork runs: select", err)
			}
			res.Matched++
			if !has {
				res.Skipped++
				continue
			}
			fp.version = p.Version
			pairs = append(pairs, fp)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr("fork runs: select", err)
		}
		if len(pairs) == 0 {
			return nil
		}
		forks, err := tx.runsFork(ctx, p.Namespace, pairs)
		if err != nil {
			return err
		}
		for _, f := range forks {
			// The runs were read in this transaction, so none is missing.
			if f.notFound || f.noStep {
				res.Skipped++
				continue
			}
			if f.Created {
				res.Forked++
			} else {
				res.AlreadyForked++
			}
			res.Forks = append(res.Forks, f.Fork)
		}
		return nil
	})
	if err != nil {
		return RunsForkManyResult{}, err
	}
	return res, nil
}

// runsForkLinksSQL reads a run's fork links, one row per fork (one row
// of NULL forks for a run without any).
var runsForkLinksSQL = stmt("RunsForkLinks")

// RunsForkLinks returns a run's fork links: the run it was forked from,
// if any, and its own forks. An unknown run is ErrNotFound.
func (s *Ops) RunsForkLinks(ctx context.Context, namespace string, id uuid.UUID) (ForkLinks, error) {
	rows, err := runsForkLinksSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id})
	if err != nil {
		return ForkLinks{}, mapErr("fork links", err)
	}
	defer rows.Close()
	var l ForkLinks
	found := false
	for rows.Next() {
		found = true
		var (
			fid     *uuid.UUID
			fstep   *string
			fstatus *string
			fat     *time.Time
		)
		if err := rows.Scan(&l.ForkedFrom, &l.ForkedAtStep, &fid, &fstep, &fstatus, &fat); err != nil {
			return ForkLinks{}, mapErr("fork links", err)
		}
		if fid != nil {
			l.Forks = append(l.Forks, ForkRef{RunID: *fid, Step: *fstep, Status: RunStatus(*fstatus), CreatedAt: *fat})
		}
	}
	if err := rows.Err(); err != nil {
		return ForkLinks{}, mapErr("fork links", err)
	}
	if !found {
		return ForkLinks{}, fmt.Errorf("fork links of run %s: %w", id, ErrNotFound)
	}
	return l, nil
}
