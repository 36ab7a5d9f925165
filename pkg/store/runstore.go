package store

// The names below are defined in package runstore; they are named here
// so that this package's code and its callers use them as their own.

import "github.com/kagzi/kagzi/pkg/store/internal/runstore"

type (
	// EventsSeen is what an execution saw of its run's events, given with the
	// run's end (RunsCompleteItem.Events, RunsContinueAsNew): the end applies
	// only if no event of one of Names (of any name, with All) was stored
	// after the delivery of the execution and is still unconsumed.
	EventsSeen = runstore.EventsSeen
	// RunsAttributesSetParams are a workflow's SetAttributes under the
	// run's lease (RunsAttributesSet).
	RunsAttributesSetParams = runstore.RunsAttributesSetParams
	// RunsStartChildParams describe a child run a parent starts as its step.
	RunsStartChildParams = runstore.RunsStartChildParams
	// RunsWaitParams describe a suspension that waits for more than a timer.
	RunsWaitParams = runstore.RunsWaitParams
	// RunsClaimParams ask for up to Limit due runs of one namespace and queue.
	RunsClaimParams = runstore.RunsClaimParams
	// QueueDue is a queue with claimable runs and its earliest due time.
	QueueDue = runstore.QueueDue
	// RunsCreateParams describe a run to start.
	RunsCreateParams = runstore.RunsCreateParams
	// RunsCreateManyResult is the outcome of one row of RunsCreateMany.
	RunsCreateManyResult = runstore.RunsCreateManyResult
	// DebounceKeep says which start's input a debounced run keeps.
	DebounceKeep = runstore.DebounceKeep
	// Debounce makes many starts one run.
	Debounce = runstore.Debounce
	// ClaimStats says what flow control held back in a claim.
	ClaimStats = runstore.ClaimStats
	// KeyUsage is how many runs of one concurrency key are RUNNING.
	KeyUsage = runstore.KeyUsage
	// Lease names the lease a report is made under.
	Lease = runstore.Lease
	// ConcurrencyLimit caps the RUNNING runs of one workflow type in one
	// namespace and queue, across every worker (RunsClaim enforces it).
	ConcurrencyLimit = runstore.ConcurrencyLimit
	// RecoveredRun is a run taken back from a lost holder.
	RecoveredRun = runstore.RecoveredRun
	// RunsExtendLeasesParams: one live worker's heartbeat, as the reaper
	// persists it.
	RunsExtendLeasesParams = runstore.RunsExtendLeasesParams
	// RunsFailAttemptResult says what became of a failed attempt.
	RunsFailAttemptResult = runstore.RunsFailAttemptResult
	// RunsCompleteItem is one run completion of RunsCompleteMany.
	RunsCompleteItem = runstore.RunsCompleteItem
	// RunsCompleteOutcome is the outcome of one completion of
	// RunsCompleteBatch.
	RunsCompleteOutcome = runstore.RunsCompleteOutcome
	// QueueDepth is the number of due runs waiting in one queue.
	QueueDepth = runstore.QueueDepth
	// IDReusePolicy says whether a start's external id may name a new run,
	// given the runs that held the id before.
	IDReusePolicy = runstore.IDReusePolicy
	// IDReuseError refuses a start whose external id an ended run held, under
	// its id reuse policy.
	IDReuseError = runstore.IDReuseError
	// StepsRecordParams is one step report from a lease holder: one attempt of
	// one step of the run the lease names.
	StepsRecordParams = runstore.StepsRecordParams
	// StepOutcome is the outcome of one step report of StepsRecordBatch.
	StepOutcome = runstore.StepOutcome
)

const (
	// TerminatedError is the error recorded on a terminated run (followed by
	// ": " and the reason, if one was given).
	TerminatedError = runstore.TerminatedError
	// DebounceLast keeps the input of the latest start (the default).
	DebounceLast = runstore.DebounceLast
	// DebounceFirst keeps the input of the start that opened the run.
	DebounceFirst = runstore.DebounceFirst
	// MaxDebounceWindow is the longest Debounce.Window.
	MaxDebounceWindow = runstore.MaxDebounceWindow
	// MaxDebounceWait is the longest Debounce.MaxWait.
	MaxDebounceWait = runstore.MaxDebounceWait
	// ClaimStuckAfter is how long a claim session may sit sending its result
	// to a client that does not read it before a claim that waits for its
	// locks ends it (ClaimsStuckTerminate).
	ClaimStuckAfter = runstore.ClaimStuckAfter
	// NoLimit is ConcurrencyLimit.MaxRunning of a type with a per-key limit
	// and no total one.
	NoLimit = runstore.NoLimit
	// DeadlineError is the error recorded on a run that missed its deadline.
	DeadlineError = runstore.DeadlineError
	// IDReuseAllowDuplicate (the default) starts a new run whenever no live
	// run holds the id, whatever the ended ones did.
	IDReuseAllowDuplicate = runstore.IDReuseAllowDuplicate
	// IDReuseFailedOnly starts a new run only if the last run that held the id
	// (and ended within the window) ended FAILED or CANCELLED; one that
	// COMPLETED refuses the start with an *IDReuseError.
	IDReuseFailedOnly = runstore.IDReuseFailedOnly
	// IDReuseReject refuses the start with an *IDReuseError if any run that
	// held the id ended within the window (0: ever, as long as retention keeps
	// it).
	IDReuseReject = runstore.IDReuseReject
	// IDReuseTerminate terminates the live run holding the id, if any (as
	// RunsTerminate, with the reason naming the new run), and starts the new
	// run, in one transaction.
	IDReuseTerminate = runstore.IDReuseTerminate
	// MaxIDReuseWindow is the longest RunsCreateParams.IDReuseWindow: no run
	// is kept longer (MaxKeep), so a longer window would count nothing more.
	MaxIDReuseWindow = runstore.MaxIDReuseWindow
)

var (
	// ErrIDReused is wrapped by the *IDReuseError of a start its id reuse
	// policy refused; it wraps ErrConflict.
	ErrIDReused = runstore.ErrIDReused
)
