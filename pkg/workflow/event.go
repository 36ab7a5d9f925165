package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrEventTimeout is wrapped by the error WaitForEvent returns when no
// event came before its timeout. The workflow can handle it like any error
// (errors.Is(err, ErrEventTimeout)); a replay returns it again.
var ErrEventTimeout = errors.New("workflow: timed out waiting for event")

// EventStepID is the step id of the n-th (from 1) WaitForEvent for the
// event name in a run: "event:<name>" for the first, "event:<name>#<n>"
// for later ones. It shows up in the run's history.
func EventStepID(name string, n int) string {
	if n <= 1 {
		return "event:" + name
	}
	return "event:" + name + "#" + strconv.Itoa(n)
}

// WaitForEvent waits durably for an event named name sent to the run (by
// client.SendEvent or `kagzi event send`) and returns its payload decoded
// into T.
//
// An event sent before the run waits for it is kept and received at once.
// Each event is received once: two waits for the same name receive two
// events, oldest first. The wait is recorded as an EVENT step whose id is
// EventStepID(name, n) for the n-th wait for that name in the run (so the
// waits must come in the same order on every execution, like steps); its
// output is the payload, so a replay returns the same value.
//
// If no event is there, the run is suspended (its worker slot freed) until
// one is sent or the timeout passes; the engine then delivers the run
// again. A timeout of zero or less waits without limit. The timeout is
// fixed when the wait is first reached: replays do not extend it. When it
// passes, WaitForEvent returns an error wrapping ErrEventTimeout, which the
// workflow may handle.
//
// When it suspends the run, WaitForEvent does not return (see the package
// doc). In a Parallel branch, the run is suspended once no branch can go on,
// and woken by an event any branch waits for.
func WaitForEvent[T any](ctx Context, name string, timeout time.Duration) (T, error) {
	raw, _, err := waitEvent(ctx, name, timeout)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeEvent[T](name, raw)
}

// waitEvent is WaitForEvent before decoding: the received payload and the
// id of the EVENT step that received it (an update's answer is named after
// it).
func waitEvent(ctx Context, name string, timeout time.Duration) (json.RawMessage, string, error) {
	var zero json.RawMessage
	ex := ctx.execution()
	if err := protocol.ValidEventName(name); err != nil {
		return zero, "", fmt.Errorf("workflow: %w", err)
	}
	ex.mu.Lock()
	ex.events[name]++
	id := EventStepID(name, ex.events[name])
	ex.mu.Unlock()
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return zero, "", err
	}
	timedOut := func() (json.RawMessage, string, error) {
		return zero, "", fmt.Errorf("%w %q (step %q)", ErrEventTimeout, name, id)
	}
	attempt := 1
	if prev != nil {
		attempt = prev.Attempt
		switch prev.Status {
		case stepCompleted:
			return ex.output(prev), id, nil
		case stepFailed:
			if ex.sameEpoch(prev) {
				return timedOut()
			}
			// Timed out in an earlier run attempt: wait again.
			attempt++
		}
	}
	if err := cancelled(ctx); err != nil {
		return zero, "", err
	}
	now := ex.now()
	it := ex.item(protocol.ReportEventWait)
	it.StepID = id
	it.Attempt = attempt
	it.Name = name
	it.StartedAt = &now
	if timeout > 0 {
		until := now.Add(timeout).UTC()
		it.Until = &until
	}
	ex.mu.Lock()
	// Alone, the wait may suspend the run in the same round trip; with
	// other branches, it records the wait and parks.
	alone := ex.active == 1 && len(ex.waits) == 0
	ex.mu.Unlock()
	it.Suspend = alone
	res := ex.report(it)[0]
	switch {
	case res.OutputSize > 0:
		// Too large to come back inline: it is the EVENT step's output.
		return ex.output(&protocol.StepState{StepID: id, Attempt: attempt, OutputSize: res.OutputSize}), id, nil
	case len(res.Output) > 0:
		return res.Output, id, nil
	case !res.Waiting:
		return timedOut()
	case alone:
		ex.suspended()
	}
	return zero, "", ex.park(ctx, &waiter{events: true})
}

func decodeEvent[T any](name string, payload json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		var zero T
		return zero, NonRetryable(fmt.Errorf("workflow: event %q: payload does not decode into %T: %w", name, v, err))
	}
	return v, nil
}

// EventDrainStepID is the step id of the n-th (from 1) DrainEvents for the
// event name in a run: "drain:<name>" for the first, "drain:<name>#<n>"
// for later ones. It shows up in the run's history.
func EventDrainStepID(name string, n int) string {
	if n <= 1 {
		return "drain:" + name
	}
	return "drain:" + name + "#" + strconv.Itoa(n)
}

// DrainEvents takes, without waiting, every event named name sent to the
// run and not yet received, and returns their payloads decoded into T,
// oldest first (none: an empty slice). Use it to take what came while the
// workflow was busy, and right before the workflow returns (or continues
// as new) to take what came since its last wait: the engine refuses a
// run's end while an event of a name the execution waited for or drained
// arrived after the run was delivered to it, and executes the run again,
// so a drain at the end sees those events (see "Events and the end of a
// run" in the package doc).
//
// Each event is received once: by this drain, or by a WaitForEvent. A
// drain that takes events is recorded as the EVENT step
// EventDrainStepID(name, n) for the n-th drain of that name in the run
// (drains, like steps, must come in the same order on every execution);
// its output is the list, and each event's consumed_by names the step. A
// drain that finds nothing records nothing.
//
// On replay, a drain returns what it recorded — nothing, if it found
// nothing — unless it is reached at the end of the recorded history, when
// every step the run recorded has been replayed (the point where the
// previous execution returned, crashed or was suspended): there it also
// takes the events pending now, appended to what it recorded, as if it
// ran now, and the step's output grows to the whole list. A recorded past
// is never changed under steps that depend on it.
//
// One drain takes at most protocol.MaxDrainEvents events and a list within
// the payload limit; the rest stay pending, for the next drain. An
// update's request (its event "update.<name>") cannot be drained: its
// handler answers it. Once the run is asked to cancel, a drain takes
// nothing new: it returns what it recorded, or an error wrapping
// ErrCancelled if nothing (cleanup under WithoutCancel may still drain).
func DrainEvents[T any](ctx Context, name string) ([]T, error) {
	raw, err := drainEvents(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(raw))
	for _, p := range raw {
		v, err := decodeEvent[T](name, p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// drainEvents is DrainEvents before decoding.
func drainEvents(ctx Context, name string) ([]json.RawMessage, error) {
	ex := ctx.execution()
	if err := protocol.ValidEventName(name); err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	if strings.HasPrefix(name, protocol.UpdateEventPrefix) {
		return nil, fmt.Errorf("workflow: event %q is an update's request: handle it with Update.Handle", name)
	}
	ex.mu.Lock()
	if ex.drains == nil {
		ex.drains = make(map[string]int)
	}
	ex.drains[name]++
	id := EventDrainStepID(name, ex.drains[name])
	ex.mu.Unlock()
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.Status != stepCompleted {
		return nil, ex.replayError("step %q is recorded %s, not as a drain of events %q", id, prev.Status, name)
	}
	if !ex.atFrontier() {
		if prev == nil {
			return nil, nil
		}
		return decodeDrained(ex, id, ex.output(prev))
	}
	if err := cancelled(ctx); err != nil {
		if prev != nil {
			// What it took stays taken; nothing new is taken.
			return decodeDrained(ex, id, ex.output(prev))
		}
		return nil, err
	}
	now := ex.now()
	it := ex.item(protocol.ReportEventDrain)
	it.StepID = id
	it.Attempt = 1
	it.Name = name
	it.StartedAt = &now
	res := ex.report(it)[0]
	switch {
	case res.OutputSize > 0:
		// Too large to come back inline: it is the drain step's output.
		return decodeDrained(ex, id, ex.output(&protocol.StepState{StepID: id, Attempt: 1, OutputSize: res.OutputSize}))
	case len(res.Output) > 0:
		return decodeDrained(ex, id, res.Output)
	}
	return nil, nil
}

// decodeDrained splits a drain step's output into its payloads.
func decodeDrained(ex *execution, id string, out json.RawMessage) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, ex.replayError("step %q: its output is not a drain's list of events: %v", id, err)
	}
	return list, nil
}
