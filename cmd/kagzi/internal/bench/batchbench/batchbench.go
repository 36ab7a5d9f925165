// Package batchbench is kagzi bench's batch scenario: a batch cancel of
// many runs that no worker serves while Probe runs are started at a fixed
// rate, whose dispatch latency is measured first without the batch (the
// base), then while the batch runs. The target: the p99 with the batch
// within LatencyTarget times the base, and every run cancelled once.
package batchbench

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
)

// Defaults and target of the batch scenario.
const (
	// DefaultRuns is the runs the batch cancels (--runs).
	DefaultRuns = 100_000
	// DefaultRate is the batch's rate, in runs per second (--batch-rate).
	DefaultRate = 2_000
	// ProbeSec is how long each probe load lasts.
	ProbeSec = 20
	// LatencyTarget bounds the probes' dispatch p99 with the batch,
	// as a multiple of the p99 without it.
	LatencyTarget = 2.0
)

// Result is the batch scenario's figures.
type Result struct {
	Scenario  string  `json:"scenario"`
	Runs      int     `json:"runs"`
	BatchRate int     `json:"batch_rate"`
	ProbeRate float64 `json:"probe_rate"`
	Probes    int     `json:"probes"`
	// The probes' dispatch latency without the batch (Base) and while it
	// ran (During), in milliseconds.
	BaseP50ms, BaseP99ms     float64
	DuringP50ms, DuringP99ms float64
	// BatchSec is the batch's duration, creation to completion; its
	// outcomes are Done, Failed and Skipped; Cancelled counts the runs
	// cancelled in the database afterwards.
	BatchSec              float64 `json:"batch_sec"`
	Done, Failed, Skipped int
	Cancelled             int64
	P99Ratio, Target      float64
	Met                   bool
}

// Rows implements Detail.
func (r *Result) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"batch", fmt.Sprintf("cancel %d runs at %d runs/s: %.1f s (%.0f runs/s); %d done, %d failed, %d skipped; %d cancelled",
			r.Runs, r.BatchRate, r.BatchSec, float64(r.Runs)/r.BatchSec, r.Done, r.Failed, r.Skipped, r.Cancelled)},
		{"probes", fmt.Sprintf("%d at %.0f/s, twice", r.Probes, r.ProbeRate)},
		{"dispatch without the batch", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.BaseP50ms, r.BaseP99ms)},
		{"dispatch with the batch", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.DuringP50ms, r.DuringP99ms)},
		{"p99 ratio", fmt.Sprintf("%.2f (target ≤ %.1f, every run cancelled once: %s)", r.P99Ratio, r.Target, verdict(r.Met))},
	}
}

// Options are the scenario's settings.
type Options struct {
	// Runs is how many runs the batch cancels; BatchRate its rate.
	Runs, BatchRate int
	// Rate is the Probe runs started per second.
	Rate float64
}

// Deps is what the bench gives the scenario: its client, its log, and its
// probe load (Measure starts n Probe runs at rate per second and returns
// their dispatch latencies in milliseconds).
type Deps struct {
	Client  *client.Client
	Log     *slog.Logger
	Measure func(ctx context.Context, n int, rate float64) ([]float64, error)
}

// Run runs the scenario.
func Run(ctx context.Context, d Deps, o Options) (*Result, error) {
	cl := d.Client
	r := &Result{Scenario: "batch", Runs: o.Runs, BatchRate: o.BatchRate, ProbeRate: o.Rate, Target: LatencyTarget}
	r.Probes = max(1, int(o.Rate*ProbeSec))
	const chunk = 1000
	for i := 0; i < o.Runs; i += chunk {
		reqs := make([]client.StartRequest, min(chunk, o.Runs-i))
		for j := range reqs {
			reqs[j] = client.StartRequest{Type: "Idle", Options: client.StartOptions{Queue: "idle"}}
		}
		if _, err := cl.StartMany(ctx, reqs); err != nil {
			return nil, err
		}
	}
	d.Log.Info("batch: runs created", "runs", o.Runs)
	base, err := d.Measure(ctx, r.Probes, o.Rate)
	if err != nil {
		return nil, err
	}
	r.BaseP50ms, r.BaseP99ms = pct(base, 50), pct(base, 99)
	b, err := cl.StartBatch(ctx, client.BatchOptions{Action: client.BatchCancel, Query: "queue = 'idle'", Rate: o.BatchRate})
	if err != nil {
		return nil, err
	}
	d.Log.Info("batch: started", "batch_id", b.ID, "runs", b.Total)
	during, err := d.Measure(ctx, r.Probes, o.Rate)
	if err != nil {
		return nil, err
	}
	r.DuringP50ms, r.DuringP99ms = pct(during, 50), pct(during, 99)
	if cur, err := cl.GetBatch(ctx, b.ID); err != nil || cur.State != client.BatchRunning {
		d.Log.Warn("batch: the batch was not running through the second probe load; raise --runs or lower --batch-rate", "state", cur.State, "err", err)
	}
	// The bench reads the batch's progress as an operator would.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := cl.GetBatch(ctx, b.ID)
		if err != nil {
			return nil, err
		}
		if cur.State == client.BatchCompleted {
			r.BatchSec = cur.FinishedAt.Sub(cur.CreatedAt).Seconds()
			r.Done, r.Failed, r.Skipped = cur.Done, cur.Failed, cur.Skipped
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	res, err := cl.Count(ctx, client.CountOptions{Query: "queue = 'idle' AND status = 'CANCELLED'"})
	if err != nil {
		return nil, err
	}
	r.Cancelled = res.Total
	if r.BaseP99ms > 0 {
		r.P99Ratio = r.DuringP99ms / r.BaseP99ms
	}
	r.Met = r.P99Ratio <= r.Target && r.Done == o.Runs && r.Skipped == 0 && r.Failed == 0 && r.Cancelled == int64(o.Runs)
	return r, nil
}

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}
