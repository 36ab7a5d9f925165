package dispatcher

import (
	"encoding/json"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// The one conversion from what a claim returns (store.ClaimedRun) to what a
// worker receives (protocol.DeliveredRun). Replay depends on every field of
// a step's latest attempt — a failure's type, retry time, run attempt and
// tries decide whether the step is retried, continued or final — so the
// conversion copies each field by name, and a test fails when a field of
// either type is added without being carried across.

// deliveredRuns converts the runs of one delivery, in one call from it.
func deliveredRuns(runs []store.ClaimedRun) []protocol.DeliveredRun {
	out := make([]protocol.DeliveredRun, len(runs))
	for i := range runs {
		out[i] = deliveredRun(&runs[i])
	}
	return out
}

// deliveredRun converts one claimed run.
func deliveredRun(c *store.ClaimedRun) protocol.DeliveredRun {
	due, seq := c.DueAt, c.EventSeq
	r := protocol.DeliveredRun{
		RunID:       c.ID,
		Namespace:   c.Namespace,
		Queue:       c.Queue,
		Type:        c.Type,
		Version:     c.Version,
		Attempt:     c.Epoch,
		LeaseToken:  c.LeaseToken,
		Input:       rawJSON(c.Input),
		TraceParent: c.TraceContext,
		DeadlineAt:  c.DeadlineAt,
		RetryPolicy: c.RetryPolicy,
		AvailableAt: &due,
		InputSize:   c.InputSize,

		CancelRequestedAt: c.CancelRequestedAt,
		EventSeq:          &seq,
	}
	if len(c.Steps) > 0 {
		r.Steps = make([]protocol.StepState, len(c.Steps))
		for i := range c.Steps {
			r.Steps[i] = stepState(&c.Steps[i])
		}
	}
	return r
}

// stepState converts the latest attempt of one step.
func stepState(s *store.StepState) protocol.StepState {
	return protocol.StepState{
		StepID:     s.StepID,
		Status:     string(s.Status),
		Attempt:    s.Attempt,
		Output:     rawJSON(s.Output),
		Error:      s.Error,
		ErrorType:  s.ErrorType,
		RetryAt:    s.RetryAt,
		RunAttempt: s.RunAttempt,
		Tries:      s.Tries,
		OutputSize: s.OutputSize,

		NonRetryable:  s.NonRetryable,
		RetryOverride: s.RetryOverride,
	}
}

// rawJSON keeps an absent payload absent on the wire.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
