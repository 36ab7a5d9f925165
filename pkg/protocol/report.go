package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// ReportKind says what a report item records.
type ReportKind string

// Report kinds.
const (
	// ReportStepCompleted and ReportStepFailed record one attempt of a step.
	ReportStepCompleted ReportKind = "step_completed"
	ReportStepFailed    ReportKind = "step_failed"
	// ReportRunCompleted ends the run with Output.
	ReportRunCompleted ReportKind = "run_completed"
	// ReportRunFailed ends the attempt with Error; the dispatcher retries it
	// under the run's policy unless NonRetryable or attempts are exhausted.
	ReportRunFailed ReportKind = "run_failed"
	// ReportRunSleep suspends the run until Until (nil: until woken). With
	// Steps it also waits for those CHILD steps (woken when all finished);
	// with Events it also honours the run's waits for events in progress
	// (recorded by event_wait items without Suspend).
	ReportRunSleep ReportKind = "run_sleep"
	// ReportRunRelease gives the run back unstarted (e.g. on drain).
	ReportRunRelease ReportKind = "run_release"
	// ReportEventWait is a WaitForEvent: the EVENT step StepID, attempt
	// Attempt, waits for an event named Name, timing out at Until (nil:
	// never; a wait in progress keeps its first timeout). The engine
	// consumes an event if one is there (the result carries its payload as
	// Output), times the wait out if Until passed (neither Output nor
	// Waiting), or records the wait and answers Waiting — suspending the
	// run too when Suspend is set.
	ReportEventWait ReportKind = "event_wait"
	// ReportChildStart starts the child run Child as the CHILD step StepID,
	// attempt Attempt. The child's id is ChildRunID(run, StepID, Attempt).
	ReportChildStart ReportKind = "child_start"
	// ReportRunContinue ends the run COMPLETED without output and starts,
	// atomically, a fresh run of the same type, queue and external id with
	// Output as its input and an empty history: ContinuedRunID(RunID).
	ReportRunContinue ReportKind = "run_continue"
	// ReportEventDrain is a DrainEvents: the EVENT step StepID (attempt 1)
	// takes every unconsumed event named Name, without waiting. The result
	// carries, as Output (or OutputSize), the JSON array of the payloads of
	// every event the step holds — those it took before and now — and
	// neither when it holds none (nothing is recorded then).
	ReportEventDrain ReportKind = "event_drain"
	// ReportAttributesSet is a workflow.SetAttributes: the FUNCTION step
	// StepID (AttributesStepID, attempt 1) sets the run's search
	// attributes from Output, a JSON object of name to value (null removes
	// the attribute). The engine checks them against the namespace's
	// declarations: a set that does not fit is recorded as the step's
	// non-retryable failure (error type AttributesRefused) and answered ok
	// with the reason as the result's Message, so the workflow returns the
	// same error on every execution.
	ReportAttributesSet ReportKind = "attributes_set"
)

// AttributesRefused is the error type of a refused attributes_set step.
const AttributesRefused = "AttributesRefused"

// AttributesPrefix begins the step ids of attributes_set items.
const AttributesPrefix = "attributes#"

// AttributesStepID is the step id of the n-th SetAttributes of a run
// (from 1).
func AttributesStepID(n int) string { return AttributesPrefix + strconv.Itoa(n) }

// ContinuedRunID is the id of the run that run continues as (a run
// continues as new at most once: it ends doing so), derived so that a
// repeated report names the same run.
func ContinuedRunID(run uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(run, []byte("continue-as-new"))
}

// ChildSpec is the child run a child_start item starts.
type ChildSpec struct {
	Type    string `json:"type" kagzi:"1"`
	Version string `json:"version,omitempty" kagzi:"2"`
	// Queue defaults to the parent's.
	Queue       string          `json:"queue,omitempty" kagzi:"3"`
	Input       json.RawMessage `json:"input,omitempty" kagzi:"4"`
	RetryPolicy *retry.Policy   `json:"retry_policy,omitempty" kagzi:"5"`
	Priority    int             `json:"priority,omitempty" kagzi:"6"`
	// ParentClosePolicy is what happens to the child if the parent ends
	// first: TERMINATE (default, ""), REQUEST_CANCEL or ABANDON.
	ParentClosePolicy string `json:"parent_close_policy,omitempty" kagzi:"7"`
}

// ChildRunID is the id of the child run that attempt attempt of step stepID
// of run parent starts: derived (UUID v5), so that a replayed parent that
// starts its child again names the same run.
func ChildRunID(parent uuid.UUID, stepID string, attempt int) uuid.UUID {
	return uuid.NewSHA1(parent, []byte(fmt.Sprintf("%s#%d", stepID, attempt)))
}

// ReportItem is one outcome, made under the lease (RunID, LeaseToken).
type ReportItem struct {
	Kind       ReportKind `json:"kind" kagzi:"1"`
	RunID      uuid.UUID  `json:"run_id" kagzi:"2"`
	LeaseToken int64      `json:"lease" kagzi:"3"`
	// Step fields.
	StepID   string `json:"step_id,omitempty" kagzi:"4"`
	StepKind string `json:"step_kind,omitempty" kagzi:"5"`
	Attempt  int    `json:"attempt,omitempty" kagzi:"6"`
	// Output of a completed step or run (JSON).
	Output json.RawMessage `json:"output,omitempty" kagzi:"7"`
	// Error of a failed step or run; ErrorType names its kind for
	// non-retryable matching.
	Error        string `json:"error,omitempty" kagzi:"8"`
	ErrorType    string `json:"error_type,omitempty" kagzi:"9"`
	NonRetryable bool   `json:"non_retryable,omitempty" kagzi:"10"`
	// Until is the wake time of a sleep or the retry time of a failed step.
	Until      *time.Time `json:"until,omitempty" kagzi:"11"`
	StartedAt  *time.Time `json:"started_at,omitempty" kagzi:"12"`
	FinishedAt *time.Time `json:"finished_at,omitempty" kagzi:"13"`
	// Name is the awaited event's name (event_wait).
	Name string `json:"name,omitempty" kagzi:"14"`
	// Suspend: an event_wait that finds no event suspends the run.
	Suspend bool `json:"suspend,omitempty" kagzi:"15"`
	// Steps are the CHILD steps a run_sleep waits for.
	Steps []string `json:"steps,omitempty" kagzi:"16"`
	// Events: a run_sleep also honours the run's event waits in progress.
	Events bool `json:"events,omitempty" kagzi:"17"`
	// Child is the run a child_start starts.
	Child *ChildSpec `json:"child,omitempty" kagzi:"18"`
	// EventsSeen, on a run_completed or run_continue, is the event count
	// of the delivery (DeliveredRun.EventSeq) and EventNames the event
	// names the execution waited for or drained (at most MaxEventNames;
	// AllEvents instead for more): the engine ends the run only if no
	// event of those names arrived after the delivery unconsumed, and
	// otherwise answers ResultRerun. Absent (an older worker, or an
	// execution that used no event name), the run ends as reported.
	EventsSeen *int64   `json:"events_seen,omitempty" kagzi:"19"`
	EventNames []string `json:"event_names,omitempty" kagzi:"20"`
	AllEvents  bool     `json:"all_events,omitempty" kagzi:"21"`
}

// ValidEventName reports an error unless s can name an event: 1 to
// MaxNameLen bytes of printable UTF-8 without spaces, '*', '>' or '@'.
func ValidEventName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("event name %q must be 1 to %d bytes", Echo(s), MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("event name %q is not valid UTF-8", Echo(s))
	}
	for _, r := range s {
		if r <= ' ' || !unicode.IsPrint(r) || strings.ContainsRune("*>@", r) {
			return fmt.Errorf("event name %q must not contain spaces, control characters or any of * > @", Echo(s))
		}
	}
	return nil
}

// Report carries a worker's outcomes for runs of one namespace.
type Report struct {
	Versioned
	WorkerID  uuid.UUID    `json:"worker_id" kagzi:"1"`
	Namespace string       `json:"ns" kagzi:"2"`
	Items     []ReportItem `json:"items" kagzi:"3"`
}

// Validate implements Message.
func (m *Report) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if len(m.Items) == 0 || len(m.Items) > MaxReportItems {
		return invalid(m, "%d items, want 1 to %d", len(m.Items), MaxReportItems)
	}
	for i := range m.Items {
		it := &m.Items[i]
		if err := checkID(m, "run id", it.RunID); err != nil {
			return err
		}
		if it.LeaseToken < 1 {
			return invalid(m, "item %d: lease %d must be positive", i, it.LeaseToken)
		}
		if err := checkJSON(m, "output", it.Output); err != nil {
			return err
		}
		if err := m.validateItem(i, it); err != nil {
			return err
		}
	}
	return nil
}

func (m *Report) validateItem(i int, it *ReportItem) error {
	checkStep := func() error {
		if it.StepID == "" || len(it.StepID) > MaxNameLen {
			return invalid(m, "item %d: step id must be 1 to %d bytes", i, MaxNameLen)
		}
		if it.Attempt < 1 {
			return invalid(m, "item %d: attempt %d must be positive", i, it.Attempt)
		}
		return nil
	}
	if it.Kind != ReportEventWait && it.Suspend {
		return invalid(m, "item %d: suspend belongs to event_wait items", i)
	}
	if it.Kind != ReportEventWait && it.Kind != ReportEventDrain && it.Name != "" {
		return invalid(m, "item %d: name belongs to event_wait and event_drain items", i)
	}
	if it.Kind != ReportRunCompleted && it.Kind != ReportRunContinue && (it.EventsSeen != nil || len(it.EventNames) > 0 || it.AllEvents) {
		return invalid(m, "item %d: events seen belong to run_completed and run_continue items", i)
	}
	if it.Kind != ReportRunSleep && (len(it.Steps) > 0 || it.Events) {
		return invalid(m, "item %d: steps and events belong to run_sleep items", i)
	}
	if it.Kind != ReportChildStart && it.Child != nil {
		return invalid(m, "item %d: child belongs to child_start items", i)
	}
	switch it.Kind {
	case ReportStepCompleted, ReportStepFailed:
		if err := checkStep(); err != nil {
			return err
		}
		switch it.StepKind {
		case "", "FUNCTION", "SLEEP", "EVENT", "CHILD":
		default:
			return invalid(m, "item %d: unknown step kind %q", i, it.StepKind)
		}
	case ReportAttributesSet:
		if err := checkStep(); err != nil {
			return err
		}
		if !strings.HasPrefix(it.StepID, AttributesPrefix) {
			return invalid(m, "item %d: an attributes_set step id begins with %q", i, AttributesPrefix)
		}
		if t := bytes.TrimSpace(it.Output); len(t) < 2 || t[0] != '{' {
			return invalid(m, "item %d: attributes_set output must be a JSON object", i)
		}
	case ReportWaitTokenMint:
		if err := checkStep(); err != nil {
			return err
		}
		if !strings.HasPrefix(it.StepID, WaitTokenPrefix) || it.Attempt != 1 {
			return invalid(m, "item %d: a wait_token_mint step id begins with %q, attempt 1", i, WaitTokenPrefix)
		}
		if it.Until == nil {
			return invalid(m, "item %d: wait_token_mint without an expiry (until)", i)
		}
	case ReportEventWait, ReportEventDrain:
		if err := checkStep(); err != nil {
			return err
		}
		if err := ValidEventName(it.Name); err != nil {
			return invalid(m, "item %d: %v", i, err)
		}
	case ReportChildStart:
		if err := checkStep(); err != nil {
			return err
		}
		c := it.Child
		if c == nil {
			return invalid(m, "item %d: child_start without a child", i)
		}
		if err := checkToken(m, "child workflow type", c.Type); err != nil {
			return err
		}
		if err := checkName(m, "child version", c.Version, false); err != nil {
			return err
		}
		if err := checkName(m, "child queue", c.Queue, false); err != nil {
			return err
		}
		if err := checkJSON(m, "child input", c.Input); err != nil {
			return err
		}
		if c.RetryPolicy != nil {
			if err := c.RetryPolicy.Validate(); err != nil {
				return invalid(m, "item %d: %v", i, err)
			}
		}
		switch c.ParentClosePolicy {
		case "", "TERMINATE", "REQUEST_CANCEL", "ABANDON":
		default:
			return invalid(m, "item %d: unknown parent-close policy %q", i, c.ParentClosePolicy)
		}
	case ReportRunSleep:
		if len(it.Steps) > MaxReportItems {
			return invalid(m, "item %d: %d steps, at most %d", i, len(it.Steps), MaxReportItems)
		}
		for _, s := range it.Steps {
			if s == "" || len(s) > MaxNameLen {
				return invalid(m, "item %d: step id must be 1 to %d bytes", i, MaxNameLen)
			}
		}
	case ReportRunCompleted, ReportRunContinue:
		if it.EventsSeen != nil && *it.EventsSeen < 0 {
			return invalid(m, "item %d: events seen %d must not be negative", i, *it.EventsSeen)
		}
		if len(it.EventNames) > MaxEventNames {
			return invalid(m, "item %d: %d event names, at most %d", i, len(it.EventNames), MaxEventNames)
		}
		for _, n := range it.EventNames {
			if err := ValidEventName(n); err != nil {
				return invalid(m, "item %d: %v", i, err)
			}
		}
	case ReportRunFailed, ReportRunRelease:
	default:
		return invalid(m, "item %d: unknown kind %q", i, it.Kind)
	}
	return nil
}

// ResultCode classifies the outcome of one report item.
type ResultCode string

// Result codes.
const (
	ResultOK ResultCode = "ok"
	// ResultLeaseLost: the lease is no longer current; abandon the run.
	ResultLeaseLost ResultCode = "lease_lost"
	// ResultInvalid: the item was malformed or refused; do not retry it.
	ResultInvalid ResultCode = "invalid"
	// ResultError: a transient failure; the item may be retried.
	ResultError ResultCode = "error"
	// ResultRerun: the run's end (run_completed or run_continue with
	// EventsSeen) was refused because events of a name the execution
	// waited for or drained arrived after its delivery; the run is
	// claimable again at once, to execute with them, and no attempt is
	// counted. Abandon this execution: its lease is gone. Only a worker
	// that sent EventsSeen gets it.
	ResultRerun ResultCode = "rerun"
)

// ReportResult is the outcome of one item.
type ReportResult struct {
	Code    ResultCode `json:"code" kagzi:"1"`
	Message string     `json:"message,omitempty" kagzi:"2"`
	// Output is what an item asked for: the payload of the event an
	// event_wait received, the payloads an event_drain holds.
	Output json.RawMessage `json:"output,omitempty" kagzi:"3"`
	// Waiting: an event_wait found no event and its wait is recorded.
	Waiting bool `json:"waiting,omitempty" kagzi:"4"`
	// OutputSize is set, instead of Output, when the received event's
	// payload (an event_drain's list) is too large to travel inline: the
	// worker fetches it as the output of the EVENT step that received it
	// (PayloadRequest).
	OutputSize int `json:"output_size,omitempty" kagzi:"5"`
	// CancelRequested: the run was asked to cancel (said with step
	// records, so a worker that missed the pushed notice learns it at the
	// run's next step).
	CancelRequested bool `json:"cancel_requested,omitempty" kagzi:"6"`
}

// ReportReply answers a Report with one result per item, in order.
type ReportReply struct {
	Versioned
	Results []ReportResult `json:"results" kagzi:"1"`
}

// Validate implements Message.
func (m *ReportReply) Validate() error {
	for i, r := range m.Results {
		switch r.Code {
		case ResultOK, ResultLeaseLost, ResultInvalid, ResultError, ResultRerun:
		default:
			return invalid(m, "result %d: unknown code %q", i, r.Code)
		}
		if err := checkJSON(m, "result output", r.Output); err != nil {
			return err
		}
		got := len(r.Output) > 0 || r.OutputSize > 0
		if (got || r.Waiting || r.CancelRequested) && r.Code != ResultOK {
			return invalid(m, "result %d: output and waiting belong to ok results", i)
		}
		if (got && r.Waiting) || (len(r.Output) > 0 && r.OutputSize > 0) || r.OutputSize < 0 {
			return invalid(m, "result %d: an output, an output size and waiting exclude each other", i)
		}
	}
	return nil
}
