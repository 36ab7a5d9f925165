package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// RunFinishedError says that a run ended while a reader waited for more
// of its state.
type RunFinishedError struct {
	RunID  uuid.UUID
	Status RunStatus
}

func (e *RunFinishedError) Error() string {
	return fmt.Sprintf("run %s finished %s", e.RunID, e.Status)
}

// Unwrap makes errors.Is(err, ErrRunFinished) hold.
func (e *RunFinishedError) Unwrap() error { return ErrRunFinished }

// StateValue is the latest value of one state key of a run
// (workflow.State): its JSON and its version, the number of Sets of the
// key the run made.
type StateValue struct {
	Key        string
	Version    int
	Value      json.RawMessage
	RecordedAt *time.Time
}

func (c *Client) readState(ctx context.Context, runID uuid.UUID, key string) (store.StateRead, error) {
	if runID == uuid.Nil {
		return store.StateRead{}, fmt.Errorf("read state: %w: run id is required", ErrInvalidArgument)
	}
	// The store's error says what it read, and of which run.
	return c.st.StepsState(ctx, store.StepsStateParams{Namespace: c.ns, RunID: runID, Key: key})
}

// StateList returns the latest value of every state key the run set, by
// key. An unknown run is ErrNotFound.
func (c *Client) StateList(ctx context.Context, runID uuid.UUID) ([]StateValue, error) {
	r, err := c.readState(ctx, runID, "")
	if err != nil {
		return nil, err
	}
	out := make([]StateValue, len(r.Values))
	for i, v := range r.Values {
		out[i] = StateValue{Key: v.Key, Version: v.Version, Value: v.Value, RecordedAt: v.RecordedAt}
	}
	return out, nil
}

// StateGet returns the latest value of the run's state key as JSON and its
// version (0, with a nil value, if the key was never set). An unknown run
// is ErrNotFound; an invalid key ErrInvalidArgument.
func (c *Client) StateGet(ctx context.Context, runID uuid.UUID, key string) (json.RawMessage, int, error) {
	if key == "" {
		return nil, 0, fmt.Errorf("read state: %w: key is required", ErrInvalidArgument)
	}
	r, err := c.readState(ctx, runID, key)
	if err != nil || len(r.Values) == 0 {
		return nil, 0, err
	}
	return r.Values[0].Value, r.Values[0].Version, nil
}

// StateWait blocks until the run's state key has a version above after
// and returns that value and version (the latest, which may be several
// Sets ahead). It is woken by push (the run's progress on NATS,
// subscribed before the first read), never by polling. If the run ends
// without such a version, the error wraps ErrRunFinished (a
// *RunFinishedError).
func (c *Client) StateWait(ctx context.Context, runID uuid.UUID, key string, after int) (json.RawMessage, int, error) {
	if key == "" {
		return nil, 0, fmt.Errorf("wait for state: %w: key is required", ErrInvalidArgument)
	}
	f, err := c.follow(ctx, runID, true)
	if err != nil {
		return nil, 0, fmt.Errorf("wait for state: %w", err)
	}
	defer f.close()
	for {
		resync := c.resyncChan()
		r, err := c.readState(ctx, runID, key)
		if err != nil {
			return nil, 0, err
		}
		if len(r.Values) > 0 && r.Values[0].Version > after {
			return r.Values[0].Value, r.Values[0].Version, nil
		}
		if r.Status.Terminal() {
			return nil, 0, &RunFinishedError{RunID: runID, Status: r.Status}
		}
		if err := f.wait(ctx, resync); err != nil {
			return nil, 0, err
		}
	}
}

// GetState returns the latest value of the run's state st decoded into T,
// and whether it was ever set (the zero T and false if not). The run's
// type is the caller's word: st must be the declaration its workflow
// sets.
func GetState[T any](ctx context.Context, c *Client, runID uuid.UUID, st workflow.State[T]) (T, bool, error) {
	var zero T
	raw, version, err := c.StateGet(ctx, runID, st.Key())
	if err != nil || version == 0 {
		return zero, false, err
	}
	v, err := decodeState[T](st.Key(), raw)
	return v, err == nil, err
}

// WaitState waits, by push, until the run's state st has a version above
// after (0: until it is set at all) and returns its latest value and
// version; pass the version returned to wait for the next change. A run
// that ends first gives an error wrapping ErrRunFinished.
func WaitState[T any](ctx context.Context, c *Client, runID uuid.UUID, st workflow.State[T], after int) (T, int, error) {
	var zero T
	raw, version, err := c.StateWait(ctx, runID, st.Key(), after)
	if err != nil {
		return zero, 0, err
	}
	v, err := decodeState[T](st.Key(), raw)
	return v, version, err
}

func decodeState[T any](key string, raw json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("state %q: value does not decode into %T: %w", key, v, err)
	}
	return v, nil
}
