package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// ErrStateFull is wrapped by the (non-retryable) error of a State.Set
// beyond protocol.MaxStateSets Sets of one key in a run; nothing is
// recorded. A workflow that updates a value more often continues as new.
var ErrStateFull = errors.New("workflow: too many Sets of a state key in one run")

// State is a durable value of a run that readers outside it can read
// while the run goes on: a run's progress, its phase, a partial result.
// Declare it once, next to the workflow, and share the declaration with
// the code that reads it (client.GetState, client.WaitState):
//
//	var Progress = workflow.NewState[int]("progress")
//
//	// in the workflow:
//	if err := Progress.Set(ctx, 40); err != nil { return err }
//
// Readers see the latest value of each key (its version counts the Sets);
// the key is also what `kagzi run state` and the console show.
type State[T any] struct {
	key string
}

// NewState declares the state key with values of type T. The key must be
// a valid progress name (protocol.ValidProgressName: a token without '#',
// at most protocol.MaxProgressNameLen bytes); it is checked where the
// State is used.
func NewState[T any](key string) State[T] {
	return State[T]{key: key}
}

// Key is the state's key.
func (s State[T]) Key() string { return s.key }

// Set records v (its JSON encoding) as the run's value of the key: the
// step "state:<key>#<n>" for the n-th Set of the key in the run
// (protocol.StateStepID). It returns once the value is durable — one round
// trip to the engine, which tells the run's readers at once — and a replay
// returns without recording it again. The Sets of a key must come in the
// same order on every execution, like steps: in Parallel branches, give
// each branch a key of its own.
//
// A value above the payload limit fails like a step's output (an error
// wrapping ErrPayloadTooLarge, recorded as the step's failure); a Set
// beyond protocol.MaxStateSets of the key returns an error wrapping
// ErrStateFull. Both are non-retryable.
func (s State[T]) Set(ctx Context, v T) error {
	if err := protocol.ValidProgressName("state key", s.key); err != nil {
		return NonRetryable(fmt.Errorf("%w: %v", ErrInvalidStepID, err))
	}
	ex := ctx.execution()
	n := ex.nth(protocol.StatePrefix + s.key)
	if n > protocol.MaxStateSets {
		return NonRetryable(fmt.Errorf("%w: state %q: Set %d, at most %d", ErrStateFull, s.key, n, protocol.MaxStateSets))
	}
	return recordProgress(ctx, ex, protocol.StateStepID(s.key, n), v)
}

// recordProgress records v as the completed step id and makes it durable
// before returning (a replay finds it recorded and sends nothing).
func recordProgress[T any](ctx Context, ex *execution, id string, v T) error {
	// pureStep: recording the value has no effect outside the run, so the
	// results held before it go in the same report as the value itself.
	_, err := Step(ctx, id, func(context.Context) (T, error) { return v, nil },
		WithRetry(retry.Policy{MaxAttempts: 1}), pureStep)
	if err != nil {
		return err
	}
	ex.flush()
	return nil
}

// nth counts the calls with base in this execution: 1 for the first.
func (ex *execution) nth(base string) int {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.calls == nil {
		ex.calls = make(map[string]int)
	}
	ex.calls[base]++
	return ex.calls[base]
}

// count returns how often base was counted (nth) in this execution.
func (ex *execution) count(base string) int {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.calls[base]
}
