package workflow

import (
	"errors"
	"fmt"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrStreamFull is wrapped by the (non-retryable) error of a Stream.Write
// beyond protocol.MaxStreamEntries entries of one stream in a run; nothing
// is recorded.
var ErrStreamFull = errors.New("workflow: too many entries in one stream")

// ErrStreamClosed is wrapped by the (non-retryable) error of a
// Stream.Write after the stream's Close in the same run.
var ErrStreamClosed = errors.New("workflow: write to a closed stream")

// Stream is a run's ordered sequence of partial results that readers
// outside the run follow live (the tokens of a model's answer, progress
// lines): each entry is durable when Write returns, and a reader
// (client.ReadStream, `kagzi run stream --follow`, the console's run page)
// is woken by push within milliseconds. A reader that joins late reads
// every entry from the first. Declare it once and share the declaration
// with the readers:
//
//	var Tokens = workflow.NewStream[string]("tokens")
//
//	// in the workflow:
//	for _, tok := range answer { if err := Tokens.Write(ctx, tok); err != nil { return err } }
//	if err := Tokens.Close(ctx); err != nil { return err }
//
// The stream ends for readers at its Close or at the run's end, whichever
// comes first.
type Stream[T any] struct {
	name string
}

// NewStream declares the stream name with entries of type T. The name must
// be a valid progress name (protocol.ValidProgressName); it is checked
// where the Stream is used.
func NewStream[T any](name string) Stream[T] {
	return Stream[T]{name: name}
}

// Name is the stream's name.
func (s Stream[T]) Name() string { return s.name }

// Write appends v (its JSON encoding) to the stream: the step
// "stream:<name>#<n>" for its n-th entry (from 1; protocol.StreamStepID).
// It returns once the entry is durable — one round trip — and a replay
// returns without recording it again, so a crash or a suspension never
// duplicates an entry. The writes to a stream must come in the same order
// on every execution, like steps: in Parallel branches, give each branch a
// stream of its own.
//
// An entry above the payload limit fails like a step's output (an error
// wrapping ErrPayloadTooLarge); a Write beyond protocol.MaxStreamEntries
// entries returns an error wrapping ErrStreamFull, and one after Close an
// error wrapping ErrStreamClosed. All are non-retryable.
func (s Stream[T]) Write(ctx Context, v T) error {
	if err := protocol.ValidProgressName("stream name", s.name); err != nil {
		return NonRetryable(fmt.Errorf("%w: %v", ErrInvalidStepID, err))
	}
	ex := ctx.execution()
	if ex.count(streamClosedKey(s.name)) > 0 {
		return NonRetryable(fmt.Errorf("%w %q", ErrStreamClosed, s.name))
	}
	n := ex.nth(protocol.StreamPrefix + s.name)
	if n > protocol.MaxStreamEntries {
		return NonRetryable(fmt.Errorf("%w: stream %q: entry %d, at most %d", ErrStreamFull, s.name, n, protocol.MaxStreamEntries))
	}
	return recordProgress(ctx, ex, protocol.StreamStepID(s.name, n), v)
}

// Close ends the stream for its readers, who read every entry written
// before it and then the end (io.EOF): the step "stream:<name>#end"
// (protocol.StreamEndStepID), durable when Close returns. A second Close
// does nothing. Closing is optional: the run's end also ends its streams.
func (s Stream[T]) Close(ctx Context) error {
	if err := protocol.ValidProgressName("stream name", s.name); err != nil {
		return NonRetryable(fmt.Errorf("%w: %v", ErrInvalidStepID, err))
	}
	ex := ctx.execution()
	if ex.nth(streamClosedKey(s.name)) > 1 {
		return nil
	}
	return recordProgress(ctx, ex, protocol.StreamEndStepID(s.name), struct{}{})
}

// streamClosedKey is the call counter that marks a closed stream; its
// "#" cannot begin a step id's counter base.
func streamClosedKey(name string) string { return "#closed:" + name }
