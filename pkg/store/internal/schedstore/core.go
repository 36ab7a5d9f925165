package schedstore

// The names below are defined in package core; they are named here
// so that this package's code and its callers use them as their own.

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

type (
	// Cursor marks a position in a newest-first listing.
	Cursor   = core.Cursor
	namedSQL = core.NamedSQL
	// Run is a workflow run or a schedule template (Status SCHEDULED or
	// PAUSED).
	Run = core.Run
	// Schedule is a cron schedule: a template row of workflow_runs that fires
	// runs of its type with its input.
	Schedule = core.Schedule
	// OverlapPolicy says what a schedule does when a fire time comes while a
	// run it started (an instance) is still live.
	OverlapPolicy = core.OverlapPolicy
)

const (
	StatusScheduled = core.StatusScheduled
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
)

var (
	// ErrNotFound: the entity does not exist in the given namespace.
	ErrNotFound = core.ErrNotFound
	// ErrConflict: the write conflicts with the entity's current state or a
	// uniqueness rule (e.g.
	ErrConflict = core.ErrConflict
)

func scanRun(row pgx.Row, extra ...any) (Run, error) { return core.ScanRun(row, extra...) }

func checkName(field, v string, required bool) error { return core.CheckName(field, v, required) }

func encodePolicy(p *retry.Policy) ([]byte, error) { return core.EncodePolicy(p) }

func collectRuns(rows pgx.Rows) ([]Run, error) { return core.CollectRuns(rows) }

func newRunID() (uuid.UUID, error) { return core.NewRunID() }

func nullText(s string) *string { return core.NullText(s) }

func invalidf(format string, args ...any) error { return core.Invalidf(format, args...) }

func mapErr(what string, err error) error { return core.MapErr(what, err) }

func isNoRows(err error) bool { return core.IsNoRows(err) }

func newTraceParent() (string, error) { return core.NewTraceParent() }
