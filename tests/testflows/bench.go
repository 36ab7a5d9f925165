package testflows

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The workflows `kagzi bench` drives.

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

// Probe records when its code first ran (Unix nanoseconds) in a step and
// returns it: `kagzi bench --scenario latency` reads it to measure dispatch
// latency from start commit to workflow code running.
func Probe(ctx workflow.Context, _ struct{}) (int64, error) {
	return workflow.Step(ctx, "t", func(context.Context) (int64, error) { return time.Now().UnixNano(), nil })
}

// NoopInput is the input of Noop.
type NoopInput struct {
	// Steps is the number of empty steps to run.
	Steps int `json:"steps"`
}

// Noop runs Steps empty steps and returns how many ran: the benchmark's
// workload, so the figures measure Kagzi rather than user code.
func Noop(ctx workflow.Context, in NoopInput) (int, error) {
	for i := 0; i < in.Steps; i++ {
		if _, err := workflow.Step(ctx, "s"+strconv.Itoa(i), func(context.Context) (int, error) { return i, nil }); err != nil {
			return 0, err
		}
	}
	return in.Steps, nil
}

// SleepProbeInput is the input of SleepProbe.
type SleepProbeInput struct {
	SleepMS int64 `json:"sleep_ms"`
}

// SleepProbeOutput says when SleepProbe's code ran again after its sleep
// (Unix nanoseconds). `kagzi bench --scenario sleep` subtracts the due time
// recorded by the sleep (the output of its SLEEP step "sleep").
type SleepProbeOutput struct {
	WokeNS int64 `json:"woke_ns"`
}

// SleepProbe sleeps durably for SleepMS and records, in a step after the
// sleep, when its code ran again.
func SleepProbe(ctx workflow.Context, in SleepProbeInput) (SleepProbeOutput, error) {
	if err := workflow.Sleep(ctx, "sleep", time.Duration(in.SleepMS)*time.Millisecond); err != nil {
		return SleepProbeOutput{}, err
	}
	woke, err := workflow.Step(ctx, "woke", func(context.Context) (int64, error) { return time.Now().UnixNano(), nil })
	return SleepProbeOutput{WokeNS: woke}, err
}

// registerBench registers the bench's workflows on w (Register calls it).
func registerBench(w *worker.Worker) error {
	return errors.Join(worker.Register(w, "Noop", Noop), worker.Register(w, "Probe", Probe),
		worker.Register(w, "SleepProbe", SleepProbe), worker.Register(w, "Hold", Hold))
}
