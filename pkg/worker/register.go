package worker

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// ErrDuplicateType is returned by Register for a workflow type registered
// before on the same worker.
var ErrDuplicateType = errors.New("worker: workflow type already registered")

// RegisterOption configures the registration of one workflow type.
type RegisterOption func(*registration)

// WithVersion registers the workflow type at version v: the worker is only
// delivered runs started for that version (or without one). A worker may
// register one type at several versions (one Register call each); a run
// started without a version, when the operator set no default version for
// its type (client.SetDefaultVersion), is pinned to the version registered
// first.
func WithVersion(v string) RegisterOption {
	return func(r *registration) { r.version = v }
}

type registration struct {
	name    string
	version string
	seq     int // registration order
	fn      workflow.Func
}

// Register registers fn as the workflow type name on w. Its input is
// decoded from the run's JSON input (a missing input is the zero In; an
// undecodable one fails the run without retries) and its output is
// recorded as JSON (encoding/json).
//
// Register must be called before Start. Registering a type twice at one
// version, an invalid name or version, or a nil function is an error.
func Register[In, Out any](w *Worker, name string, fn func(ctx workflow.Context, in In) (Out, error), opts ...RegisterOption) error {
	if w == nil {
		return errors.New("worker: Register on a nil Worker")
	}
	if fn == nil {
		return fmt.Errorf("worker: register %q: nil workflow function", name)
	}
	r := &registration{name: name}
	for _, opt := range opts {
		if opt != nil {
			opt(r)
		}
	}
	if err := protocol.ValidToken("workflow type", name); err != nil {
		return fmt.Errorf("worker: register: %w", err)
	}
	if r.version != "" {
		if err := protocol.ValidToken("workflow version", r.version); err != nil {
			return fmt.Errorf("worker: register %q: %w", name, err)
		}
	}
	r.fn = func(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
		var in In
		if len(input) > 0 {
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, workflow.NonRetryable(fmt.Errorf("decode input of %s into %T: %w", name, in, err))
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(out)
		if err != nil {
			return nil, workflow.NonRetryable(fmt.Errorf("encode output of %s: %w", name, err))
		}
		return data, nil
	}
	return w.register(r)
}

func (w *Worker) register(r *registration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case stateRunning:
		return fmt.Errorf("worker: register %q: %w", r.name, ErrStarted)
	case stateStopped:
		return fmt.Errorf("worker: register %q: %w", r.name, ErrStopped)
	}
	if _, dup := w.types[typeKey(r.name, r.version)]; dup {
		return fmt.Errorf("%w: %q at version %q", ErrDuplicateType, r.name, r.version)
	}
	if len(w.types) >= protocol.MaxTypes {
		return fmt.Errorf("worker: register %q: at most %d workflow types", r.name, protocol.MaxTypes)
	}
	r.seq = len(w.types)
	w.types[typeKey(r.name, r.version)] = r
	return nil
}

// typeKey keys a registration by type and version.
func typeKey(typ, version string) string { return typ + "@" + version }

// Implement registers fn as the implementation of the workflow ref
// declares (workflow.New): Register with the Ref's name, its input and
// output types checked by the compiler. Several versions of one type are
// several Implement calls with WithVersion.
func Implement[In, Out any](w *Worker, ref workflow.Ref[In, Out], fn func(ctx workflow.Context, in In) (Out, error), opts ...RegisterOption) error {
	return Register(w, ref.Name(), fn, opts...)
}
