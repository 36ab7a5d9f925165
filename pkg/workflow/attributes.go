package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrAttributesRefused is wrapped by the (non-retryable) error of a
// SetAttributes whose values the engine refused: a name not declared in
// the run's namespace, a value of another kind, or a run past its limits
// (see client.DeclareAttribute). Nothing of that call is set.
var ErrAttributesRefused = errors.New("workflow: search attributes refused")

// SetAttributes sets search attributes of the run, by name, as
// client.StartOptions.Attributes does at the start; a nil value removes
// the attribute. Values are a string (keyword or text), a []string (a
// keyword's list), an integer, a float, a bool or a time.Time, as the
// namespace declares each name.
//
// It is durable and memoized: the n-th SetAttributes of a run is the
// step "attributes#<n>" (protocol.AttributesStepID), recorded with the
// values in one round trip to the engine, and a replay returns what it
// returned then without setting anything again. Calls must come in the
// same order on every execution, like steps: not from Parallel branches,
// whose order may change. The engine checks the values
// against the namespace's declarations and the run's limits: a refusal is
// recorded as the step's failure, and SetAttributes returns an error
// wrapping ErrAttributesRefused, then and on every replay.
func SetAttributes(ctx Context, attrs map[string]any) error {
	if len(attrs) == 0 {
		return nil
	}
	out, err := encodeAttributes(attrs)
	if err != nil {
		return NonRetryable(err)
	}
	ex := ctx.execution()
	id := protocol.AttributesStepID(ex.nth(protocol.AttributesPrefix))
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case prev != nil && prev.Status == stepCompleted:
		return nil
	case prev != nil && prev.Status == stepFailed:
		return NonRetryable(fmt.Errorf("%w: %s", ErrAttributesRefused, prev.Error))
	case prev != nil:
		return ex.replayError("step %q is recorded %s, not as a SetAttributes", id, prev.Status)
	}
	if err := cancelled(ctx); err != nil {
		return err
	}
	now := ex.now()
	it := ex.item(protocol.ReportAttributesSet)
	it.StepID = id
	it.Attempt = 1
	it.Output = out
	it.StartedAt = &now
	if res := ex.report(it)[0]; res.Message != "" {
		return NonRetryable(fmt.Errorf("%w: %s", ErrAttributesRefused, res.Message))
	}
	return nil
}

// encodeAttributes is attrs as the attributes_set item carries them:
// times as RFC 3339 strings, nil as null.
func encodeAttributes(attrs map[string]any) (json.RawMessage, error) {
	m := make(map[string]any, len(attrs))
	for name, v := range attrs {
		switch x := v.(type) {
		case time.Time:
			m[name] = x.UTC().Format(time.RFC3339Nano)
		case *time.Time:
			if x == nil {
				m[name] = nil
			} else {
				m[name] = x.UTC().Format(time.RFC3339Nano)
			}
		default:
			m[name] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAttributesRefused, err)
	}
	return out, nil
}
