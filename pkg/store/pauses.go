package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Pause and resume (docs/pause.md, migration 022_pause.sql). A paused run
// is not claimed: its due time is kept aside until it is resumed, so the
// claim's index does not hold it. A paused queue or workflow type gets no
// claims: the claim reads kagzi.pauses once per statement.

// MaxPauseReasonLen bounds, in bytes, the reason given for a pause.
const MaxPauseReasonLen = 1024

// PauseKind says what a pause of kagzi.pauses applies to.
type PauseKind string

// The kinds of pause besides a run's.
const (
	// PauseQueue pauses every run of a task queue of the namespace.
	PauseQueue PauseKind = "queue"
	// PauseType pauses every run of a workflow type of the namespace, on
	// every queue.
	PauseType PauseKind = "type"
)

// PauseOptions say who pauses and why; both are recorded and shown.
type PauseOptions struct {
	// By names who paused (an operator, a tool): printable text of at most
	// protocol.MaxNameLen bytes.
	By string
	// Reason says why: printable text of at most MaxPauseReasonLen bytes.
	Reason string
}

// check validates o.
func (o PauseOptions) check() error {
	if len(o.By) > protocol.MaxNameLen {
		return invalidf("pause by is %d bytes, at most %d", len(o.By), protocol.MaxNameLen)
	}
	if len(o.Reason) > MaxPauseReasonLen {
		return invalidf("pause reason is %d bytes, at most %d", len(o.Reason), MaxPauseReasonLen)
	}
	if err := core.CheckPrintable("pause by", o.By); err != nil {
		return err
	}
	return core.CheckPrintable("pause reason", o.Reason)
}

// RunPauseResult is what RunsPause did.
type RunPauseResult struct {
	// Status is the run's status, which a pause does not change: a RUNNING
	// run goes on with the step it is in, and gives its lease back when
	// that step is recorded.
	Status RunStatus
	// Paused is false when the run was paused already (the call changed
	// nothing); Pause is then the earlier pause.
	Paused bool
	Pause  Pause
}

// runsPauseSQL is the statement of RunsPause.
var runsPauseSQL = stmt("RunsPause")

// RunsPause pauses a live run. A suspended run (sleeping, waiting for an
// event or children, backing off before a retry, or due) is not claimed
// until it is resumed; whatever makes it due meanwhile (its wake time, an
// event, a child's end) is recorded and waits. A RUNNING run finishes the
// step it is in: when that step's result is recorded, the run gives its
// lease back and waits. Attempts are not counted for a pause. Pausing a
// paused run changes nothing (RunPauseResult.Paused false, the first
// pause kept). A finished run is ErrRunFinished, an unknown one
// ErrNotFound.
func (s *Store) RunsPause(ctx context.Context, namespace string, id uuid.UUID, o PauseOptions) (RunPauseResult, error) {
	if err := o.check(); err != nil {
		return RunPauseResult{}, err
	}
	var (
		r  RunPauseResult
		at *time.Time
	)
	err := runsPauseSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id, "by": o.By, "reason": o.Reason}).
		Scan(&r.Status, &r.Paused, &at, &r.Pause.By, &r.Pause.Reason)
	if err != nil {
		return RunPauseResult{}, mapErr(fmt.Sprintf("pause run %s", id), err)
	}
	if at == nil {
		return RunPauseResult{}, fmt.Errorf("pause run %s: %w (it is %s)", id, ErrRunFinished, r.Status)
	}
	r.Pause.At = *at
	return r, nil
}

// RunResumeResult is what RunsResume did.
type RunResumeResult struct {
	Status RunStatus
	// Resumed is false when the run was not paused (the call changed
	// nothing).
	Resumed bool
	// DueAt is when the resumed run is due (nil while it still waits for
	// an event or a child, or runs).
	DueAt *time.Time
}

// runsResumeSQL is the statement of RunsResume.
var runsResumeSQL = stmt("RunsResume")

// RunsResume resumes a paused run: it is due again when it would have
// been had it not been paused (at once if that time has passed), and its
// queue's dispatchers are woken. Resuming a run that is not paused
// changes nothing (Resumed false), so two resumes make one claim. An
// unknown run is ErrNotFound.
func (s *Store) RunsResume(ctx context.Context, namespace string, id uuid.UUID) (RunResumeResult, error) {
	var r RunResumeResult
	err := runsResumeSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id}).Scan(&r.Status, &r.Resumed, &r.DueAt)
	if err != nil {
		return RunResumeResult{}, mapErr(fmt.Sprintf("resume run %s", id), err)
	}
	return r, nil
}

// runsPausedCountSQL is the statement of RunsPausedCount.
var runsPausedCountSQL = stmt("RunsPausedCount")

// RunsPausedCount counts the paused runs of each namespace that has any.
func (s *Store) RunsPausedCount(ctx context.Context) (map[string]int64, error) {
	rows, err := runsPausedCountSQL.Query(ctx, s.h.DB, pgx.NamedArgs{})
	if err != nil {
		return nil, mapErr("count paused runs", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ns string
		var n int64
		if err := rows.Scan(&ns, &n); err != nil {
			return nil, mapErr("count paused runs", err)
		}
		out[ns] = n
	}
	return out, mapErr("count paused runs", rows.Err())
}

// PausedScope is a paused queue or workflow type of a namespace.
type PausedScope struct {
	Kind PauseKind
	Name string
	Pause
}

// checkScope validates a queue or type pause's target.
func checkScope(namespace string, kind PauseKind, name string) error {
	if err := checkName("namespace", namespace, true); err != nil {
		return err
	}
	switch kind {
	case PauseQueue:
		return checkName("task queue", name, true)
	case PauseType:
		return checkName("workflow type", name, true)
	}
	return invalidf("pause kind %q is neither %q nor %q", protocol.Echo(string(kind)), PauseQueue, PauseType)
}

// pausesAddSQL is the statement of PausesAdd.
var pausesAddSQL = stmt("PausesAdd")

// PausesAdd pauses a queue or a workflow type of the namespace: no run of
// it is claimed until PausesRemove. Runs that hold a lease go on until
// they next suspend (sleep, wait, back off) or end; they are then not
// claimed again. Pausing it again changes nothing (added false, the first
// pause kept).
func (s *Store) PausesAdd(ctx context.Context, namespace string, kind PauseKind, name string, o PauseOptions) (p PausedScope, added bool, err error) {
	if err := checkScope(namespace, kind, name); err != nil {
		return PausedScope{}, false, err
	}
	if err := o.check(); err != nil {
		return PausedScope{}, false, err
	}
	p = PausedScope{Kind: kind, Name: name}
	err = pausesAddSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "kind": string(kind), "name": name, "by": o.By, "reason": o.Reason}).
		Scan(&added, &p.By, &p.Reason, &p.At)
	if isNoRows(err) {
		// Paused by a transaction that committed after this statement's
		// snapshot: paused, by someone else.
		return p, false, nil
	}
	if err != nil {
		return PausedScope{}, false, mapErr(fmt.Sprintf("pause %s %s", kind, protocol.Echo(name)), err)
	}
	return p, added, nil
}

// pausesRemoveSQL is the statement of PausesRemove.
var pausesRemoveSQL = stmt("PausesRemove")

// PausesRemove resumes a paused queue or workflow type and wakes the
// dispatchers of each queue with runs of it due (woken counts those
// queues). One that is not paused is ErrNotFound.
func (s *Store) PausesRemove(ctx context.Context, namespace string, kind PauseKind, name string) (woken int, err error) {
	if err := checkScope(namespace, kind, name); err != nil {
		return 0, err
	}
	var removed bool
	err = pausesRemoveSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "kind": string(kind), "name": name}).Scan(&removed, &woken)
	if err != nil {
		return 0, mapErr(fmt.Sprintf("resume %s %s", kind, protocol.Echo(name)), err)
	}
	if !removed {
		return 0, fmt.Errorf("resume %s %s: %w (it is not paused)", kind, protocol.Echo(name), ErrNotFound)
	}
	return woken, nil
}

// pausesListSQL is the statement of PausesList.
var pausesListSQL = stmt("PausesList")

// PausesList lists the paused queues and workflow types of the namespace,
// queues first, by name.
func (s *Store) PausesList(ctx context.Context, namespace string) ([]PausedScope, error) {
	rows, err := pausesListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace})
	if err != nil {
		return nil, mapErr("list pauses", err)
	}
	defer rows.Close()
	var out []PausedScope
	for rows.Next() {
		var p PausedScope
		if err := rows.Scan(&p.Kind, &p.Name, &p.By, &p.Reason, &p.At); err != nil {
			return nil, mapErr("list pauses", err)
		}
		out = append(out, p)
	}
	return out, mapErr("list pauses", rows.Err())
}
