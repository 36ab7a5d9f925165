package bench

import (
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
)

func TestCompareRiver(t *testing.T) {
	res := &Result{Scenario: "throughput", Steps: 1, RunsPerSec: 6000,
		CPU:   &measure.CPU{PostgresUSPerRun: 45, ServicesUSPerRun: 90},
		River: &RiverResult{JobsPerSec: 10000, CPU: &measure.CPU{PostgresUSPerRun: 30, ServicesUSPerRun: 20}}}
	rs := compare(res)
	if len(rs) != 3 {
		t.Fatalf("ratios: %+v", rs)
	}
	if r := rs[0]; r.Ratio != 0.6 || !r.Met || r.Target != 0.45 {
		t.Errorf("runs/s ratio: %+v", r)
	}
	if r := rs[1]; r.Ratio != 1.5 || !r.Met || !r.Max {
		t.Errorf("postgres ratio: %+v", r)
	}
	if r := rs[2]; r.Ratio != 4.5 || r.Met {
		t.Errorf("services ratio: %+v", r)
	}
	// Ten steps: per step against per job, steps/s against jobs/s.
	res.Steps, res.StepsPerSec = 10, 12000
	res.CPU = &measure.CPU{PostgresUSPerRun: 400, ServicesUSPerRun: 500}
	rs = compare(res)
	if r := rs[0]; r.Ratio != 1.2 || !r.Met || r.Target != 1 {
		t.Errorf("steps/s ratio: %+v", r)
	}
	if r := rs[1]; r.Kagzi != 40 || r.Ratio != 1.33 {
		t.Errorf("postgres per step: %+v", r)
	}
	lat := compare(&Result{Scenario: "latency", DispatchP50ms: 0.5, DispatchP99ms: 3, River: &RiverResult{StartP50ms: 1, StartP99ms: 4}})
	if len(lat) != 2 || !lat[0].Met || !lat[1].Met {
		t.Errorf("latency ratios: %+v", lat)
	}
	if rows := comparisonRows(res.River, rs); len(rows) < 4 {
		t.Errorf("rows: %v", rows)
	}
}
