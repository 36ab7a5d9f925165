package bench

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// ScaleTargetPct is how far below the empty table's throughput a full
// one may fall.
const ScaleTargetPct = 10.0

// ScaleResult is the figures of the scale scenario.
type ScaleResult struct {
	Scenario    string      `json:"scenario"`
	Runs        int         `json:"runs"`
	Steps       int         `json:"steps"`
	Repeat      int         `json:"repeat"`
	Workers     int         `json:"workers"`
	Dispatchers int         `json:"dispatchers"`
	TargetPct   float64     `json:"target_pct"`
	Met         bool        `json:"met"`
	Results     []ScaleSize `json:"results"`
}

// ScaleSize is the throughput at one size of the history.
type ScaleSize struct {
	FinishedRows int `json:"finished_rows"`
	// RunsPerSec is the median of the repeats; Samples are all of them.
	RunsPerSec float64   `json:"runs_per_sec"`
	Samples    []float64 `json:"samples"`
	// VsEmptyPct is the change from the first size (the empty table).
	VsEmptyPct float64 `json:"vs_empty_pct"`
	// LoadSec is how long inserting this size's new history took.
	LoadSec float64 `json:"load_sec"`
	Failed  int     `json:"failed"`
	// ClaimPlan is EXPLAIN ANALYZE of the claim statement at this size.
	ClaimPlan ClaimPlan `json:"claim_plan"`
	// DispatchP50ms and DispatchP99ms are the dispatch latency (start
	// commit to the run's code running) of scaleLatencyRuns one-step runs
	// started at scaleLatencyRate per second, after the throughput rounds.
	DispatchP50ms float64 `json:"dispatch_p50_ms"`
	DispatchP99ms float64 `json:"dispatch_p99_ms"`
	// DispatchP99VsEmptyPct is the change of DispatchP99ms from the first
	// size.
	DispatchP99VsEmptyPct float64 `json:"dispatch_p99_vs_empty_pct"`
}

// The latency workload of every size: the latency scenario's default
// rate, for 10 s.
const (
	scaleLatencyRuns = 2000
	scaleLatencyRate = 200
)

// ClaimPlan is what EXPLAIN (ANALYZE, BUFFERS) says of one claim of
// claimPlanRuns due runs (rolled back): unlike throughput, which shares two
// cores with everything, it does not move with the machine's load.
type ClaimPlan struct {
	// ExecMS is the median execution time of five explains.
	ExecMS float64 `json:"exec_ms"`
	// Buffers are the shared buffers the statement touched (hit + read).
	Buffers int `json:"buffers"`
	// ClaimIndex: the plan reads the claim's partial index.
	ClaimIndex bool `json:"claim_index"`
}

// claimPlanRuns due runs wait in their own queue for the claim explains.
const (
	claimPlanRuns  = 256
	claimPlanQueue = "bench-explain"
)

var (
	reExecTime = regexp.MustCompile(`Execution Time: ([0-9.]+) ms`)
	reBuffers  = regexp.MustCompile(`Buffers: shared((?: (?:hit|read|dirtied|written)=[0-9]+)+)`)
	reBufCount = regexp.MustCompile(`(hit|read)=([0-9]+)`)
)

// parsePlan reads the execution time, the buffers of the top node and
// whether the claim index is used from an EXPLAIN (ANALYZE, BUFFERS) text.
func parsePlan(plan string) (execMS float64, buffers int, claimIndex bool) {
	if m := reExecTime.FindStringSubmatch(plan); m != nil {
		execMS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reBuffers.FindStringSubmatch(plan); m != nil {
		for _, c := range reBufCount.FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(c[2])
			buffers += n
		}
	}
	return execMS, buffers, strings.Contains(plan, "workflow_runs_claim_started_idx")
}

// claimPlan explains the claim of the runs in claimPlanQueue five times.
func (e *env) claimPlan(ctx context.Context) (ClaimPlan, error) {
	var p ClaimPlan
	var times []float64
	for i := 0; i < 5; i++ {
		plan, err := e.st.RunsClaimExplain(ctx, store.RunsClaimParams{Namespace: "bench", Queue: claimPlanQueue, WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "Noop"}}, Limit: claimPlanRuns, Lease: 30 * time.Second})
		if err != nil {
			return p, err
		}
		ms, buf, idx := parsePlan(plan)
		times = append(times, ms)
		p.Buffers, p.ClaimIndex = buf, idx
	}
	p.ExecMS = measure.Round2(median(times))
	return p, nil
}

// Rows implements Detail.
func (r *ScaleResult) Rows() [][2]string {
	rows := [][2]string{
		{"scenario", r.Scenario},
		{"workload", fmt.Sprintf("%d runs of %d step(s), median of %d", r.Runs, r.Steps, r.Repeat)},
		{"processes", fmt.Sprintf("%d dispatcher, 1 scheduler, 1 reaper, %d workers", r.Dispatchers, r.Workers)},
	}
	for _, s := range r.Results {
		rows = append(rows, [2]string{fmt.Sprintf("%d finished runs", s.FinishedRows),
			fmt.Sprintf("%.0f runs/s (%+.1f %% vs empty; samples %s; loaded in %.1f s; failed %d)",
				s.RunsPerSec, s.VsEmptyPct, fmtSamples(s.Samples), s.LoadSec, s.Failed)})
		idx := "claim index"
		if !s.ClaimPlan.ClaimIndex {
			idx = "NOT the claim index"
		}
		rows = append(rows, [2]string{"  claim of 256 (explain)", fmt.Sprintf("%.2f ms, %d buffers, %s", s.ClaimPlan.ExecMS, s.ClaimPlan.Buffers, idx)})
		rows = append(rows, [2]string{fmt.Sprintf("  dispatch at %d/s", scaleLatencyRate),
			fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (%+.1f %% vs empty)", s.DispatchP50ms, s.DispatchP99ms, s.DispatchP99VsEmptyPct)})
	}
	rows = append(rows, [2]string{"target", fmt.Sprintf("throughput and dispatch p99 within %.0f %% of the empty table: %s", r.TargetPct, verdict(r.Met))})
	return rows
}

func fmtSamples(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// historyChunk is the most finished runs one INSERT makes.
const historyChunk = 1_000_000

func (e *env) scale(ctx context.Context) (Detail, error) {
	o := e.o
	r := &ScaleResult{Scenario: "scale", Runs: o.Runs, Steps: o.Steps, Repeat: o.Repeat, Workers: len(e.x.workers),
		Dispatchers: o.Dispatchers, TargetPct: ScaleTargetPct, Met: true}
	sizes := append([]int(nil), o.Sizes...)
	sort.Ints(sizes)
	// Warm up every process (connections, caches, the Go runtime) so the
	// first size is not measured cold.
	if _, _, err := e.round(ctx, min(o.Runs, 2000), o.Steps); err != nil {
		return nil, err
	}
	// Due runs no worker takes (another queue), for the claim explains.
	reqs := make([]client.StartRequest, claimPlanRuns)
	for i := range reqs {
		reqs[i] = client.StartRequest{Type: "Noop", Input: map[string]int{"steps": o.Steps}, Options: client.StartOptions{Queue: claimPlanQueue}}
	}
	if _, err := e.cl.StartMany(ctx, reqs); err != nil {
		return nil, err
	}
	var loaded int64
	before := time.Now().Add(-24 * time.Hour)
	for _, size := range sizes {
		s := ScaleSize{FinishedRows: size}
		t0 := time.Now()
		for loaded < int64(size) {
			n := min(int64(size)-loaded, historyChunk)
			o.Log.Info("scale: inserting finished runs", "from", loaded, "count", n)
			// Older rows first: each chunk ends where the previous began.
			got, err := e.st.RunsInsertFinished(ctx, store.RunsInsertFinishedParams{Namespace: "bench", Queue: "bench", Type: "Noop",
				From: loaded, Count: n, Before: before.Add(-time.Duration(loaded) * time.Millisecond)})
			if err != nil {
				return nil, err
			}
			loaded += got
		}
		if err := e.st.Analyze(ctx); err != nil {
			return nil, err
		}
		if err := measure.Checkpoint(ctx, e.pool); err != nil {
			o.Log.Warn("scale: checkpoint", "err", err)
		}
		s.LoadSec = measure.Round2(time.Since(t0).Seconds())
		var err error
		if s.ClaimPlan, err = e.claimPlan(ctx); err != nil {
			return nil, err
		}
		for i := 0; i < o.Repeat; i++ {
			el, failed, err := e.round(ctx, o.Runs, o.Steps)
			if err != nil {
				return nil, err
			}
			s.Samples = append(s.Samples, measure.Round2(float64(o.Runs)/el.Seconds()))
			s.Failed += failed
			o.Log.Info("scale: round", "finished_rows", size, "runs_per_sec", s.Samples[len(s.Samples)-1])
		}
		s.RunsPerSec = measure.Round2(median(s.Samples))
		lat, err := e.measureLatency(ctx, scaleLatencyRuns, scaleLatencyRate)
		if err != nil {
			return nil, err
		}
		s.DispatchP50ms, s.DispatchP99ms = measure.Round2(pct(lat.dispatch, 50)), measure.Round2(pct(lat.dispatch, 99))
		s.Failed += lat.failed
		o.Log.Info("scale: latency", "finished_rows", size, "dispatch_p50_ms", s.DispatchP50ms, "dispatch_p99_ms", s.DispatchP99ms)
		r.Results = append(r.Results, s)
	}
	if len(r.Results) > 0 && r.Results[0].RunsPerSec > 0 {
		base := r.Results[0].RunsPerSec
		for i := range r.Results {
			r.Results[i].VsEmptyPct = measure.Round2((r.Results[i].RunsPerSec - base) / base * 100)
			if r.Results[i].VsEmptyPct < -r.TargetPct {
				r.Met = false
			}
			if p99 := r.Results[0].DispatchP99ms; p99 > 0 {
				r.Results[i].DispatchP99VsEmptyPct = measure.Round2((r.Results[i].DispatchP99ms - p99) / p99 * 100)
				if r.Results[i].DispatchP99VsEmptyPct > r.TargetPct {
					r.Met = false
				}
			}
		}
	}
	return r, nil
}
