package runstore

// The names below are defined in package core; they are named here
// so that this package's code and its callers use them as their own.

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

type (
	// DBTX is what the store needs from a pool, a connection or a transaction,
	// so every method works the same inside a caller's transaction.
	DBTX     = core.DBTX
	namedSQL = core.NamedSQL
	// RunStatus is the state of a workflow run or schedule template.
	RunStatus = core.RunStatus
	// Run is a workflow run or a schedule template (Status SCHEDULED or
	// PAUSED).
	Run = core.Run
	// ParentClosePolicy says what happens to a live child run when its parent
	// reaches a terminal status.
	ParentClosePolicy = core.ParentClosePolicy
	// TypeVersion names a workflow type at a version, as a worker registers
	// it.
	TypeVersion = core.TypeVersion
	// StepKind is what a step records.
	StepKind = core.StepKind
	// StepStatus is the state of one step attempt.
	StepStatus = core.StepStatus
	// Step is one attempt of one step of a run.
	Step = core.Step
	// StepState is the latest attempt of a step as delivered with a claimed
	// run: enough for replay without a round trip per step.
	StepState = core.StepState
	// Pause is who paused a run, a queue or a type, why and when.
	Pause = core.Pause
	// ClaimedRun is a run handed to a worker by RunsClaim.
	ClaimedRun = core.ClaimedRun
)

const (
	maxNameLen = core.MaxNameLen
	// IdleInTransactionTimeout is how long the pools Connect opens let a
	// session sit idle inside a transaction before the server ends it: the
	// bound on how long a frozen process holds the rows its transaction
	// locked.
	IdleInTransactionTimeout = core.IdleInTransactionTimeout
	// MaxKeep is the longest period short of keeping for ever.
	MaxKeep         = core.MaxKeep
	StatusPending   = core.StatusPending
	StatusRunning   = core.StatusRunning
	StatusSleeping  = core.StatusSleeping
	StatusCompleted = core.StatusCompleted
	StatusFailed    = core.StatusFailed
	StatusCancelled = core.StatusCancelled
	StatusScheduled = core.StatusScheduled
	StatusPaused    = core.StatusPaused
	StepChild       = core.StepChild
	StepFunction    = core.StepFunction
	StepPending     = core.StepPending
	StepRunning     = core.StepRunning
	StepCompleted   = core.StepCompleted
	StepFailed      = core.StepFailed
)

var (
	// ErrNotFound: the entity does not exist in the given namespace.
	ErrNotFound = core.ErrNotFound
	// ErrConflict: the write conflicts with the entity's current state or a
	// uniqueness rule (e.g.
	ErrConflict = core.ErrConflict
	// ErrLeaseLost: the report names a lease that is no longer current; the
	// holder must abandon the run.
	ErrLeaseLost = core.ErrLeaseLost
	// ErrEventsArrived: a run's end (a completion or a continue-as-new) was
	// refused because events of a name the ending execution waited for or
	// drained arrived after its delivery and are not consumed.
	ErrEventsArrived = core.ErrEventsArrived
)

func scanRun(row pgx.Row, extra ...any) (Run, error) { return core.ScanRun(row, extra...) }

func checkName(field, v string, required bool) error { return core.CheckName(field, v, required) }

func checkEventName(v string) error { return core.CheckEventName(v) }

func checkTime(field string, t *time.Time) error { return core.CheckTime(field, t) }

func checkExternalID(v string) error { return core.CheckExternalID(v) }

func checkPrintable(what, v string) error { return core.CheckPrintable(what, v) }

func clipError(s string) string { return core.ClipError(s) }

func encodePolicy(p *retry.Policy) ([]byte, error) { return core.EncodePolicy(p) }

func collectRuns(rows pgx.Rows) ([]Run, error) { return core.CollectRuns(rows) }

func newRunID() (uuid.UUID, error) { return core.NewRunID() }

func nullText(s string) *string { return core.NullText(s) }

func invalidf(format string, args ...any) error { return core.Invalidf(format, args...) }

func isDeadlock(err error) bool { return core.IsDeadlock(err) }

func mapErr(what string, err error) error { return core.MapErr(what, err) }

func isNoRows(err error) bool { return core.IsNoRows(err) }

func prepareNamed(text string) *namedSQL { return core.PrepareNamed(text) }

func newTraceParent() (string, error) { return core.NewTraceParent() }

func traceOr(ctx context.Context, tc string) (string, error) { return core.TraceOr(ctx, tc) }
