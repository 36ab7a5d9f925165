package workflow

import (
	"encoding/json"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Sleep suspends the run durably for d, as the step id: the worker's slot
// is freed and the engine delivers the run again when d has passed; the
// replay then returns from Sleep and continues. The wake time is fixed
// when the sleep is first reached and recorded as a SLEEP step, so replays
// do not restart the sleep. A d of zero or less returns at once and
// records nothing.
//
// Sleep returns an error only for a bad or duplicate id, or when called
// from a Parallel branch that is cancelled. When it suspends the run, it
// does not return (see the package doc on suspension). In a Parallel
// branch, the run is suspended once no branch can go on.
func Sleep(ctx Context, id string, d time.Duration) error {
	ex := ctx.execution()
	return sleepUntil(ctx, ex, id, func() time.Time { return ex.now().Add(d) })
}

// SleepUntil is Sleep until the wall-clock time t (see Sleep). A t not
// after now returns at once and records nothing.
func SleepUntil(ctx Context, id string, t time.Time) error {
	return sleepUntil(ctx, ctx.execution(), id, func() time.Time { return t })
}

func sleepUntil(ctx Context, ex *execution, id string, wakeAt func() time.Time) error {
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return err
	}
	now := ex.now()
	if prev != nil && prev.Status == stepCompleted {
		var wake time.Time
		if err := json.Unmarshal(prev.Output, &wake); err != nil {
			return ex.replayError("sleep %q: recorded output is not a wake time: %v", id, err)
		}
		if !wake.After(now) {
			return nil
		}
		// Delivered before its wake time (e.g. a retry of the run, or
		// another branch's wake-up): sleep the rest.
		return ex.park(ctx, &waiter{until: &wake})
	}
	wake := wakeAt().UTC()
	if !wake.After(now) {
		return nil
	}
	if err := cancelled(ctx); err != nil {
		return err
	}
	out, err := json.Marshal(wake)
	if err != nil {
		return err
	}
	attempt := 1
	if prev != nil {
		attempt = prev.Attempt + 1
	}
	step := ex.item(protocol.ReportStepCompleted)
	step.StepID = id
	step.StepKind = stepKindSleep
	step.Attempt = attempt
	step.Output = out
	step.Until = &wake
	step.StartedAt = &now
	step.FinishedAt = &now
	// Recorded with the suspension (one report).
	ex.later(step)
	return ex.park(ctx, &waiter{until: &wake})
}
