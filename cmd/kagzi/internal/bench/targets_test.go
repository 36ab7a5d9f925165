package bench

import (
	"strings"
	"testing"
)

func TestTargetsRowsGiveEachVerdict(t *testing.T) {
	r := &TargetsResult{Scenario: "targets", Ratios: []Ratio{
		ratio("1-step runs/s / River jobs/s", 6000, 24000, 0.45, false),
		ratio("dispatch p99 / River insert→start p99 (ms)", 3, 4, 1, true),
		bound("sleep lateness p99 under the saturating 1-step load (ms)", 12, SleepLateSaturatedTarget),
		bound("Postgres CPU per one-step run (µs)", 61.5, CPUPostgresTarget),
	}}
	rows := r.Rows()
	want := map[string]string{
		"1-step runs/s / River jobs/s":                             "6000.00 / 24000.00 = 0.25 (target ≥ 0.45: MISSED)",
		"dispatch p99 / River insert→start p99 (ms)":               "3.00 / 4.00 = 0.75 (target ≤ 1.00: met)",
		"sleep lateness p99 under the saturating 1-step load (ms)": "12.00 (target ≤ 30.00: met)",
		"Postgres CPU per one-step run (µs)":                       "61.50 (target ≤ 60.00: MISSED)",
	}
	got := map[string]string{}
	for _, row := range rows {
		got[row[0]] = row[1]
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if !strings.Contains(partLine(&Result{Scenario: "latency", Runs: 10, DispatchP50ms: 1, DispatchP99ms: 2}), "dispatch p50 1.00 ms") {
		t.Error("latency part line lacks its dispatch figures")
	}
}
