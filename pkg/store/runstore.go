package store

// Code below names what runstore defines, so this package's code and its
// callers use it as their own.

import "github.com/kagzi/kagzi/pkg/store/internal/runstore"

type (
	EventsSeen             = runstore.EventsSeen
	RunsStartChildParams   = runstore.RunsStartChildParams
	RunsWaitParams         = runstore.RunsWaitParams
	RunsClaimParams        = runstore.RunsClaimParams
	QueueDue               = runstore.QueueDue
	RunsCreateParams       = runstore.RunsCreateParams
	RunsCreateManyResult   = runstore.RunsCreateManyResult
	DebounceKeep           = runstore.DebounceKeep
	Debounce               = runstore.Debounce
	ClaimStats             = runstore.ClaimStats
	KeyUsage               = runstore.KeyUsage
	Lease                  = runstore.Lease
	ConcurrencyLimit       = runstore.ConcurrencyLimit
	RecoveredRun           = runstore.RecoveredRun
	RunsExtendLeasesParams = runstore.RunsExtendLeasesParams
	RunsFailAttemptResult  = runstore.RunsFailAttemptResult
	RunsCompleteItem       = runstore.RunsCompleteItem
	RunsCompleteOutcome    = runstore.RunsCompleteOutcome
	QueueDepth             = runstore.QueueDepth
	IDReusePolicy          = runstore.IDReusePolicy
	IDReuseError           = runstore.IDReuseError
	StepsRecordParams      = runstore.StepsRecordParams
	StepOutcome            = runstore.StepOutcome
)

const (
	TerminatedError       = runstore.TerminatedError
	DebounceLast          = runstore.DebounceLast
	DebounceFirst         = runstore.DebounceFirst
	MaxDebounceWindow     = runstore.MaxDebounceWindow
	MaxDebounceWait       = runstore.MaxDebounceWait
	ClaimStuckAfter       = runstore.ClaimStuckAfter
	NoLimit               = runstore.NoLimit
	DeadlineError         = runstore.DeadlineError
	IDReuseAllowDuplicate = runstore.IDReuseAllowDuplicate
	IDReuseFailedOnly     = runstore.IDReuseFailedOnly
	IDReuseReject         = runstore.IDReuseReject
	IDReuseTerminate      = runstore.IDReuseTerminate
	MaxIDReuseWindow      = runstore.MaxIDReuseWindow
)

var (
	ErrIDReused = runstore.ErrIDReused
)
