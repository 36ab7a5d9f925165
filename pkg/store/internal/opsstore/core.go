package opsstore

// The names below are defined in package core; they are named here
// so that this package's code and its callers use them as their own.

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

type (
	// Cursor marks a position in a newest-first listing.
	Cursor   = core.Cursor
	namedSQL = core.NamedSQL
	// RunStatus is the state of a workflow run or schedule template.
	RunStatus = core.RunStatus
	// Run is a workflow run or a schedule template (Status SCHEDULED or
	// PAUSED).
	Run = core.Run
	// ForkRef is one fork of a run.
	ForkRef = core.ForkRef
	// TypeVersion names a workflow type at a version, as a worker registers
	// it.
	TypeVersion = core.TypeVersion
	// Step is one attempt of one step of a run.
	Step = core.Step
)

const (
	maxNameLen = core.MaxNameLen
	// MinKeep is the shortest period: a client that waits for a run's result
	// reads the run after its end, so a run must outlive that read.
	MinKeep = core.MinKeep
	// MaxKeep is the longest period short of keeping for ever.
	MaxKeep         = core.MaxKeep
	StatusFailed    = core.StatusFailed
	StatusScheduled = core.StatusScheduled
	StatusPaused    = core.StatusPaused
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

func checkTime(field string, t *time.Time) error { return core.CheckTime(field, t) }

func pgText(s string) bool { return core.PGText(s) }

func collectRuns(rows pgx.Rows) ([]Run, error) { return core.CollectRuns(rows) }

func newRunID() (uuid.UUID, error) { return core.NewRunID() }

func invalidf(format string, args ...any) error { return core.Invalidf(format, args...) }

func isDeadlock(err error) bool { return core.IsDeadlock(err) }

func mapErr(what string, err error) error { return core.MapErr(what, err) }

func isNoRows(err error) bool { return core.IsNoRows(err) }

func newTraceParent() (string, error) { return core.NewTraceParent() }
