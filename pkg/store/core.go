package store

// The names below are defined in package core; they are named here
// so that this package's code and its callers use them as their own.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

type (
	// Cursor marks a position in a newest-first listing.
	Cursor = core.Cursor
	// DBTX is what the store needs from a pool, a connection or a transaction,
	// so every method works the same inside a caller's transaction.
	DBTX = core.DBTX
	// Options tune a Store.
	Options  = core.Options
	namedSQL = core.NamedSQL
	// Settings are the database-wide settings in kagzi.settings: the one
	// source of the payload limits.
	Settings      = core.Settings
	settingsCache = core.SettingsCache
	// RunStatus is the state of a workflow run or schedule template.
	RunStatus = core.RunStatus
	// Run is a workflow run or a schedule template (Status SCHEDULED or
	// PAUSED).
	Run = core.Run
	// Pause is who paused a run, a queue or a workflow type, why and when.
	Pause = core.Pause
	// ParentClosePolicy says what happens to a live child run when its parent
	// reaches a terminal status.
	ParentClosePolicy = core.ParentClosePolicy
	// Schedule is a cron schedule: a template row of workflow_runs that fires
	// runs of its type with its input.
	Schedule = core.Schedule
	// OverlapPolicy says what a schedule does when a fire time comes while a
	// run it started (an instance) is still live.
	OverlapPolicy = core.OverlapPolicy
	// ForkRef is one fork of a run.
	ForkRef = core.ForkRef
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
	// MinKeep is the shortest period: a client that waits for a run's result
	// reads the run after its end, so a run must outlive that read.
	MinKeep = core.MinKeep
	// MaxKeep is the longest period short of keeping for ever.
	MaxKeep = core.MaxKeep
	// MaxPayloadLimit bounds Settings.PayloadMaxBytes: a payload travels whole
	// in one report, so it must fit in a NATS message, and NATS servers allow
	// at most 64 MiB.
	MaxPayloadLimit = core.MaxPayloadLimit
	StatusPending   = core.StatusPending
	StatusRunning   = core.StatusRunning
	StatusSleeping  = core.StatusSleeping
	StatusCompleted = core.StatusCompleted
	StatusFailed    = core.StatusFailed
	StatusCancelled = core.StatusCancelled
	StatusScheduled = core.StatusScheduled
	StatusPaused    = core.StatusPaused
	// ParentCloseTerminate ends the child at once (the default).
	ParentCloseTerminate = core.ParentCloseTerminate
	// ParentCloseRequestCancel asks the child to cancel (RunsCancel).
	ParentCloseRequestCancel = core.ParentCloseRequestCancel
	// ParentCloseAbandon leaves the child running.
	ParentCloseAbandon = core.ParentCloseAbandon
	// OverlapAllowAll starts every fire, however many instances are live.
	OverlapAllowAll = core.OverlapAllowAll
	// OverlapSkip starts nothing while an instance is live.
	OverlapSkip = core.OverlapSkip
	// OverlapBufferOne holds one fire while an instance is live and starts it
	// when the last live instance ends; later fires while one is held are
	// dropped.
	OverlapBufferOne = core.OverlapBufferOne
	// OverlapCancelOther asks the live instances to cancel (RunsCancel) and
	// starts the new run at once.
	OverlapCancelOther = core.OverlapCancelOther
	// OverlapTerminateOther terminates the live instances (RunsTerminate) and
	// starts the new run.
	OverlapTerminateOther = core.OverlapTerminateOther
	StepFunction          = core.StepFunction
	StepSleep             = core.StepSleep
	StepEvent             = core.StepEvent
	StepChild             = core.StepChild
	StepPending           = core.StepPending
	StepRunning           = core.StepRunning
	StepCompleted         = core.StepCompleted
	StepFailed            = core.StepFailed
)

var (
	// ErrNotFound: the entity does not exist in the given namespace.
	ErrNotFound = core.ErrNotFound
	// ErrConflict: the write conflicts with the entity's current state or a
	// uniqueness rule (e.g.
	ErrConflict = core.ErrConflict
	// ErrInvalidArgument: the input is malformed; the message names the field.
	ErrInvalidArgument = core.ErrInvalidArgument
	// ErrLeaseLost: the report names a lease that is no longer current; the
	// holder must abandon the run.
	ErrLeaseLost = core.ErrLeaseLost
	// ErrPayloadTooLarge: an input, output or event payload exceeds the limit.
	ErrPayloadTooLarge = core.ErrPayloadTooLarge
	// ErrNoWorker: a start that asked for a live worker
	// (RunsCreateParams.RequireWorker) was refused because no live worker
	// serves the run's type@version on its queue; nothing was created.
	ErrNoWorker = core.ErrNoWorker
	// ErrEventsArrived: a run's end (a completion or a continue-as-new) was
	// refused because events of a name the ending execution waited for or
	// drained arrived after its delivery and are not consumed.
	ErrEventsArrived = core.ErrEventsArrived
	// ErrAttribute: a search attribute of a start, a declaration or a query
	// is malformed, undeclared or of the wrong kind; the message names it.
	// It wraps ErrInvalidArgument.
	ErrAttribute = core.ErrAttribute
	// ErrQueryTimeout: a listing or count by a query ran longer than its
	// statement timeout and was stopped; narrow the query.
	ErrQueryTimeout = core.ErrQueryTimeout
)

func checkName(field, v string, required bool) error { return core.CheckName(field, v, required) }

func checkEventName(v string) error { return core.CheckEventName(v) }

func checkTime(field string, t *time.Time) error { return core.CheckTime(field, t) }

func checkExternalID(v string) error { return core.CheckExternalID(v) }

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(tok string) (Cursor, error) { return core.ParseCursor(tok) }

func invalidf(format string, args ...any) error { return core.Invalidf(format, args...) }

func mapErr(what string, err error) error { return core.MapErr(what, err) }

// IsTransient reports whether err is a clash with other transactions (a
// deadlock, a serialization failure) that the same work, run again in a
// new transaction, may not meet.
func IsTransient(err error) bool { return core.IsTransient(err) }

func isNoRows(err error) bool { return core.IsNoRows(err) }

// NamedArgsOf returns the named arguments of a statement the store runs,
// as a pgx tracer (or a DBTX) is given them, and false for a statement
// with positional arguments.
func NamedArgsOf(args []any) (pgx.NamedArgs, bool) { return core.NamedArgsOf(args) }

// WithTraceContext returns ctx carrying tc, a W3C traceparent: a run this
// store creates with ctx takes it when its parameters name none (e.g.
func WithTraceContext(ctx context.Context, tc string) context.Context {
	return core.WithTraceContext(ctx, tc)
}
