package bench

import (
	"context"
	"fmt"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
)

// The targets scenario: every figure the throughput and latency targets
// are set in, each beside River's from the same command, in one run —
// one-step, zero-step and ten-step throughput, the one-step run's CPU,
// dispatch latency at 200 starts/s, and sleep lateness under the one-step
// load, saturating and at half of its throughput.

// TargetsResult is the targets scenario's figures: each part's own result
// and the ratios with their targets.
type TargetsResult struct {
	Scenario string    `json:"scenario"`
	Parts    []*Result `json:"parts"`
	// Ratios are every part's comparisons with River, and the sleep
	// lateness bound (no River figure: River has no durable sleep).
	Ratios []Ratio `json:"ratios"`
}

// Rows implements Detail: one line per part, then the ratios.
func (r *TargetsResult) Rows() [][2]string {
	rows := [][2]string{{"scenario", r.Scenario}}
	for _, p := range r.Parts {
		rows = append(rows, [2]string{"part", partLine(p)})
	}
	for _, x := range r.Ratios {
		op := "≥"
		if x.Max {
			op = "≤"
		}
		if x.River == 0 {
			rows = append(rows, [2]string{x.Figure, fmt.Sprintf("%.2f (target %s %.2f: %s)", x.Kagzi, op, x.Target, verdict(x.Met))})
			continue
		}
		rows = append(rows, [2]string{x.Figure, fmt.Sprintf("%.2f / %.2f = %.2f (target %s %.2f: %s)", x.Kagzi, x.River, x.Ratio, op, x.Target, verdict(x.Met))})
	}
	return rows
}

// partLine summarises one part's own figures.
func partLine(p *Result) string {
	river := ""
	if p.River != nil {
		river = fmt.Sprintf("; River %.0f jobs/s", p.River.JobsPerSec)
		if p.River.StartP50ms > 0 {
			river = fmt.Sprintf("; River insert→start p50 %.2f ms, p99 %.2f ms", p.River.StartP50ms, p.River.StartP99ms)
		}
		if p.River.CPU != nil {
			river += fmt.Sprintf(", CPU %.0f + %.0f µs/job", p.River.CPU.PostgresUSPerRun, p.River.CPU.ServicesUSPerRun)
		}
	}
	cpu := ""
	if p.CPU != nil {
		cpu = fmt.Sprintf(", CPU Postgres %.0f + services %.0f µs/run", p.CPU.PostgresUSPerRun, p.CPU.ServicesUSPerRun)
	}
	switch {
	case p.Scenario == "latency":
		return fmt.Sprintf("latency, %d runs: dispatch p50 %.2f ms, p99 %.2f ms%s", p.Runs, p.DispatchP50ms, p.DispatchP99ms, river)
	case p.Sleepers != nil:
		return fmt.Sprintf("throughput, %d steps, %d runs, with %d sleepers: %.0f runs/s%s; sleep late p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d early",
			p.Steps, p.Runs, p.Sleepers.Runs, p.RunsPerSec, cpu, p.Sleepers.LateP50ms, p.Sleepers.LateP99ms, p.Sleepers.LateMaxMS, p.Sleepers.Early)
	default:
		return fmt.Sprintf("throughput, %d steps, %d runs: %.0f runs/s, %.0f steps/s%s%s", p.Steps, p.Runs, p.RunsPerSec, p.StepsPerSec, cpu, river)
	}
}

// The bounds of the targets without a River figure: sleep lateness p99
// under the saturating one-step load and at half of its throughput (ms),
// and the CPU a one-step run costs Postgres and the services (µs).
const (
	SleepLateSaturatedTarget = 30.0
	SleepLateHalfTarget      = 10.0
	CPUPostgresTarget        = 60.0
	CPUServicesTarget        = 70.0
)

// DefaultLoadSleepers is how many sleeping runs the targets scenario
// starts among the one-step throughput load.
const DefaultLoadSleepers = 500

// bound is a figure with a maximum and no River figure beside it.
func bound(figure string, v, max float64) Ratio {
	return Ratio{Figure: figure, Kagzi: measure.Round2(v), Target: max, Max: true, Met: v <= max}
}

// targets runs the parts one after another, each on a fresh database (and
// a fresh cluster with --own-postgres), River after each Kagzi part.
func targets(ctx context.Context, o Options) (*Result, error) {
	parts := []Options{
		{Scenario: "throughput", Steps: 1, Runs: 20000, Compare: "river"},
		{Scenario: "throughput", Steps: 0, Runs: 20000, Compare: "river"},
		{Scenario: "throughput", Steps: 10, Runs: 5000, Compare: "river"},
		{Scenario: "latency", Runs: 2000, Rate: 200, Compare: "river"},
		{Scenario: "throughput", Steps: 1, Runs: 20000, Sleepers: DefaultLoadSleepers},
		// Paced at half the first part's runs/s (Rate set below).
		{Scenario: "throughput", Steps: 1, Runs: 10000, Sleepers: DefaultLoadSleepers, Rate: -1},
	}
	res := &TargetsResult{Scenario: o.Scenario}
	for _, p := range parts {
		sub := o
		sub.Scenario, sub.Steps, sub.Runs, sub.Rate, sub.Compare, sub.Sleepers = p.Scenario, p.Steps, p.Runs, p.Rate, p.Compare, p.Sleepers
		if p.Rate < 0 {
			sub.Rate = float64(int(res.Parts[0].RunsPerSec / 2))
		}
		o.Log.Info("targets: part", "scenario", sub.Scenario, "steps", sub.Steps, "runs", sub.Runs, "sleepers", sub.Sleepers, "rate", sub.Rate)
		r, err := Run(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("bench: targets: %s of %d steps: %w", sub.Scenario, sub.Steps, err)
		}
		res.Parts = append(res.Parts, r)
		for _, x := range r.Comparison {
			// The CPU ratios to River's are the profile's; the targets
			// bound the one-step run's CPU itself.
			if x.Figure == cpuPostgresFigure || x.Figure == cpuServicesFigure {
				continue
			}
			res.Ratios = append(res.Ratios, x)
		}
		if len(res.Parts) == 1 && r.CPU != nil {
			res.Ratios = append(res.Ratios,
				bound("Postgres CPU per one-step run (µs)", r.CPU.PostgresUSPerRun, CPUPostgresTarget),
				bound("services CPU per one-step run (µs)", r.CPU.ServicesUSPerRun, CPUServicesTarget))
		}
		if r.Sleepers != nil {
			figure, target := "sleep lateness p99 under the saturating 1-step load (ms)", SleepLateSaturatedTarget
			if sub.Rate > 0 {
				figure, target = fmt.Sprintf("sleep lateness p99 at half of it, %.0f starts/s (ms)", sub.Rate), SleepLateHalfTarget
			}
			x := bound(figure, r.Sleepers.LateP99ms, target)
			x.Met = x.Met && r.Sleepers.Early == 0
			res.Ratios = append(res.Ratios, x)
		}
	}
	return &Result{Scenario: o.Scenario, Detail: res}, nil
}
