package opsstore

// Code below names what core defines, so this package's code and its
// callers use it as their own.

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

type (
	Cursor            = core.Cursor
	DBTX              = core.DBTX
	Options           = core.Options
	namedSQL          = core.NamedSQL
	Settings          = core.Settings
	settingsCache     = core.SettingsCache
	RunStatus         = core.RunStatus
	Run               = core.Run
	ParentClosePolicy = core.ParentClosePolicy
	Schedule          = core.Schedule
	OverlapPolicy     = core.OverlapPolicy
	ForkRef           = core.ForkRef
	TypeVersion       = core.TypeVersion
	StepKind          = core.StepKind
	StepStatus        = core.StepStatus
	Step              = core.Step
	StepState         = core.StepState
	ClaimedRun        = core.ClaimedRun
)

const (
	maxNameLen               = core.MaxNameLen
	maxErrLen                = core.MaxErrLen
	IdleInTransactionTimeout = core.IdleInTransactionTimeout
	MinKeep                  = core.MinKeep
	MaxKeep                  = core.MaxKeep
	MaxPayloadLimit          = core.MaxPayloadLimit
	StatusPending            = core.StatusPending
	StatusRunning            = core.StatusRunning
	StatusSleeping           = core.StatusSleeping
	StatusCompleted          = core.StatusCompleted
	StatusFailed             = core.StatusFailed
	StatusCancelled          = core.StatusCancelled
	StatusScheduled          = core.StatusScheduled
	StatusPaused             = core.StatusPaused
	ParentCloseTerminate     = core.ParentCloseTerminate
	ParentCloseRequestCancel = core.ParentCloseRequestCancel
	ParentCloseAbandon       = core.ParentCloseAbandon
	OverlapAllowAll          = core.OverlapAllowAll
	OverlapSkip              = core.OverlapSkip
	OverlapBufferOne         = core.OverlapBufferOne
	OverlapCancelOther       = core.OverlapCancelOther
	OverlapTerminateOther    = core.OverlapTerminateOther
	StepFunction             = core.StepFunction
	StepSleep                = core.StepSleep
	StepEvent                = core.StepEvent
	StepChild                = core.StepChild
	StepPending              = core.StepPending
	StepRunning              = core.StepRunning
	StepCompleted            = core.StepCompleted
	StepFailed               = core.StepFailed
)

var (
	ErrNotFound        = core.ErrNotFound
	ErrConflict        = core.ErrConflict
	ErrInvalidArgument = core.ErrInvalidArgument
	ErrLeaseLost       = core.ErrLeaseLost
	ErrPayloadTooLarge = core.ErrPayloadTooLarge
	ErrNoWorker        = core.ErrNoWorker
	ErrEventsArrived   = core.ErrEventsArrived
)

func scanRun(row pgx.Row, extra ...any) (Run, error) { return core.ScanRun(row, extra...) }

func checkName(field, v string, required bool) error { return core.CheckName(field, v, required) }

func checkEventName(v string) error { return core.CheckEventName(v) }

func checkTime(field string, t *time.Time) error { return core.CheckTime(field, t) }

func pgText(s string) bool { return core.PGText(s) }

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
