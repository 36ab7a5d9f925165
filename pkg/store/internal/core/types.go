package core

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/kagzitype"
	"github.com/kagzi/kagzi/pkg/retry"
)

// The row types the client hands to applications are kagzitype's, written
// once there; the store names them too, so its code and its callers read
// store.Run as before.
type (
	// RunStatus is the state of a workflow run or schedule template.
	RunStatus = kagzitype.RunStatus
	// Run is a workflow run or a schedule template (Status SCHEDULED or
	// PAUSED). Input and Output are filled by the methods that say so
	// (RunsGet, RunsClaim); list methods leave them nil.
	Run = kagzitype.Run
	// Pause is who paused a run, a queue or a type, why and when.
	Pause = kagzitype.Pause
	// ParentClosePolicy says what happens to a live child run when its
	// parent reaches a terminal status.
	ParentClosePolicy = kagzitype.ParentClosePolicy
	// Schedule is a cron schedule: a template row of workflow_runs that
	// fires runs of its type with its input.
	Schedule = kagzitype.Schedule
	// OverlapPolicy says what a schedule does when a fire time comes while
	// a run it started (an instance) is still live.
	OverlapPolicy = kagzitype.OverlapPolicy
	// ForkRef is one fork of a run.
	ForkRef = kagzitype.ForkRef
)

// Run statuses. SCHEDULED and PAUSED belong to schedule templates only.
const (
	StatusPending   = kagzitype.StatusPending
	StatusRunning   = kagzitype.StatusRunning
	StatusSleeping  = kagzitype.StatusSleeping
	StatusCompleted = kagzitype.StatusCompleted
	StatusFailed    = kagzitype.StatusFailed
	StatusCancelled = kagzitype.StatusCancelled
	StatusScheduled = kagzitype.StatusScheduled
	StatusPaused    = kagzitype.StatusPaused
)

// Parent-close policies.
const (
	// ParentCloseTerminate ends the child at once (the default).
	ParentCloseTerminate = kagzitype.ParentCloseTerminate
	// ParentCloseRequestCancel asks the child to cancel (RunsCancel).
	ParentCloseRequestCancel = kagzitype.ParentCloseRequestCancel
	// ParentCloseAbandon leaves the child running.
	ParentCloseAbandon = kagzitype.ParentCloseAbandon
)

// The overlap policies. The empty policy is OverlapAllowAll, what every
// schedule did before policies existed.
const (
	// OverlapAllowAll starts every fire, however many instances are live.
	OverlapAllowAll = kagzitype.OverlapAllowAll
	// OverlapSkip starts nothing while an instance is live.
	OverlapSkip = kagzitype.OverlapSkip
	// OverlapBufferOne holds one fire while an instance is live and starts
	// it when the last live instance ends; later fires while one is held
	// are dropped.
	OverlapBufferOne = kagzitype.OverlapBufferOne
	// OverlapCancelOther asks the live instances to cancel (RunsCancel)
	// and starts the new run at once.
	OverlapCancelOther = kagzitype.OverlapCancelOther
	// OverlapTerminateOther terminates the live instances (RunsTerminate)
	// and starts the new run.
	OverlapTerminateOther = kagzitype.OverlapTerminateOther
)

// OverlapColumn is a policy as stored: NULL for allow-all.
func OverlapColumn(p OverlapPolicy) *string {
	if p == "" || p == OverlapAllowAll {
		return nil
	}
	s := string(p)
	return &s
}

// TypeVersion names a workflow type at a version, as a worker registers it.
type TypeVersion struct {
	Type    string `json:"type"`
	Version string `json:"version"`
}

// StepKind is what a step records.
type StepKind string

// Step kinds.
const (
	StepFunction StepKind = "FUNCTION"
	StepSleep    StepKind = "SLEEP"
	StepEvent    StepKind = "EVENT"
	StepChild    StepKind = "CHILD"
)

// Valid reports whether k is a known step kind.
func (k StepKind) Valid() bool {
	switch k {
	case StepFunction, StepSleep, StepEvent, StepChild:
		return true
	}
	return false
}

// StepStatus is the state of one step attempt.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "PENDING"
	StepRunning   StepStatus = "RUNNING"
	StepCompleted StepStatus = "COMPLETED"
	StepFailed    StepStatus = "FAILED"
)

// Step is one attempt of one step of a run.
type Step struct {
	RunID      uuid.UUID
	StepID     string
	Attempt    int
	Namespace  string
	Kind       StepKind
	Status     StepStatus
	IsLatest   bool
	Input      []byte
	Output     []byte
	Error      string
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	RetryAt    *time.Time
	ChildRunID *uuid.UUID
	// RunAttempt is the run attempt that made this step attempt (0 when it
	// belongs to an earlier retry epoch: see RunsRetry).
	RunAttempt int
	// ErrorType names the kind of error of a failed attempt.
	ErrorType string
	// NonRetryable: the failed attempt's error was marked non-retryable.
	NonRetryable bool
}

// Span is when the attempt began (StartedAt, else CreatedAt) and when it
// ends (nil while it runs). A sleep's row is written when the sleep
// starts, with FinishedAt at its start and its wake time as its output,
// so a sleep ends at its wake time, which may be ahead: read
// FinishedAt, it would show every sleep as taking no time and its time
// as the next step's wait.
func (s Step) Span() (began time.Time, ended *time.Time) {
	began = s.CreatedAt
	if s.StartedAt != nil {
		began = *s.StartedAt
	}
	if s.Kind == StepSleep && s.Status == StepCompleted {
		var wake time.Time
		if json.Unmarshal(s.Output, &wake) == nil && wake.After(began) {
			return began, &wake
		}
	}
	return began, s.FinishedAt
}

// StepState is the latest attempt of a step as delivered with a claimed
// run: enough for replay without a round trip per step.
type StepState struct {
	StepID    string
	Status    StepStatus
	Attempt   int
	Output    []byte
	Error     string
	ErrorType string
	// RetryAt is, for a failed attempt, when it is tried again (nil: the
	// failure is final); for a wait in progress (an EVENT step), when the
	// wait times out (nil: never).
	RetryAt *time.Time
	// RunAttempt is the run attempt that made this attempt (0: an earlier
	// retry epoch, see RunsRetry).
	RunAttempt int
	// Tries is, for a failed attempt, how many attempts of the step were
	// made in run attempt RunAttempt: the part of the step's retry budget
	// used so far.
	Tries int
	// OutputSize is set, and Output nil, when the output is larger than
	// the claim returns inline (RunsClaimParams.InlineBytes).
	OutputSize int
	// NonRetryable: the failed attempt's error was marked non-retryable.
	NonRetryable bool
	// RetryOverride is, for a failed attempt, the latest new retry options
	// the step was given in run attempt RunAttempt (RunsRetryStepNow): the
	// fields set replace the code's policy (nil: none).
	RetryOverride *retry.Policy
}

// ClaimedRun is a run handed to a worker by RunsClaim.
type ClaimedRun struct {
	Run
	// DueAt is when the run became claimable (its available_at before the
	// claim): dispatch latency is measured from it.
	DueAt time.Time
	// Steps are the latest attempts of the run's steps, by step id.
	Steps []StepState
	// InputSize is set, and Input nil, when the input is larger than the
	// claim returns inline (RunsClaimParams.InlineBytes).
	InputSize int
	// EventSeq is the run's event count as claimed: an event stored while
	// the run is RUNNING is counted and stamped with the new count, so the
	// events stamped after EventSeq arrived during this execution. Its end
	// names it (EventsSeen.Seq).
	EventSeq int64
}
