package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/consolebench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/cronbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/store"
)

// Fast tests of the bench's pure helpers; the scenarios themselves run
// with `make bench` (docs/BENCHMARKS.md), not in `make test`.

func TestPercentiles(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		p, want float64
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := pct(xs, c.p); got != c.want {
			t.Errorf("pct(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if pct(nil, 50) != 0 || median(nil) != 0 {
		t.Error("empty input must give 0")
	}
	if xs[0] != 5 {
		t.Error("pct sorted its input in place")
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
}

func TestCountConnections(t *testing.T) {
	bs := []measure.Backend{
		{ApplicationName: "kagzi-dispatcher"}, {ApplicationName: "kagzi-dispatcher"},
		{ApplicationName: "kagzi-reaper"}, {ApplicationName: benchApp}, {ApplicationName: ""},
	}
	n, by := countConnections(bs)
	if n != 4 || by["kagzi-dispatcher"] != 2 || by["kagzi-reaper"] != 1 || by[""] != 1 || by[benchApp] != 0 {
		t.Fatalf("count = %d %v", n, by)
	}
	if got := fmtByService(by); got != " 1, kagzi-dispatcher 2, kagzi-reaper 1" {
		t.Fatalf("fmtByService = %q", got)
	}
}

func TestTallyDiff(t *testing.T) {
	d := tallyDiff(map[string]int64{"begin": 5, "commit": 5, "SELECT 1": 2}, map[string]int64{"begin": 1, "commit": 5})
	if len(d) != 2 || d["begin"] != 4 || d["SELECT 1"] != 2 {
		t.Fatalf("tallyDiff = %v", d)
	}
}

func TestCostOf(t *testing.T) {
	d := measure.DBStats{XactCommit: 150, XactRollback: 10, TupInserted: 300, TupUpdated: 301, WALBytes: 578500}
	c := costOf(d, map[string]int64{"claim (RunsClaim)": 3, "begin": 6}, 100, true)
	if c.XactsPerRun != 1.6 || c.TupInsertedPerRun != 3 || c.TupUpdatedPerRun != 3.01 || c.WALBytesPerRun != 5785 {
		t.Fatalf("cost %+v", c)
	}
	if c.StatementsPerRun != 0.09 || len(c.Statements) != 2 || c.Statements[0].Statement != "begin" || c.Statements[0].PerRun != 0.06 {
		t.Fatalf("statements %+v", c)
	}
	if rows := c.Rows(); len(rows) != 4 || !strings.Contains(rows[0][1], "1.600 transactions") {
		t.Fatalf("rows %v", rows)
	}
	if c := costOf(d, nil, 100, false); c.StatementsPerRun != 0 || c.Statements != nil || len(c.Rows()) != 1 {
		t.Fatalf("uncounted cost %+v", c)
	}
	var nilCost *Cost
	if nilCost.Rows() != nil {
		t.Fatal("nil cost has rows")
	}
}

func TestResultJSONAndTable(t *testing.T) {
	// A scenario with a Detail prints the detail alone.
	r := &Result{Scenario: "recovery", Workers: 2, Detail: &RecoveryResult{Scenario: "recovery", Runs: 100, WorkerTimeoutMS: 2000,
		RecoveryMS: 2050.5, TargetMS: 2100, Met: true}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["scenario"] != "recovery" || m["recovery_ms"] != 2050.5 || m["met"] != true {
		t.Fatalf("json %s", b)
	}
	if _, ok := m["runs_per_sec"]; ok {
		t.Fatalf("json of a detail has the throughput fields: %s", b)
	}
	// Others print their fields, and the cost when there is one.
	b, err = json.Marshal(&Result{Scenario: "throughput", Runs: 10, Cost: &Cost{Source: "x", XactsPerRun: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"runs_per_sec":0`)) || !bytes.Contains(b, []byte(`"postgres":{"source":"x","xacts_per_run":0.5`)) {
		t.Fatalf("json %s", b)
	}
	if bytes.Contains(b, []byte("Detail")) {
		t.Fatalf("json %s", b)
	}
	b, _ = json.Marshal(&Result{Scenario: "latency"})
	if bytes.Contains(b, []byte("postgres")) {
		t.Fatalf("json %s", b)
	}

	var out bytes.Buffer
	if err := WriteTable(&out, [][2]string{{"scenario", "idle"}, {"statements/s", "0.2"}}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "scenario      idle\nstatements/s  0.2\n" {
		t.Fatalf("table %q", out.String())
	}
}

func TestDetailRows(t *testing.T) {
	details := []Detail{
		&IdleResult{Scenario: "idle", Workers: 10, Dispatchers: 1, DurationSec: 30, WindowSec: 41, Statements: 12,
			StatementsPerSec: 0.29, Source: "pg_stat_database", Target: 0.5, Met: true, PgStatStatements: "unavailable",
			Observed: []measure.ObservedStatement{{Service: "kagzi-reaper", Statement: "extend leases", Count: 4}}},
		&ScaleResult{Scenario: "scale", Runs: 10000, Steps: 1, Repeat: 3, TargetPct: 10,
			Results: []ScaleSize{{FinishedRows: 0, RunsPerSec: 2000, Samples: []float64{1900, 2000, 2100}}, {FinishedRows: 1000000, RunsPerSec: 1900, VsEmptyPct: -5}}},
		&ConnectionsResult{Scenario: "connections", Connections1Worker: 8, Connections50Workers: 8, ByService1: map[string]int{"kagzi-dispatcher": 5}, Met: true},
		&cronbench.Result{Scenario: "cron", Schedules: 50, Cron: "* * * * * *", LateP99ms: 12, TargetP99: 10},
		&RecoveryResult{Scenario: "recovery", Runs: 100, RecoveryMS: 2050, TargetMS: 2100, Met: true},
		&consolebench.Result{Scenario: "console", FinishedRuns: 5_000_000, Requests: 200, PageP50MS: 2.5, PageP99MS: 7.25, TargetMS: 100, Met: true},
	}
	wants := []string{"0.290 (target <= 0.5: met)", "-5.0 % vs empty; samples ;", "kagzi-dispatcher 5", "MISSED", "2050.0 ms (target <= 2100 ms: met)",
		"2.50 ms / 7.25 ms"}
	for i, d := range details {
		var out bytes.Buffer
		if err := WriteTable(&out, d.Rows()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), wants[i]) {
			t.Errorf("table of %T does not contain %q:\n%s", d, wants[i], out.String())
		}
		if b, err := json.Marshal(d); err != nil || !bytes.Contains(b, []byte(`"scenario"`)) {
			t.Errorf("json of %T: %s %v", d, b, err)
		}
	}
}

func TestScenarioDefaults(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want func(o Options) bool
	}{
		{Options{Scenario: "idle"}, func(o Options) bool { return o.Duration == DefaultIdleDuration && o.Workers == 10 }},
		{Options{Scenario: "scale"}, func(o Options) bool {
			return o.Runs == DefaultScaleRuns && len(o.Sizes) == 3 && o.Sizes[2] == 5_000_000 && o.Repeat == 3
		}},
		{Options{Scenario: "connections", Workers: 7}, func(o Options) bool { return o.Workers == 1 && o.Runs == DefaultConnRuns }},
		{Options{Scenario: "cron"}, func(o Options) bool { return o.Schedules == 50 && o.Duration == cronbench.DefaultDuration }},
		{Options{Scenario: "recovery", Concurrency: 10}, func(o Options) bool {
			return o.Workers == 1 && o.Runs == 100 && o.Concurrency == 100
		}},
		{Options{Scenario: "console"}, func(o Options) bool {
			return o.Workers == 1 && o.Runs == consolebench.DefaultRuns && o.Repeat == consolebench.DefaultRequests
		}},
	} {
		o := c.o
		o.Exe = "kagzi"
		if err := o.defaults(); err != nil || !c.want(o) {
			t.Errorf("defaults of %s: %+v %v", c.o.Scenario, o, err)
		}
	}
	for _, sc := range []string{"triggers", "webhooks"} {
		o := Options{Scenario: sc, Dispatchers: 3, Exe: "kagzi"}
		if err := o.defaults(); err != nil || o.Dispatchers != 1 {
			t.Errorf("defaults of %s: %+v %v", sc, o, err)
		}
	}
	for _, o := range []Options{{Scenario: "nope"}, {Scenario: "scale", Sizes: []int{0, -1}}, {Scenario: "triggers", Runs: 100_001}, {Scenario: "webhooks", Rate: 10_001}} {
		o.Exe = "kagzi"
		if err := o.defaults(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("defaults of %+v: %v", o, err)
		}
	}
	o := Options{}
	if o.workerTimeout() != DefaultWorkerTimeout || o.heartbeatInterval() != DefaultWorkerTimeout/4 {
		t.Error("worker timeout defaults")
	}
	env := strings.Join((&Options{WorkerTimeout: 4 * time.Second}).serviceEnv(), " ")
	if !strings.Contains(env, "KAGZI_WORKER_TIMEOUT=4s") || !strings.Contains(env, "KAGZI_HEARTBEAT_INTERVAL=1s") {
		t.Errorf("service env %s", env)
	}
}

func TestParsePlan(t *testing.T) {
	plan := `Update on workflow_runs r  (cost=1.2..3.4 rows=1 width=2) (actual time=0.5..1.5 rows=256 loops=1)
  Buffers: shared hit=1200 read=34 dirtied=5
  ->  Index Scan using workflow_runs_claim_started_idx on workflow_runs  (cost=0.1..2 rows=1 width=2)
        Buffers: shared hit=3
Planning Time: 0.321 ms
Execution Time: 2.125 ms`
	ms, buf, idx := parsePlan(plan)
	if ms != 2.125 || buf != 1234 || !idx {
		t.Fatalf("parsePlan = %v %v %v", ms, buf, idx)
	}
	if ms, buf, idx := parsePlan("Seq Scan on workflow_runs"); ms != 0 || buf != 0 || idx {
		t.Fatalf("parsePlan of a bare plan = %v %v %v", ms, buf, idx)
	}
}
