package protocol

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

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
	// RetryOverride is, for a FAILED attempt, the new retry options an
	// operator gave the step in run attempt RunAttempt (RetryStepNow): the
	// fields it sets replace the code's policy for the step's next
	// attempts (retry.Policy.WithOverride). Absent: the code's policy.
	RetryOverride *retry.Policy `json:"retry_override,omitempty" kagzi:"12"`
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
