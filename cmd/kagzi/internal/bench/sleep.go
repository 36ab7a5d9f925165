package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// The sleep scenario: durable sleeps are woken by the dispatchers' timers,
// not by scans, so a run wakes close to its due time however many sleep.

// DefaultSleepRuns is the sleep scenario's number of runs.
const DefaultSleepRuns = 2000

// DefaultSleepRate is the sleep scenario's default start rate (runs per
// second): the runs start over 4 s, so that their wake-ups, not a backlog
// of first executions, are what the figures measure. --rate 0 starts them
// all at once.
const DefaultSleepRate = 500

// Sleep durations of the sleep scenario, drawn uniformly.
const (
	sleepMinMS = 100
	sleepMaxMS = 1000
)

// SleepResult is the sleep scenario's figures. Lateness is the time from a
// run's due time (the wake time its SLEEP step recorded when the sleep
// began) to its code running again after the sleep (a step recording
// time.Now()).
type SleepResult struct {
	Scenario    string `json:"scenario"`
	Runs        int    `json:"runs"`
	Failed      int    `json:"failed"`
	Workers     int    `json:"workers"`
	Dispatchers int    `json:"dispatchers"`
	SleepMinMS  int    `json:"sleep_min_ms"`
	SleepMaxMS  int    `json:"sleep_max_ms"`
	// StartRate is the start rate in runs per second (0: all at once).
	StartRate   float64 `json:"start_rate"`
	DurationSec float64 `json:"duration_sec"`
	LateP50ms   float64 `json:"late_p50_ms"`
	LateP99ms   float64 `json:"late_p99_ms"`
	LateMaxMS   float64 `json:"late_max_ms"`
	// Early counts runs that woke before their due time (must be 0).
	Early int `json:"early"`
}

// Rows implements Detail.
func (r *SleepResult) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"runs", fmt.Sprintf("%d (failed %d), each sleeping %d-%d ms, started at %s", r.Runs, r.Failed, r.SleepMinMS, r.SleepMaxMS, rate(r.StartRate))},
		{"processes", fmt.Sprintf("%d dispatcher, %d workers", r.Dispatchers, r.Workers)},
		{"duration", fmt.Sprintf("%.2f s", r.DurationSec)},
		{"late p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", r.LateP50ms, r.LateP99ms, r.LateMaxMS)},
		{"woke early", fmt.Sprint(r.Early)},
	}
}

func rate(r float64) string {
	if r <= 0 {
		return "once"
	}
	return fmt.Sprintf("%.0f/s", r)
}

// sleepOutput is what the SleepProbe example workflow returns.
type sleepOutput struct {
	WokeNS int64 `json:"woke_ns"`
}

// sleep starts o.Runs SleepProbe runs at o.Rate per second (all at once
// when 0), each sleeping a random 100-1000 ms, waits for all, and reports
// how late they woke.
func (e *env) sleep(ctx context.Context) (*Result, error) {
	o := e.o
	all := e.done.expect(o.Runs)
	start := time.Now()
	var handles []*client.Handle
	// Starts go in chunks: every 10 ms at a rate, else 1000 at a time.
	chunk, tick := 1000, time.Duration(0)
	if o.Rate > 0 {
		chunk, tick = max(1, int(o.Rate/100)), 10*time.Millisecond
	}
	for i := 0; i < o.Runs; i += chunk {
		if tick > 0 && i > 0 {
			due := start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		reqs := make([]client.StartRequest, min(chunk, o.Runs-i))
		for j := range reqs {
			reqs[j] = sleepProbeStart()
		}
		hs, err := e.cl.StartMany(ctx, reqs)
		if err != nil {
			return nil, err
		}
		handles = append(handles, hs...)
	}
	if err := wait(ctx, all, o.Runs, e.done); err != nil {
		return nil, err
	}
	res := &SleepResult{Scenario: o.Scenario, Runs: o.Runs, Failed: e.done.failed(), Workers: o.Workers,
		Dispatchers: o.Dispatchers, SleepMinMS: sleepMinMS, SleepMaxMS: sleepMaxMS, StartRate: o.Rate, DurationSec: time.Since(start).Seconds()}
	late, early, err := e.lateness(ctx, handles)
	if err != nil {
		return nil, err
	}
	res.Early = early
	res.LateP50ms, res.LateP99ms, res.LateMaxMS = pct(late, 50), pct(late, 99), pct(late, 100)
	return &Result{Scenario: o.Scenario, Runs: o.Runs, Workers: o.Workers, Dispatchers: o.Dispatchers, Detail: res}, nil
}

// sleepProbeStart is the start of a SleepProbe run sleeping a random
// sleepMinMS-sleepMaxMS.
func sleepProbeStart() client.StartRequest {
	ms := sleepMinMS + rand.IntN(sleepMaxMS-sleepMinMS+1)
	return client.StartRequest{Type: "SleepProbe", Input: map[string]int{"sleep_ms": ms}}
}

// lateness reads how late each finished SleepProbe run of handles woke, in
// milliseconds, and how many woke before their due time.
func (e *env) lateness(ctx context.Context, handles []*client.Handle) (late []float64, early int, err error) {
	l, err := e.latenessParts(ctx, handles)
	return l.late, l.early, err
}

// latenessParts is what lateness reads, with each run's lateness split at
// the time its sleep was recorded (the SLEEP step row's created_at, the
// report transaction's time): recorded is how late the run became
// claimable (0 when the sleep was recorded before its due time), claimed
// the rest, from then to the code running again.
type latenessParts struct {
	late, recorded, claimed []float64
	early                   int
	// hops are each woken run's claimable → running, for --hops.
	hops []hopRun
}

func (e *env) latenessParts(ctx context.Context, handles []*client.Handle) (res latenessParts, err error) {
	for _, h := range handles {
		r, err := e.cl.Get(ctx, h.RunID)
		if err != nil {
			return res, err
		}
		var out sleepOutput
		if err := json.Unmarshal(r.Output, &out); err != nil || out.WokeNS == 0 {
			continue // failed runs are counted by the caller
		}
		steps, err := e.st.StepsList(ctx, r.Namespace, r.ID)
		if err != nil {
			return res, err
		}
		var due, rec time.Time
		for _, s := range steps {
			if s.StepID == "sleep" && s.Kind == store.StepSleep {
				rec = s.CreatedAt
				if err := json.Unmarshal(s.Output, &due); err != nil {
					return res, fmt.Errorf("bench: run %s: sleep step output: %w", r.ID, err)
				}
			}
		}
		if due.IsZero() {
			continue
		}
		l := float64(out.WokeNS-due.UnixNano()) / 1e6
		if l < 0 {
			res.early++
		}
		res.late = append(res.late, l)
		claimable := due
		if rec.After(due) {
			claimable = rec
		}
		res.recorded = append(res.recorded, float64(claimable.Sub(due))/1e6)
		res.claimed = append(res.claimed, float64(out.WokeNS-claimable.UnixNano())/1e6)
		res.hops = append(res.hops, hopRun{id: r.ID, started: claimable.UnixNano(), committed: claimable.UnixNano(), running: out.WokeNS})
	}
	return res, nil
}

// SleepLoad is how late the throughput scenario's sleepers (--sleepers)
// woke while the load ran: SleepProbe runs started among the first half
// of the no-op runs, so that they fall due while a backlog of runs started
// before their due time waits to be claimed.
type SleepLoad struct {
	Runs       int     `json:"runs"`
	SleepMinMS int     `json:"sleep_min_ms"`
	SleepMaxMS int     `json:"sleep_max_ms"`
	LateP50ms  float64 `json:"late_p50_ms"`
	LateP99ms  float64 `json:"late_p99_ms"`
	LateMaxMS  float64 `json:"late_max_ms"`
	// Early counts runs that woke before their due time (must be 0).
	Early int `json:"early"`
	// RecordedLate counts sleeps recorded after their due time (the
	// worker's report committed late), and RecordedP99ms is how late;
	// ClaimedP50ms/P99ms are the lateness from the later of the due time
	// and the record to the code running again (claim and delivery).
	RecordedLate  int     `json:"recorded_late"`
	RecordedP99ms float64 `json:"recorded_p99_ms"`
	ClaimedP50ms  float64 `json:"claimed_p50_ms"`
	ClaimedP99ms  float64 `json:"claimed_p99_ms"`
}

// Rows are the sleepers' lines of the throughput table (none without
// sleepers).
func (s *SleepLoad) Rows() [][2]string {
	if s == nil {
		return nil
	}
	return [][2]string{
		{"sleepers", fmt.Sprintf("%d, each sleeping %d-%d ms, started among the first half of the runs", s.Runs, s.SleepMinMS, s.SleepMaxMS)},
		{"sleepers late p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", s.LateP50ms, s.LateP99ms, s.LateMaxMS)},
		{"sleepers woke early", fmt.Sprint(s.Early)},
		{"sleeps recorded late", fmt.Sprintf("%d (p99 %.2f ms after the due time)", s.RecordedLate, s.RecordedP99ms)},
		{"sleepers claimed p50 / p99", fmt.Sprintf("%.2f / %.2f ms after due and recorded", s.ClaimedP50ms, s.ClaimedP99ms)},
	}
}
