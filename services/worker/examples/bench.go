package examples

import (
	"context"
	"time"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The workflows `kagzi bench` needs besides Noop and Probe.

// HoldInput is the input of Hold.
type HoldInput struct {
	// ForMS is how long the second step blocks, in milliseconds (default
	// ten minutes).
	ForMS int64 `json:"for_ms,omitempty"`
}

// Hold occupies its worker: a first step that returns at once, then a
// step that blocks until its context ends (the run is cancelled, the
// worker drains, …) or ForMS passes. `kagzi bench --scenario recovery`
// kills a worker holding such runs and measures how soon they run on
// another one; there the first step replays from its recorded result.
func Hold(ctx workflow.Context, in HoldInput) (int, error) {
	if _, err := workflow.Step(ctx, "begin", func(context.Context) (int, error) { return 1, nil }); err != nil {
		return 0, err
	}
	d := 10 * time.Minute
	if in.ForMS > 0 {
		d = time.Duration(in.ForMS) * time.Millisecond
	}
	return workflow.Step(ctx, "hold", func(ctx context.Context) (int, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-t.C:
			return 1, nil
		}
	})
}

// registerBench registers the bench's workflows on w (Register calls it).
func registerBench(w *worker.Worker) error {
	return worker.Register(w, "Hold", Hold)
}
