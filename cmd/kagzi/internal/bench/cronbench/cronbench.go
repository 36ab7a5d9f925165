// Package cronbench is kagzi bench's cron scenario: many schedules firing
// every second for a while, then how late each fire was (the run's
// creation against its fire time), duplicates and missed fire times.
package cronbench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// Defaults and target of the cron scenario.
const (
	DefaultDuration  = 30 * time.Second
	DefaultSchedules = 50
	// TargetP99ms is the most a fire may be late at the 99th percentile.
	TargetP99ms = 10.0
)

// Result is the figures of the cron scenario.
type Result struct {
	Scenario    string  `json:"scenario"`
	Schedules   int     `json:"schedules"`
	Cron        string  `json:"cron"`
	DurationSec float64 `json:"duration_sec"`
	Workers     int     `json:"workers"`
	// Expected fire times in the window (schedules × seconds), Fired runs
	// for them.
	Expected int `json:"expected"`
	Fired    int `json:"fired"`
	// LateP50ms, LateP99ms and LateMaxMS: a fired run's created_at (when the
	// scheduler's transaction began) minus its fire time.
	LateP50ms float64 `json:"late_p50_ms"`
	LateP99ms float64 `json:"late_p99_ms"`
	LateMaxMS float64 `json:"late_max_ms"`
	// Duplicates are fire times fired more than once; Missed are expected
	// fire times with no run.
	Duplicates int     `json:"duplicates"`
	Missed     int     `json:"missed"`
	TargetP99  float64 `json:"target_p99_ms"`
	Met        bool    `json:"met"`
}

// Rows implements the bench's Detail.
func (r *Result) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"schedules", fmt.Sprintf("%d × %q for %.0f s (%d workers run the fired runs)", r.Schedules, r.Cron, r.DurationSec, r.Workers)},
		{"fire times", fmt.Sprintf("%d expected, %d fired", r.Expected, r.Fired)},
		{"late p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms (target p99 <= %.0f ms: %s)", r.LateP50ms, r.LateP99ms, r.LateMaxMS, r.TargetP99, verdict(r.Met))},
		{"duplicates", fmt.Sprintf("%d (must be 0)", r.Duplicates)},
		{"missed", fmt.Sprintf("%d", r.Missed)},
	}
}

// cronStats computes lateness percentiles, duplicates and missed fire
// times of fires against the expected ones: every schedule at every whole
// second in [from, to).
func cronStats(fires []store.ScheduleFire, schedules []uuid.UUID, from, to time.Time) (r Result) {
	type key struct {
		id uuid.UUID
		at int64
	}
	seen := map[key]int{}
	late := make([]float64, 0, len(fires))
	for _, f := range fires {
		seen[key{f.ScheduleID, f.FireAt.UnixMilli()}]++
		late = append(late, f.LateMS)
	}
	for _, n := range seen {
		if n > 1 {
			r.Duplicates++
		}
	}
	for t := from; t.Before(to); t = t.Add(time.Second) {
		for _, id := range schedules {
			r.Expected++
			if seen[key{id, t.UnixMilli()}] == 0 {
				r.Missed++
			}
		}
	}
	r.Fired = len(fires)
	r.LateP50ms, r.LateP99ms, r.LateMaxMS = measure.Round2(measure.Pct(late, 50)), measure.Round2(measure.Pct(late, 99)), measure.Round2(measure.Pct(late, 100))
	return r
}

// Deps is what the bench gives the scenario: its client and store on the
// bench database, its log, and how many workers run the fired runs.
type Deps struct {
	Client  *client.Client
	Store   *store.Store
	Log     *slog.Logger
	Workers int
}

// Options are the scenario's settings: Schedules schedules firing every
// second for Duration.
type Options struct {
	Schedules int
	Duration  time.Duration
}

// Run creates the schedules, waits out the window and reads the fires.
func Run(ctx context.Context, d Deps, o Options) (*Result, error) {
	const expr = "* * * * * *"
	ids := make([]uuid.UUID, 0, o.Schedules)
	for i := 0; i < o.Schedules; i++ {
		sc, err := d.Client.CreateSchedule(ctx, "Noop", map[string]int{"steps": 0}, client.ScheduleOptions{Cron: expr})
		if err != nil {
			return nil, err
		}
		ids = append(ids, sc.ID)
	}
	// The window starts at the second whole second from now, so every
	// schedule is armed well before its first counted fire time.
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(o.Duration.Truncate(time.Second))
	d.Log.Info("cron: schedules created", "schedules", len(ids), "window_from", from, "window_to", to)
	// Let the last fire times of the window fire, then stop the schedules.
	t := time.NewTimer(time.Until(to) + 2*time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	for _, id := range ids {
		if _, err := d.Client.PauseSchedule(ctx, id); err != nil {
			return nil, err
		}
	}
	fires, err := d.Store.SchedulesFires(ctx, "bench", from, to)
	if err != nil {
		return nil, err
	}
	r := cronStats(fires, ids, from, to)
	r.Scenario, r.Schedules, r.Cron, r.DurationSec, r.Workers = "cron", len(ids), expr, to.Sub(from).Seconds(), d.Workers
	r.TargetP99 = TargetP99ms
	r.Met = r.LateP99ms <= r.TargetP99 && r.Duplicates == 0 && r.Missed == 0
	return &r, nil
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}
