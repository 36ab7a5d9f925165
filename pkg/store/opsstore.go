package store

// The names below are defined in package opsstore; they are named here
// so that this package's code and its callers use them as their own.

import (
	"time"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
	"github.com/kagzi/kagzi/pkg/store/internal/opsstore"
)

type (
	// RunsSearchParams filter and page the console's run search.
	RunsSearchParams = opsstore.RunsSearchParams
	// DeadLetterGroup is a set of failed runs of one type with errors of one
	// shape (digits, hex ids and quoted values masked).
	DeadLetterGroup = opsstore.DeadLetterGroup
	// QueueTypeStats are the live runs of one workflow type in one queue.
	QueueTypeStats = opsstore.QueueTypeStats
	// LiveRun is a live run's status and queue (RunsLiveStatuses).
	LiveRun = opsstore.LiveRun
	// RunsListParams filter and page a listing of runs.
	RunsListParams = opsstore.RunsListParams
	// AttributeKind is the kind of a search attribute: keyword (which may
	// hold a list of values), text, int, float, bool or time.
	AttributeKind = opsstore.AttributeKind
	// Attribute is a declared search attribute.
	Attribute = opsstore.Attribute
	// CountGroup is the count of the runs whose group-by field has Value
	// (nil: runs whose built-in field is empty; runs without an attribute
	// form no group).
	CountGroup = opsstore.CountGroup
	// DefaultVersion is the version a start without a version gets for one
	// workflow type of a namespace (set by the operator).
	DefaultVersion = opsstore.DefaultVersion
	// RunsInsertFinishedParams describe the finished history
	// RunsInsertFinished makes.
	RunsInsertFinishedParams = opsstore.RunsInsertFinishedParams
	// ScheduleFire is one run a schedule fired.
	ScheduleFire = opsstore.ScheduleFire
	// NotificationKind is the "k" field of a notification.
	NotificationKind = opsstore.NotificationKind
	// FinishedRun is one entry of a NotifyDone notification.
	FinishedRun = opsstore.FinishedRun
	// Notification is a decoded trigger payload.
	Notification = opsstore.Notification
	// StateValue is the latest value of one state key of a run.
	StateValue = opsstore.StateValue
	// StepsStateParams selects the state of a run: one key, or every key.
	StepsStateParams = opsstore.StepsStateParams
	// StateRead is a run's status and its latest state values, read in one
	// snapshot.
	StateRead = opsstore.StateRead
	// StepsStreamParams selects the entries of a run's stream after an index.
	StepsStreamParams = opsstore.StepsStreamParams
	// StreamEntry is one entry of a stream.
	StreamEntry = opsstore.StreamEntry
	// StreamRead is what one read of a stream found, in one snapshot.
	StreamRead = opsstore.StreamRead
	// StreamInfo sums up one stream of a run.
	StreamInfo = opsstore.StreamInfo
	// RetentionPolicy is one row of kagzi.retention: how long the finished
	// runs of a namespace, or of one workflow type in it, are kept.
	RetentionPolicy = opsstore.RetentionPolicy
	// Retention is the periods that apply to the finished runs of one
	// namespace or workflow type, inheritance resolved (zero: kept for ever).
	Retention = opsstore.Retention
	// RetentionSetParams change one retention policy.
	RetentionSetParams = opsstore.RetentionSetParams
	// RunsExpiry is what RunsNextExpiry found.
	RunsExpiry = opsstore.RunsExpiry
	// RunsDeleteExpiredParams bound one batch of RunsDeleteExpired.
	RunsDeleteExpiredParams = opsstore.RunsDeleteExpiredParams
	// Orphans counts the rows of the tables that belong to runs (step_runs,
	// workflow_events) whose run does not exist.
	Orphans = opsstore.Orphans
	// FanOutFailure is what PublishedEventsFanOutFailed recorded.
	FanOutFailure = opsstore.FanOutFailure
	// RunsForkParams ask for a fork of one run.
	RunsForkParams = opsstore.RunsForkParams
	// Fork is a fork of a run, as RunsFork and RunsForkMany return it.
	Fork = opsstore.Fork
	// PublishedEvent is a published event and the runs it started.
	PublishedEvent = opsstore.PublishedEvent
	// TriggerFiring is a run a trigger started for an event.
	TriggerFiring = opsstore.TriggerFiring
	// PublishedEventsListParams select a page of published events.
	PublishedEventsListParams = opsstore.PublishedEventsListParams
	// ForkLinks are a run's links to the run it was forked from and to its own
	// forks.
	ForkLinks = opsstore.ForkLinks
	// RunsForkManyParams select the runs RunsForkMany forks and say from
	// where.
	RunsForkManyParams = opsstore.RunsForkManyParams
	// RunsForkManyResult reports a RunsForkMany.
	RunsForkManyResult = opsstore.RunsForkManyResult
	// WorkerStatus is the liveness of a worker.
	WorkerStatus = opsstore.WorkerStatus
	// Worker is a registered worker process.
	Worker = opsstore.Worker
	// WorkersRegisterParams describe a worker announcing itself.
	WorkersRegisterParams = opsstore.WorkersRegisterParams
	// WorkerBeat is one heartbeat to persist.
	WorkerBeat = opsstore.WorkerBeat
	// WorkersListParams filter WorkersList.
	WorkersListParams = opsstore.WorkersListParams
)

const (
	// DefaultPageSize is the page size when none is given (0).
	DefaultPageSize = opsstore.DefaultPageSize
	// MaxPageSize bounds one page: what one statement reads and one answer
	// carries.
	MaxPageSize = opsstore.MaxPageSize
	// DeadLetterScan bounds how many of the newest failed runs the dead-letter
	// view groups and a bulk retry walks: the failed-runs index is read in
	// that order, so the cost is bounded too.
	DeadLetterScan = opsstore.DeadLetterScan
	// NotifyChannel is the one channel the triggers notify on (migration 002).
	NotifyChannel = opsstore.NotifyChannel
	// runs of a queue claimable at At
	NotifyReady = opsstore.NotifyReady
	// runs reached a terminal status
	NotifyDone = opsstore.NotifyDone
	// a running run was terminated or asked to cancel
	NotifyCancel = opsstore.NotifyCancel
	// a schedule template changed
	NotifySchedule = opsstore.NotifySchedule
	// a run recorded a progress step (protocol.ProgressPrefixes)
	NotifyProgress    = opsstore.NotifyProgress
	NotifyBatch       = opsstore.NotifyBatch
	NotifyEvent       = opsstore.NotifyEvent
	DefaultStreamRead = opsstore.DefaultStreamRead
	MaxStreamRead     = opsstore.MaxStreamRead
	// DefaultKeepCompleted keeps COMPLETED and CANCELLED runs for a week: the
	// history an operator looks back at when something went wrong (last
	// Monday's batch, the previous run of a weekly job).
	DefaultKeepCompleted = opsstore.DefaultKeepCompleted
	// DefaultKeepFailed keeps FAILED runs, the dead letters, for 30 days:
	// someone must look at each and may retry it, which can wait for a holiday
	// or a month-end.
	DefaultKeepFailed = opsstore.DefaultKeepFailed
	// DefaultKeepEvents and MinKeepEvents bound the retention of published
	// events (with their firings and webhook deliveries) and of used or
	// expired wait tokens (KAGZI_EVENT_RETENTION).
	DefaultKeepEvents = opsstore.DefaultKeepEvents
	MinKeepEvents     = opsstore.MinKeepEvents
	// MaxFanOutAttempts is how many failed fan-outs give an event up.
	MaxFanOutAttempts = opsstore.MaxFanOutAttempts
	// DefaultDeleteBatch runs a batch: with their steps, payloads and events
	// some thousands of rows, a transaction of about a tenth of a second.
	DefaultDeleteBatch = opsstore.DefaultDeleteBatch
	// MaxDeleteBatch bounds what one transaction locks, writes to the WAL and
	// holds back from vacuum.
	MaxDeleteBatch     = opsstore.MaxDeleteBatch
	MaxForkMany        = opsstore.MaxForkMany
	DefaultForkMany    = opsstore.DefaultForkMany
	WorkerOnline       = opsstore.WorkerOnline
	WorkerDraining     = opsstore.WorkerDraining
	WorkerOffline      = opsstore.WorkerOffline
	DefaultWorkersPage = opsstore.DefaultWorkersPage
	MaxWorkersPage     = opsstore.MaxWorkersPage
)

// ParseNotification decodes a trigger payload, rejecting malformed ones
// with ErrInvalidArgument.
func ParseNotification(payload string) (Notification, error) {
	return opsstore.ParseNotification(payload)
}

// CheckKeepEvents checks the retention of the ways in: 0 (keep for ever)
// or MinKeepEvents to MaxKeep (ErrInvalidArgument).
func CheckKeepEvents(d time.Duration) error { return opsstore.CheckKeepEvents(d) }

// RetentionFor resolves the periods of workflow type typ in namespace (typ
// "": of the namespace's types without a policy of their own) from
// policies, as RetentionList returns them; RunsDeleteExpired resolves them
// the same way in SQL.
func RetentionFor(policies []RetentionPolicy, namespace, typ string) Retention {
	return opsstore.RetentionFor(policies, namespace, typ)
}

// The kinds of a search attribute.
const (
	AttributeKeyword = filter.Keyword
	AttributeText    = filter.Text
	AttributeInt     = filter.Int
	AttributeFloat   = filter.Float
	AttributeBool    = filter.Bool
	AttributeTime    = filter.Time
)

// The bounds of search attributes and queries.
const (
	// MaxAttributesDeclared is the most attributes a namespace declares.
	MaxAttributesDeclared = core.MaxAttributesDeclared
	// MaxRunAttributes is the most attributes one run sets.
	MaxRunAttributes = core.MaxRunAttributes
	// QueryTimeout bounds one listing or count by a query.
	QueryTimeout = opsstore.QueryTimeout
	// MaxCountGroups is the most groups a grouped count returns.
	MaxCountGroups = opsstore.MaxCountGroups
	// MaxAttributeCountsFold is the most deltas one AttributeCountsFold
	// folds.
	MaxAttributeCountsFold = opsstore.MaxAttributeCountsFold
)

type (
	// BatchAction is what a batch does to each of its runs.
	BatchAction = opsstore.BatchAction
	// BatchState is where a batch is in its life.
	BatchState = opsstore.BatchState
	// BatchCreateParams describe a batch to create.
	BatchCreateParams = opsstore.BatchCreateParams
	// Batch is a batch operation and its progress.
	Batch = opsstore.Batch
	// BatchRun is one run of a batch and its outcome.
	BatchRun = opsstore.BatchRun
	// BatchOutcome is the outcome of a batch's action on one run.
	BatchOutcome = opsstore.BatchOutcome
)

// The batch actions and states.
const (
	BatchCancel    = opsstore.BatchCancel
	BatchTerminate = opsstore.BatchTerminate
	BatchSignal    = opsstore.BatchSignal
	BatchUpdate    = opsstore.BatchUpdate
	BatchPause     = opsstore.BatchPause
	BatchResume    = opsstore.BatchResume
	BatchRetry     = opsstore.BatchRetry
	BatchFork      = opsstore.BatchFork

	BatchSetAttributes    = opsstore.BatchSetAttributes
	BatchRemoveAttributes = opsstore.BatchRemoveAttributes
	BatchDelete           = opsstore.BatchDelete

	BatchRunning   = opsstore.BatchRunning
	BatchPaused    = opsstore.BatchPaused
	BatchCancelled = opsstore.BatchCancelled
	BatchCompleted = opsstore.BatchCompleted
)

// The bounds of batches.
const (
	// MaxBatchRuns is the most runs one batch acts on.
	MaxBatchRuns = opsstore.MaxBatchRuns
	// MaxBatchIDs is the most run ids a batch may list.
	MaxBatchIDs = opsstore.MaxBatchIDs
	// MaxBatchRate caps a batch's rate, in runs per second.
	MaxBatchRate = opsstore.MaxBatchRate
	// DefaultBatchRate is a batch's rate when none is given.
	DefaultBatchRate = opsstore.DefaultBatchRate
	// MaxBatchList is the most batches or batch runs one listing returns.
	MaxBatchList = opsstore.MaxBatchList
)

// BatchActions lists the batch actions.
var BatchActions = opsstore.BatchActions
