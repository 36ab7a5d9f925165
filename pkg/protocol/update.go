package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// An update is a request a workflow validates and answers while the caller
// waits. It travels as an event and is answered by a step, so ordering,
// exactly-once receipt, durability and the run's wakeup are the events'
// and the answer reaches the caller as the run's progress:
//
//   - the request is the event UpdateEventName(name) ("update.<name>"),
//     received by the n-th handler of that name as the EVENT step
//     "event:update.<name>[#n]";
//   - the answer is the completed step UpdateStepID of that event step
//     ("update:<name>[#n]"), its output an UpdateAnswer; its completion is
//     published on SubjectProgress (ProgressPrefixes).
//
// So the event's consumed_by names the step that answers it.
const (
	// UpdateEventPrefix starts the name of the event that carries an
	// update's request.
	UpdateEventPrefix = "update."
	// UpdateStepPrefix starts the id of the step that holds an update's
	// answer.
	UpdateStepPrefix = "update:"
	// UpdateEventStepPrefix starts the id of the EVENT step that received
	// an update's request (see workflow.EventStepID).
	UpdateEventStepPrefix = "event:" + UpdateEventPrefix
	// MaxUpdateNameLen bounds an update's name, in bytes, so the ids of
	// the steps derived from it stay within MaxNameLen.
	MaxUpdateNameLen = MaxNameLen - len(UpdateEventStepPrefix) - len("#4294967295")
)

// ValidUpdateName checks an update's name: like an event name, at most
// MaxUpdateNameLen bytes, without '#' (which numbers the steps).
func ValidUpdateName(name string) error {
	if name == "" || len(name) > MaxUpdateNameLen {
		return fmt.Errorf("update name %q must be 1 to %d bytes", Echo(name), MaxUpdateNameLen)
	}
	if strings.Contains(name, "#") {
		return fmt.Errorf("update name %q must not contain #", Echo(name))
	}
	if err := ValidEventName(name); err != nil {
		return fmt.Errorf("update name: %w", err)
	}
	return nil
}

// UpdateEventName is the name of the event that carries a request of the
// update name.
func UpdateEventName(name string) string { return UpdateEventPrefix + name }

// UpdateStepID is the id of the step that answers the update received by
// the EVENT step eventStepID ("event:update.<name>[#n]" answers as
// "update:<name>[#n]"), and false for an EVENT step of no update.
func UpdateStepID(eventStepID string) (string, bool) {
	rest, ok := strings.CutPrefix(eventStepID, UpdateEventStepPrefix)
	if !ok || rest == "" {
		return "", false
	}
	return UpdateStepPrefix + rest, true
}

// UpdateAnswer is the output of an update's answer step: the handler's
// result, or its error.
type UpdateAnswer struct {
	// Result is the handler's result, as JSON; absent when Error is set.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the handler's error message; empty when it succeeded.
	Error string `json:"error,omitempty"`
	// Type is the error's type (workflow.ErrorType).
	Type string `json:"type,omitempty"`
	// Rejected: the workflow's validator refused the request (or it did
	// not decode), so the handler did not run.
	Rejected bool `json:"rejected,omitempty"`
}

// DecodeUpdateAnswer decodes an answer step's output strictly.
func DecodeUpdateAnswer(b []byte) (UpdateAnswer, error) {
	var a UpdateAnswer
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return UpdateAnswer{}, fmt.Errorf("update answer: %w", err)
	}
	if a.Error == "" && len(a.Result) == 0 {
		return UpdateAnswer{}, fmt.Errorf("update answer: neither a result nor an error")
	}
	return a, nil
}
