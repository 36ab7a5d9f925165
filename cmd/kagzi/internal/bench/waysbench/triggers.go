package waysbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// TriggersResult is the figures of the triggers scenario.
type TriggersResult struct {
	Scenario string  `json:"scenario"`
	Events   int     `json:"events"`
	Triggers int     `json:"triggers_matching"`
	Rate     float64 `json:"rate"`
	// PublishSec is the first publish to the last; PublishedPerSec the
	// rate that made. FannedOutPerSec is the events over the first
	// publish to the last fan-out (database clock).
	PublishSec      float64 `json:"publish_sec"`
	PublishedPerSec float64 `json:"published_per_sec"`
	FannedOutPerSec float64 `json:"fanned_out_per_sec"`
	// Fan-out latency: an event's published_at (its publish transaction)
	// to its firings' fired_at (the fan-out transaction that created the
	// runs), in milliseconds.
	LatencyP50ms float64 `json:"fanout_p50_ms"`
	LatencyP99ms float64 `json:"fanout_p99_ms"`
	LatencyMaxMS float64 `json:"fanout_max_ms"`
	// The kills: after how many published events, and how long until the
	// surviving process said it leads (-1: the survivor is not watched).
	DispatcherKilledAt int     `json:"dispatcher_killed_at_event"`
	RelayTakeoverMS    float64 `json:"relay_takeover_ms"`
	ReaperKilledAt     int     `json:"reaper_killed_at_event"`
	ReaperTakeoverMS   float64 `json:"reaper_takeover_ms"`
	// The checks: publish errors; republishes (the same ids again) that
	// created an event; events fanned out, and with exactly one run per
	// matching trigger; distinct runs; the namespace's runs and those
	// completed; the seconds from the last publish until all completed.
	PublishErrors    int     `json:"publish_errors"`
	Republished      int     `json:"republished"`
	RepublishCreated int     `json:"republish_created"`
	FannedOut        int     `json:"fanned_out"`
	ExactlyThree     int     `json:"exactly_three"`
	DistinctRuns     int     `json:"distinct_runs"`
	Runs             int64   `json:"runs"`
	Completed        int64   `json:"completed"`
	DrainSec         float64 `json:"drain_sec"`
	Met              bool    `json:"met"`
}

// Rows implements the bench's Detail.
func (r *TriggersResult) Rows() [][2]string {
	want := r.Events * r.Triggers
	return [][2]string{
		{"scenario", r.Scenario},
		{"events", fmt.Sprintf("%d, each matching %d triggers (and 1 trigger matching none), at %s: %.1f s, %.0f published/s",
			r.Events, r.Triggers, rateText(r.Rate), r.PublishSec, r.PublishedPerSec)},
		{"killed (SIGKILL)", fmt.Sprintf("relay's dispatcher after event %d (other took over in %.0f ms), leading reaper after event %d (other took over in %.0f ms)",
			r.DispatcherKilledAt, r.RelayTakeoverMS, r.ReaperKilledAt, r.ReaperTakeoverMS)},
		{"fanned out", fmt.Sprintf("%.0f events/s (first publish to last fan-out)", r.FannedOutPerSec)},
		{"published -> runs created p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", r.LatencyP50ms, r.LatencyP99ms, r.LatencyMaxMS)},
		{"events fanned out, with exactly one run per trigger", fmt.Sprintf("%d, %d of %d", r.FannedOut, r.ExactlyThree, r.Events)},
		{"runs: distinct / in the namespace / completed", fmt.Sprintf("%d / %d / %d of %d (all completed %.1f s after the last publish)", r.DistinctRuns, r.Runs, r.Completed, want, r.DrainSec)},
		{"publish errors; republished ids that created an event", fmt.Sprintf("%d; %d of %d", r.PublishErrors, r.RepublishCreated, r.Republished)},
		{"every event's runs once, all completed", verdict(r.Met)},
	}
}

func rateText(rate float64) string {
	if rate == 0 {
		return "full speed"
	}
	return fmt.Sprintf("%.0f/s", rate)
}

// The triggers: three match every event the scenario publishes, one none.
var (
	matching = []store.Trigger{{Name: "fanout-exact", Pattern: "order.created"}, {Name: "fanout-star", Pattern: "order.*"},
		{Name: "fanout-rest", Pattern: "order.>"}}
	decoy = store.Trigger{Name: "fanout-none", Pattern: "invoice.>"}
)

// standby is a service process the scenario started with a health
// endpoint, to see when it takes over.
type standby struct {
	cmd   *exec.Cmd
	ready string // its /readyz URL
}

// spawnStandby starts a second process of service with a health endpoint
// and waits until its /readyz names its role (line says whether it leads).
func spawnStandby(ctx context.Context, d Deps, hc *http.Client, service, line string) (standby, error) {
	addr, err := freeAddr()
	if err != nil {
		return standby{}, err
	}
	cmd, err := d.Spawn(ctx, service, "KAGZI_HTTP_ADDR="+addr)
	if err != nil {
		return standby{}, err
	}
	s := standby{cmd: cmd, ready: "http://" + addr + "/readyz"}
	_, err = waitFor(ctx, hc, s.ready, line+": ", 30*time.Second)
	return s, err
}

// victim is the leading process of service: the first one unless the
// standby leads; takeover is whether the standby is to take over.
func victim(ctx context.Context, d Deps, hc *http.Client, s standby, service, line string) (*exec.Cmd, bool, error) {
	if b, _ := get(ctx, hc, s.ready); b != "" && containsLine(b, line+": leader") {
		return s.cmd, false, nil
	}
	ps := d.Procs(service)
	if len(ps) == 0 || ps[0] == s.cmd {
		return nil, false, fmt.Errorf("bench: no %s to kill", service)
	}
	return ps[0], true, nil
}

func containsLine(body, s string) bool {
	for _, l := range strings.Split(body, "\n") {
		if strings.TrimSpace(l) == s {
			return true
		}
	}
	return false
}

// triggers runs the triggers scenario.
func triggers(ctx context.Context, d Deps, o Options) (*TriggersResult, error) {
	r := &TriggersResult{Scenario: "triggers", Events: o.N, Triggers: len(matching), Rate: o.Rate, RelayTakeoverMS: -1, ReaperTakeoverMS: -1}
	for _, t := range append(append([]store.Trigger(nil), matching...), decoy) {
		t.Namespace, t.Type, t.Queue = "bench", "Noop", "bench"
		if _, err := d.Store.TriggersCreate(ctx, t); err != nil {
			return nil, err
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	disp, err := spawnStandby(ctx, d, hc, "dispatcher", "relay")
	if err != nil {
		return nil, err
	}
	reap, err := spawnStandby(ctx, d, hc, "reaper", "reaper")
	if err != nil {
		return nil, err
	}
	want := int64(o.N * len(matching))
	if d.Counter != nil {
		d.Counter.AddTotal(want)
	}
	ids := make([]uuid.UUID, o.N)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	publish := func(i int) (client.Published, error) {
		var err error
		for try := 0; try < 3; try++ {
			var p client.Published
			if p, err = d.Client.Publish(ctx, "order.created", map[string]int{"steps": 1, "n": i},
				client.PublishOptions{EventID: ids[i]}); err == nil {
				return p, nil
			}
		}
		return client.Published{}, err
	}

	// The kills, from the side: the relay's dispatcher at a third of the
	// events, the leading reaper at two thirds.
	var published atomic.Int64
	var errs atomic.Int64
	killer := make(chan error, 1)
	go func() {
		killer <- func() error {
			for _, k := range []struct {
				s             standby
				service, line string
				at            int
				takeMS        *float64
			}{{disp, "dispatcher", "relay", o.N / 3, &r.RelayTakeoverMS}, {reap, "reaper", "reaper", 2 * o.N / 3, &r.ReaperTakeoverMS}} {
				for published.Load() < int64(k.at) {
					if err := sleep(ctx, time.Millisecond); err != nil {
						return err
					}
				}
				cmd, watch, err := victim(ctx, d, hc, k.s, k.service, k.line)
				if err != nil {
					return err
				}
				if err := cmd.Process.Kill(); err != nil {
					return fmt.Errorf("bench: kill %s: %w", k.service, err)
				}
				at := int(published.Load())
				if k.service == "dispatcher" {
					r.DispatcherKilledAt = at
				} else {
					r.ReaperKilledAt = at
				}
				d.Log.Info("triggers: killed", "service", k.service, "pid", cmd.Process.Pid, "after_events", at)
				if watch {
					took, err := waitFor(ctx, hc, k.s.ready, k.line+": leader", time.Minute)
					if err != nil {
						return err
					}
					*k.takeMS = measure.Round2(ms(took))
				}
			}
			return nil
		}()
	}()
	start := time.Now()
	pace(ctx, o.N, o.Rate, func(i int) {
		if _, err := publish(i); err != nil {
			errs.Add(1)
			d.Log.Warn("triggers: publish", "err", err)
		}
		published.Add(1)
	})
	r.PublishSec = measure.Round2(time.Since(start).Seconds())
	r.PublishedPerSec = measure.Round2(float64(o.N) / r.PublishSec)
	if err := <-killer; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.PublishErrors = int(errs.Load())
	// A publisher retrying with the same ids adds nothing.
	r.Republished = min(100, o.N)
	for i := range r.Republished {
		if p, err := publish(i); err != nil {
			return nil, err
		} else if p.Created {
			r.RepublishCreated++
		}
	}

	// Until every run completed, or long after it should have.
	lastPublish := time.Now()
	limit := 2*time.Minute + time.Duration(o.N)*10*time.Millisecond
	var counted int64
	for {
		c, err := d.Client.Count(ctx, client.CountOptions{Query: "status = 'COMPLETED'"})
		if err != nil {
			return nil, err
		}
		if d.Counter != nil && c.Total > counted {
			d.Counter.Add(c.Total - counted)
		}
		counted = c.Total
		if c.Total >= want || time.Since(lastPublish) > limit {
			break
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
	r.DrainSec = measure.Round2(time.Since(lastPublish).Seconds())
	if err := r.check(ctx, d, ids); err != nil {
		return nil, err
	}
	r.Met = r.PublishErrors == 0 && r.RepublishCreated == 0 && r.FannedOut == o.N && r.ExactlyThree == o.N &&
		int64(r.DistinctRuns) == want && r.Runs == want && r.Completed == want && r.DispatcherKilledAt > 0 && r.ReaperKilledAt > 0
	return r, nil
}

// check reads every event's firings and the namespace's runs.
func (r *TriggersResult) check(ctx context.Context, d Deps, ids []uuid.UUID) error {
	var (
		mu         sync.Mutex
		runs       = map[uuid.UUID]bool{}
		lat        []float64
		first, end time.Time
		firstErr   error
	)
	names := map[string]bool{}
	for _, t := range matching {
		names[t.Name] = true
	}
	pace(ctx, len(ids), 0, func(i int) {
		e, err := d.Store.PublishedEventsGet(ctx, "bench", ids[i])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) && firstErr == nil {
				firstErr = err
			}
			return
		}
		if first.IsZero() || e.PublishedAt.Before(first) {
			first = e.PublishedAt
		}
		if e.FannedOutAt == nil {
			return
		}
		r.FannedOut++
		seen := map[string]bool{}
		for _, f := range e.Firings {
			runs[f.RunID] = true
			if names[f.Trigger] {
				seen[f.Trigger] = true
			}
			if f.FiredAt.After(end) {
				end = f.FiredAt
			}
		}
		if len(e.Firings) == len(matching) && len(seen) == len(matching) {
			r.ExactlyThree++
			lat = append(lat, ms(e.Firings[0].FiredAt.Sub(e.PublishedAt)))
		}
	})
	if firstErr != nil {
		return firstErr
	}
	r.DistinctRuns = len(runs)
	if !first.IsZero() && end.After(first) {
		r.FannedOutPerSec = measure.Round2(float64(r.FannedOut) / end.Sub(first).Seconds())
	}
	r.LatencyP50ms, r.LatencyP99ms, r.LatencyMaxMS = measure.Round2(measure.Pct(lat, 50)), measure.Round2(measure.Pct(lat, 99)), measure.Round2(measure.Pct(lat, 100))
	all, err := d.Client.Count(ctx, client.CountOptions{})
	if err != nil {
		return err
	}
	done, err := d.Client.Count(ctx, client.CountOptions{Query: "status = 'COMPLETED'"})
	if err != nil {
		return err
	}
	r.Runs, r.Completed = all.Total, done.Total
	return nil
}
