// Package wfexec holds the types of the engine's entry into the workflow
// runtime: what the worker (and the test kit) hands package workflow to
// execute a delivered run once (Execution), and how the execution ended
// (Outcome). The runtime itself is package workflow's, and the worker
// calls it directly through the workflow it registered
// (workflow.Func.Execute). That method is public, but its argument's type
// is this internal package's, so only the engine's own packages can call
// it: applications see the workflow API, not the runtime's driver.
package wfexec

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Reporter sends the report items of one run to the engine under the run's
// lease. The items are complete (run id and lease token included).
//
// Report returns one result per item once every item is recorded (an
// event_wait's result carries what the engine found). It retries transient
// failures itself (reports are idempotent) until ctx ends; any error it
// returns means the execution must stop at once without further reports:
// ctx ended, the lease was lost, or the engine refused an item. It must be
// safe for concurrent use: the branches of Parallel report concurrently.
type Reporter interface {
	Report(ctx context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error)
}

// EndReporter is a Reporter that can take a run's end report (the held
// step results and child starts not yet sent, then run_completed,
// run_failed or run_continue) without the execution waiting for the
// engine to record it.
//
// ReportEnd returns once the report is taken: from then on it is the
// reporter's to send, retry and have acknowledged, and to deal with a lost
// lease or a refusal as Report would. An error means it was not taken (ctx
// ended first) and the execution is abandoned. There is nothing in the
// execution after its end, so no effect can precede the end's record; a
// report that is lost leaves the run to its lease and it is executed
// again.
type EndReporter interface {
	Reporter
	ReportEnd(ctx context.Context, items ...protocol.ReportItem) error
}

// LeaseConfirmer is a Reporter that can make sure, before a step function
// runs, that the run's lease still holds. A step's result is held, not
// sent, so consecutive steps may run with no round trip between them; a
// worker that stalled meanwhile (frozen, a paused VM) may have had its
// lease given to another worker, which may even have finished the run,
// and only a round trip can tell. ConfirmLease returns nil at once when
// nothing can have been lost; an error means the execution must stop at
// once, as a failed Report does.
type LeaseConfirmer interface {
	ConfirmLease(ctx context.Context) error
}

// PayloadFetcher reads, under the run's lease, a payload that the delivery
// did not carry inline (protocol.StepState.OutputSize,
// protocol.DeliveredRun.InputSize): the output of attempt attempt of step
// stepID, or the run's input when stepID is empty. Like Reporter.Report it
// retries transient failures itself; an error means the execution must
// stop (ctx ended, the lease was lost, the payload is gone).
type PayloadFetcher interface {
	FetchPayload(ctx context.Context, stepID string, attempt int) (json.RawMessage, error)
}

// Execution is what Execute needs to execute a delivered run once.
type Execution struct {
	// Run is the delivered run, with the latest attempt of each of its
	// steps. Execute does not modify it.
	Run *protocol.DeliveredRun
	// Reporter sends the execution's reports. If it is an EndReporter, the
	// end report is handed to its ReportEnd.
	Reporter Reporter
	// Payloads reads the payloads Run carries by size only (nil: a run
	// with such a payload is abandoned when its replay needs it).
	Payloads PayloadFetcher
	// Cancel, if set, is a context derived from Execute's that ends when
	// the run is asked to cancel (cause ErrCancelled). The workflow's
	// Context ends with it, but the execution goes on: the workflow may
	// handle the request and report. Execute's own context ending abandons
	// the execution (lease lost, terminated, drained, past the deadline).
	Cancel context.Context
	// Limits are the payload limits the engine told the worker: an output
	// (of a step or of the run) or a child's input above MaxBytes fails with
	// ErrPayloadTooLarge before it is reported; one above WarnBytes is
	// logged. Zero fields take the defaults of package protocol.
	Limits protocol.PayloadLimits
	// Logger is handed to workflow code (workflow.Context.Logger); nil discards.
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests may replace it.
	Now func() time.Time
	// MaxInlineRetry is the longest backoff before a step's next attempt
	// that the execution waits for in place, holding its worker slot
	// (default workflow.DefaultMaxInlineRetry; negative: never). A longer backoff
	// records the failed attempt with its retry time and suspends the run
	// until then.
	MaxInlineRetry time.Duration
	// Rand picks the jitter of step retry backoffs (default
	// math/rand/v2.Float64).
	Rand func() float64
	// Tracer starts a span per step attempt (default: none).
	Tracer trace.Tracer
	// StepDuration, if set, records each step attempt's duration in ms.
	StepDuration metric.Float64Histogram
}

// OutcomeStatus says how an execution ended.
type OutcomeStatus int

// Outcome statuses.
const (
	// OutcomeCompleted: the workflow returned and run_completed (or
	// run_continue) was recorded, or taken by EndReporter.ReportEnd.
	OutcomeCompleted OutcomeStatus = iota + 1
	// OutcomeFailed: the workflow failed (error, panic, non-determinism)
	// and run_failed was recorded, or taken by EndReporter.ReportEnd.
	OutcomeFailed
	// OutcomeSuspended: the run was suspended (sleeping, waiting for an
	// event or for children, or backing off before a step's next attempt);
	// it holds no slot until the engine delivers it again.
	OutcomeSuspended
	// OutcomeAbandoned: the execution stopped without a final report: its
	// context ended (cancel, lease lost, drain, deadline) or a report
	// failed. Err says why.
	OutcomeAbandoned
)

// String returns the status name.
func (s OutcomeStatus) String() string {
	switch s {
	case OutcomeCompleted:
		return "completed"
	case OutcomeFailed:
		return "failed"
	case OutcomeSuspended:
		return "suspended"
	case OutcomeAbandoned:
		return "abandoned"
	}
	return fmt.Sprintf("OutcomeStatus(%d)", int(s))
}

// Outcome is how one execution ended.
type Outcome struct {
	Status OutcomeStatus
	// Err is the failure (OutcomeFailed) or the reason the execution was
	// abandoned (OutcomeAbandoned).
	Err error
}
