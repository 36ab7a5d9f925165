package store

// Code below names what opsstore defines, so this package's code and its
// callers use it as their own.

import "github.com/kagzi/kagzi/pkg/store/internal/opsstore"

type (
	RunsSearchParams         = opsstore.RunsSearchParams
	DeadLetterGroup          = opsstore.DeadLetterGroup
	QueueTypeStats           = opsstore.QueueTypeStats
	RunsListParams           = opsstore.RunsListParams
	DefaultVersion           = opsstore.DefaultVersion
	RunsInsertFinishedParams = opsstore.RunsInsertFinishedParams
	ScheduleFire             = opsstore.ScheduleFire
	NotificationKind         = opsstore.NotificationKind
	FinishedRun              = opsstore.FinishedRun
	Notification             = opsstore.Notification
	StateValue               = opsstore.StateValue
	StepsStateParams         = opsstore.StepsStateParams
	StateRead                = opsstore.StateRead
	StepsStreamParams        = opsstore.StepsStreamParams
	StreamEntry              = opsstore.StreamEntry
	StreamRead               = opsstore.StreamRead
	StreamInfo               = opsstore.StreamInfo
	RetentionPolicy          = opsstore.RetentionPolicy
	Retention                = opsstore.Retention
	RetentionSetParams       = opsstore.RetentionSetParams
	RunsExpiry               = opsstore.RunsExpiry
	RunsDeleteExpiredParams  = opsstore.RunsDeleteExpiredParams
	Orphans                  = opsstore.Orphans
	RunsForkParams           = opsstore.RunsForkParams
	Fork                     = opsstore.Fork
	ForkLinks                = opsstore.ForkLinks
	RunsForkManyParams       = opsstore.RunsForkManyParams
	RunsForkManyResult       = opsstore.RunsForkManyResult
	WorkerStatus             = opsstore.WorkerStatus
	Worker                   = opsstore.Worker
	WorkersRegisterParams    = opsstore.WorkersRegisterParams
	WorkerBeat               = opsstore.WorkerBeat
	WorkersListParams        = opsstore.WorkersListParams
)

const (
	DefaultPageSize      = opsstore.DefaultPageSize
	MaxPageSize          = opsstore.MaxPageSize
	DeadLetterScan       = opsstore.DeadLetterScan
	NotifyChannel        = opsstore.NotifyChannel
	NotifyReady          = opsstore.NotifyReady
	NotifyDone           = opsstore.NotifyDone
	NotifyCancel         = opsstore.NotifyCancel
	NotifySchedule       = opsstore.NotifySchedule
	NotifyProgress       = opsstore.NotifyProgress
	DefaultStreamRead    = opsstore.DefaultStreamRead
	MaxStreamRead        = opsstore.MaxStreamRead
	DefaultKeepCompleted = opsstore.DefaultKeepCompleted
	DefaultKeepFailed    = opsstore.DefaultKeepFailed
	DefaultDeleteBatch   = opsstore.DefaultDeleteBatch
	MaxDeleteBatch       = opsstore.MaxDeleteBatch
	MaxForkMany          = opsstore.MaxForkMany
	DefaultForkMany      = opsstore.DefaultForkMany
	WorkerOnline         = opsstore.WorkerOnline
	WorkerDraining       = opsstore.WorkerDraining
	WorkerOffline        = opsstore.WorkerOffline
	DefaultWorkersPage   = opsstore.DefaultWorkersPage
	MaxWorkersPage       = opsstore.MaxWorkersPage
)

func pageLimit(limit int) (int, error) { return opsstore.PageLimit(limit) }

// ParseNotification is opsstore.ParseNotification.
func ParseNotification(payload string) (Notification, error) {
	return opsstore.ParseNotification(payload)
}

// RetentionFor is opsstore.RetentionFor.
func RetentionFor(policies []RetentionPolicy, namespace, typ string) Retention {
	return opsstore.RetentionFor(policies, namespace, typ)
}
