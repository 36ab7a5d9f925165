package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// ErrInvalid is wrapped by every decoding and validation error: the message
// is malformed and must be counted, logged and dropped.
var ErrInvalid = errors.New("invalid message")

// Message is implemented by every wire type.
type Message interface {
	// Validate reports the first malformed field.
	Validate() error
	setVersion()
	version() int
}

// Versioned is embedded in every message: the protocol version.
type Versioned struct {
	V int `json:"v"`
}

func (v *Versioned) setVersion()  { v.V = Version }
func (v *Versioned) version() int { return v.V }

// Encode validates m, stamps the protocol version and encodes it.
func Encode(m Message) ([]byte, error) {
	m.setVersion()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return json.Marshal(m)
}

// Decode parses data into m strictly: unknown fields, trailing data, a
// wrong version or an invalid field are errors wrapping ErrInvalid. data
// is JSON or, for the messages that have one, the binary form (see
// EncodeAs); the binary form skips fields it does not know.
func Decode(data []byte, m Message) error {
	if EncodingOf(data) == Binary {
		return decodeBinary(data, m)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrInvalid, m, err)
	}
	// dec.More would miss a trailing '}' or ']': only whitespace may follow.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %T: trailing data", ErrInvalid, m)
	}
	if m.version() != Version {
		return fmt.Errorf("%w: %T: protocol version %d, want %d", ErrInvalid, m, m.version(), Version)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	return nil
}

func invalid(m any, format string, args ...any) error {
	return fmt.Errorf("%w: %T: %s", ErrInvalid, m, fmt.Sprintf(format, args...))
}

func checkToken(m any, what, s string) error {
	if err := ValidToken(what, s); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrInvalid, m, err)
	}
	return nil
}

func checkID(m any, what string, id uuid.UUID) error {
	if id == uuid.Nil {
		return invalid(m, "%s is required", what)
	}
	return nil
}

func checkName(m any, what, s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	return checkToken(m, what, s)
}

func checkJSON(m any, what string, raw json.RawMessage) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return invalid(m, "%s is not valid JSON", what)
	}
	return nil
}

// TypeVersion is a workflow type at a version, as a worker registers it.
type TypeVersion struct {
	Type    string `json:"type" kagzi:"1"`
	Version string `json:"version" kagzi:"2"`
}

func checkTypes(m any, tvs []TypeVersion) error {
	if len(tvs) == 0 {
		return invalid(m, "at least one workflow type is required")
	}
	if len(tvs) > MaxTypes {
		return invalid(m, "%d workflow types, at most %d", len(tvs), MaxTypes)
	}
	seen := make(map[string]bool, len(tvs))
	for _, tv := range tvs {
		if err := checkToken(m, "workflow type", tv.Type); err != nil {
			return err
		}
		if err := checkName(m, "version", tv.Version, false); err != nil {
			return err
		}
		if seen[tv.Type+"@"+tv.Version] {
			return invalid(m, "workflow type %q at version %q listed twice", tv.Type, tv.Version)
		}
		seen[tv.Type+"@"+tv.Version] = true
	}
	return nil
}

// Wakeup says runs of a queue are claimable at AvailableAt (now or later).
type Wakeup struct {
	Versioned
	Namespace   string    `json:"ns"`
	Queue       string    `json:"queue"`
	AvailableAt time.Time `json:"at"`
	// NotifiedNS and RelayedNS are when the relay received the NOTIFY and
	// published this wakeup, in unix nanoseconds; set only while the
	// dispatch-hop diagnostic is on (KAGZI_HOPS_DIR), absent otherwise.
	NotifiedNS int64 `json:"notified_ns,omitempty"`
	RelayedNS  int64 `json:"relayed_ns,omitempty"`
}

// Validate implements Message.
func (m *Wakeup) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkToken(m, "queue", m.Queue)
}

// RunFinished says a run reached a terminal status.
type RunFinished struct {
	Versioned
	Namespace string    `json:"ns"`
	RunID     uuid.UUID `json:"run_id"`
	Status    string    `json:"status"`
}

// Validate implements Message.
func (m *RunFinished) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	switch m.Status {
	case "COMPLETED", "FAILED", "CANCELLED":
		return nil
	}
	return invalid(m, "status %q is not terminal", m.Status)
}

// Cancel tells a worker that a run it holds was asked to cancel (its
// workflow context is cancelled; the lease holds, so the workflow may clean
// up and report), or, with Terminate, that it was terminated (the lease is
// void: abandon the run).
type Cancel struct {
	Versioned
	Namespace string    `json:"ns"`
	RunID     uuid.UUID `json:"run_id"`
	WorkerID  uuid.UUID `json:"worker_id"`
	Terminate bool      `json:"terminate,omitempty"`
	// Drain asks the worker itself to drain (as on its Stop: finish or
	// release its runs and deregister); RunID is then empty.
	Drain bool `json:"drain,omitempty"`
}

// Validate implements Message.
func (m *Cancel) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if m.Drain {
		if m.RunID != uuid.Nil || m.Terminate {
			return invalid(m, "a drain names no run")
		}
		return checkID(m, "worker id", m.WorkerID)
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	return checkID(m, "worker id", m.WorkerID)
}

// ScheduleChanged says a schedule template was created, changed or deleted.
type ScheduleChanged struct {
	Versioned
	Namespace  string     `json:"ns"`
	ScheduleID uuid.UUID  `json:"schedule_id"`
	NextAt     *time.Time `json:"next_at,omitempty"`
}

// Validate implements Message.
func (m *ScheduleChanged) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	return checkID(m, "schedule id", m.ScheduleID)
}

// RelayUp announces that a relay started listening.
type RelayUp struct {
	Versioned
	RelayID string    `json:"relay_id"`
	At      time.Time `json:"at"`
}

// Validate implements Message.
func (m *RelayUp) Validate() error {
	if m.RelayID == "" || len(m.RelayID) > MaxNameLen {
		return invalid(m, "relay id must be 1 to %d bytes", MaxNameLen)
	}
	return nil
}

// WorkRequest offers a dispatcher Credits free slots of a worker for runs
// of the given types in one queue. The worker sends it with its delivery
// inbox as the reply subject; a dispatcher parks it until work is due or
// Wait passes, then delivers with a request of its own to that inbox.
type WorkRequest struct {
	Versioned
	WorkerID  uuid.UUID     `json:"worker_id" kagzi:"1"`
	Namespace string        `json:"ns" kagzi:"2"`
	Queue     string        `json:"queue" kagzi:"3"`
	Credits   int           `json:"credits" kagzi:"4"`
	Types     []TypeVersion `json:"types" kagzi:"5"`
	// Seq numbers the worker's requests; a delivery for an older Seq is
	// refused, so a request that outlived its worker's patience cannot
	// overfill the worker.
	Seq uint64 `json:"seq" kagzi:"6"`
	// WaitMS is how long the request may stay parked.
	WaitMS int64 `json:"wait_ms" kagzi:"7"`
}

// Validate implements Message.
func (m *WorkRequest) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkToken(m, "queue", m.Queue); err != nil {
		return err
	}
	if m.Credits < 1 || m.Credits > MaxCredits {
		return invalid(m, "credits %d must be 1 to %d", m.Credits, MaxCredits)
	}
	if m.WaitMS < 0 || m.WaitMS > int64(10*time.Minute/time.Millisecond) {
		return invalid(m, "wait %d ms must be 0 to 600000", m.WaitMS)
	}
	return checkTypes(m, m.Types)
}

// StepState is the latest attempt of a step, delivered with a run so the
// workflow replays without a round trip per step.
type StepState struct {
	StepID    string          `json:"step_id" kagzi:"1"`
	Status    string          `json:"status" kagzi:"2"`
	Attempt   int             `json:"attempt" kagzi:"3"`
	Output    json.RawMessage `json:"output,omitempty" kagzi:"4"`
	Error     string          `json:"error,omitempty" kagzi:"5"`
	ErrorType string          `json:"error_type,omitempty" kagzi:"6"`
	// RetryAt is, for a FAILED attempt, when it is tried again (absent: the
	// failure is final); for a wait in progress (a PENDING EVENT step), when
	// the wait times out.
	RetryAt *time.Time `json:"retry_at,omitempty" kagzi:"7"`
	// RunAttempt is the run attempt that made this step attempt (0: an
	// earlier retry epoch). A failed step of another run attempt than the
	// delivered one gets a fresh retry budget.
	RunAttempt int `json:"run_attempt,omitempty" kagzi:"8"`
	// Tries is, for a FAILED attempt, how many attempts of the step run
	// attempt RunAttempt made: the retry budget used.
	Tries int `json:"tries,omitempty" kagzi:"9"`
	// OutputSize is set, instead of Output, when the output is too large
	// to travel inline: the worker fetches it when the replay needs it
	// (PayloadRequest).
	OutputSize int `json:"output_size,omitempty" kagzi:"10"`
	// NonRetryable: a FAILED attempt's error was marked non-retryable; a
	// replay of the final failure carries the mark.
	NonRetryable bool `json:"non_retryable,omitempty" kagzi:"11"`
}

// DeliveredRun is one claimed run handed to a worker.
type DeliveredRun struct {
	RunID     uuid.UUID `json:"run_id" kagzi:"1"`
	Namespace string    `json:"ns" kagzi:"2"`
	Queue     string    `json:"queue" kagzi:"3"`
	Type      string    `json:"type" kagzi:"4"`
	Version   string    `json:"version" kagzi:"5"`
	// Attempt is the run's retry epoch: it grows when the workflow's
	// failure is retried, not when a lost execution is taken back. Steps'
	// retry budgets and final failures hold within it.
	Attempt    int             `json:"attempt" kagzi:"6"`
	LeaseToken int64           `json:"lease" kagzi:"7"`
	Input      json.RawMessage `json:"input,omitempty" kagzi:"8"`
	Steps      []StepState     `json:"steps,omitempty" kagzi:"9"`
	// TraceParent is the W3C traceparent, in the run's trace, that the
	// execution's attempt span takes as its parent: the dispatch span that
	// delivered it (the run's stored context when the dispatcher traces
	// nothing).
	TraceParent string        `json:"traceparent,omitempty" kagzi:"10"`
	DeadlineAt  *time.Time    `json:"deadline_at,omitempty" kagzi:"11"`
	RetryPolicy *retry.Policy `json:"retry_policy,omitempty" kagzi:"12"`
	// AvailableAt is when the run became due (dispatch latency starts there).
	AvailableAt *time.Time `json:"available_at,omitempty" kagzi:"13"`
	// InputSize is set, instead of Input, when the input is too large to
	// travel inline (see StepState.OutputSize).
	InputSize int `json:"input_size,omitempty" kagzi:"14"`
	// CancelRequestedAt is set when the run was asked to cancel: its
	// workflow context starts cancelled.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty" kagzi:"15"`
	// EventSeq is the run's event count as claimed (absent from an older
	// dispatcher): the run's end names it (ReportItem.EventsSeen), and the
	// engine refuses the end if an event of a name the execution waited
	// for or drained arrived after it and is unconsumed.
	EventSeq *int64 `json:"event_seq,omitempty" kagzi:"16"`
}

// PayloadLimits are the payload limits in force (the database's), told to
// workers with every delivery: an output, child input or run output above
// MaxBytes is refused, one above WarnBytes is logged.
type PayloadLimits struct {
	WarnBytes int `json:"warn_bytes" kagzi:"1"`
	MaxBytes  int `json:"max_bytes" kagzi:"2"`
}

// Delivery carries claimed runs to the worker that asked for them.
type Delivery struct {
	Versioned
	WorkerID uuid.UUID      `json:"worker_id" kagzi:"1"`
	Seq      uint64         `json:"seq" kagzi:"2"`
	Runs     []DeliveredRun `json:"runs" kagzi:"3"`
	// Limits apply to what the worker reports for these runs.
	Limits PayloadLimits `json:"limits" kagzi:"4"`
}

// Validate implements Message.
func (m *Delivery) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if len(m.Runs) == 0 || len(m.Runs) > MaxCredits {
		return invalid(m, "%d runs, want 1 to %d", len(m.Runs), MaxCredits)
	}
	if m.Limits.MaxBytes < 1 || m.Limits.WarnBytes < 1 || m.Limits.WarnBytes > m.Limits.MaxBytes {
		return invalid(m, "payload limits %+v: both positive, warn <= max", m.Limits)
	}
	for i := range m.Runs {
		r := &m.Runs[i]
		if err := checkID(m, "run id", r.RunID); err != nil {
			return err
		}
		if err := checkToken(m, "namespace", r.Namespace); err != nil {
			return err
		}
		if err := checkToken(m, "queue", r.Queue); err != nil {
			return err
		}
		if err := checkToken(m, "workflow type", r.Type); err != nil {
			return err
		}
		if r.Attempt < 1 || r.LeaseToken < 1 {
			return invalid(m, "run %s: attempt %d and lease %d must be positive", r.RunID, r.Attempt, r.LeaseToken)
		}
		if err := checkJSON(m, "input", r.Input); err != nil {
			return err
		}
		if r.InputSize < 0 || (r.InputSize > 0 && len(r.Input) > 0) {
			return invalid(m, "run %s: input size %d with %d input bytes", r.RunID, r.InputSize, len(r.Input))
		}
		if r.RetryPolicy != nil {
			if err := r.RetryPolicy.Validate(); err != nil {
				return invalid(m, "run %s: %v", r.RunID, err)
			}
		}
		if r.EventSeq != nil && *r.EventSeq < 0 {
			return invalid(m, "run %s: event count %d must not be negative", r.RunID, *r.EventSeq)
		}
		for _, s := range r.Steps {
			if s.StepID == "" || s.Attempt < 1 {
				return invalid(m, "run %s: step %q attempt %d", r.RunID, s.StepID, s.Attempt)
			}
			if err := checkJSON(m, "step output", s.Output); err != nil {
				return err
			}
			if s.RunAttempt < 0 || s.Tries < 0 || s.OutputSize < 0 {
				return invalid(m, "run %s: step %q run attempt %d, tries %d and output size %d must not be negative",
					r.RunID, s.StepID, s.RunAttempt, s.Tries, s.OutputSize)
			}
			if s.OutputSize > 0 && len(s.Output) > 0 {
				return invalid(m, "run %s: step %q has an output and an output size", r.RunID, s.StepID)
			}
		}
	}
	return nil
}

// DeliveryAck is the worker's answer to a Delivery: Accepted false means
// the dispatcher must release the runs at once.
type DeliveryAck struct {
	Versioned
	Accepted bool `json:"accepted" kagzi:"1"`
}

// Validate implements Message.
func (m *DeliveryAck) Validate() error { return nil }

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
)

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

// WorkerRegister announces a worker (again, after a restart or after it
// was marked offline).
type WorkerRegister struct {
	Versioned
	WorkerID       uuid.UUID         `json:"worker_id"`
	Namespace      string            `json:"ns"`
	Queue          string            `json:"queue"`
	Hostname       string            `json:"hostname,omitempty"`
	PID            int               `json:"pid,omitempty"`
	Version        string            `json:"version,omitempty"`
	Types          []TypeVersion     `json:"types"`
	MaxConcurrency int               `json:"max_concurrency"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// Validate implements Message.
func (m *WorkerRegister) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkToken(m, "queue", m.Queue); err != nil {
		return err
	}
	if m.MaxConcurrency < 1 || m.MaxConcurrency > MaxCredits {
		return invalid(m, "max concurrency %d must be 1 to %d", m.MaxConcurrency, MaxCredits)
	}
	if err := ValidWorkerIdentity(m.Hostname, m.Version, m.Labels); err != nil {
		return invalid(m, "%v", err)
	}
	return checkTypes(m, m.Types)
}

// Heartbeat says a worker is alive and lists the runs it holds.
type Heartbeat struct {
	Versioned
	WorkerID  uuid.UUID   `json:"worker_id"`
	Namespace string      `json:"ns"`
	Queue     string      `json:"queue"`
	Runs      []uuid.UUID `json:"runs,omitempty"`
	Draining  bool        `json:"draining,omitempty"`
	SentAt    time.Time   `json:"sent_at"`
}

// Validate implements Message.
func (m *Heartbeat) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkToken(m, "queue", m.Queue); err != nil {
		return err
	}
	if len(m.Runs) > MaxCredits {
		return invalid(m, "%d runs, at most %d", len(m.Runs), MaxCredits)
	}
	if m.SentAt.IsZero() {
		return invalid(m, "sent_at is required")
	}
	return nil
}

// WorkerDeregister says a worker stopped cleanly.
type WorkerDeregister struct {
	Versioned
	WorkerID  uuid.UUID `json:"worker_id"`
	Namespace string    `json:"ns"`
}

// Validate implements Message.
func (m *WorkerDeregister) Validate() error {
	if err := checkID(m, "worker id", m.WorkerID); err != nil {
		return err
	}
	return checkToken(m, "namespace", m.Namespace)
}

// PayloadRequest asks a dispatcher, under the run's lease, for a part of a
// payload the delivery did not carry inline: the run's input (StepID
// empty) or the output of attempt Attempt of step StepID. Large histories
// stay deliverable this way: a delivery carries every step but only the
// small outputs, and the worker reads the others, in chunks that fit a
// NATS message, when the replay reaches them.
type PayloadRequest struct {
	Versioned
	Namespace  string    `json:"ns"`
	RunID      uuid.UUID `json:"run_id"`
	LeaseToken int64     `json:"lease"`
	StepID     string    `json:"step_id,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	// Offset and Length select the bytes to return.
	Offset int `json:"offset"`
	Length int `json:"length"`
}

// Validate implements Message.
func (m *PayloadRequest) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	if m.LeaseToken < 1 {
		return invalid(m, "lease %d must be positive", m.LeaseToken)
	}
	if len(m.StepID) > MaxNameLen || (m.StepID != "" && m.Attempt < 1) || (m.StepID == "" && m.Attempt != 0) {
		return invalid(m, "step %q attempt %d: a step id of 1 to %d bytes with a positive attempt, or neither", m.StepID, m.Attempt, MaxNameLen)
	}
	if m.Offset < 0 || m.Length < 1 || m.Length > 64<<20 {
		return invalid(m, "offset %d and length %d: offset not negative, length 1 to 64 MiB", m.Offset, m.Length)
	}
	return nil
}

// PayloadChunk answers a PayloadRequest: Data are the bytes from the
// requested offset (at most the requested length) of a payload of Total
// bytes. Code is ResultOK, ResultLeaseLost (abandon the run), ResultInvalid
// (no such payload) or ResultError (transient: ask again).
type PayloadChunk struct {
	Versioned
	Code    ResultCode `json:"code"`
	Message string     `json:"message,omitempty"`
	Data    []byte     `json:"data,omitempty"`
	Total   int        `json:"total"`
}

// Validate implements Message.
func (m *PayloadChunk) Validate() error {
	switch m.Code {
	case ResultOK:
		if m.Total < 0 || len(m.Data) > m.Total {
			return invalid(m, "%d bytes of a %d-byte payload", len(m.Data), m.Total)
		}
	case ResultLeaseLost, ResultInvalid, ResultError:
		if len(m.Data) > 0 {
			return invalid(m, "data in a %s answer", m.Code)
		}
	default:
		return invalid(m, "unknown code %q", m.Code)
	}
	return nil
}
