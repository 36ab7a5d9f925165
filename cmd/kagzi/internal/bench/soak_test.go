package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/natsserver"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
)

// childEnv makes the test binary act as the kagzi binary's `serve` and
// `chaos --serve-nats` commands when the bench spawns it (Options.Exe), so
// a scenario runs in a test without building kagzi first.
const childEnv = "KAGZI_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" && len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		if err := serveChild(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild runs what the bench asked its executable for.
func serveChild(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case len(args) == 2 && args[0] == "serve":
		return devserver.Serve(ctx, args[1], RegisterWorkflows)
	case len(args) == 3 && args[0] == "chaos" && args[1] == "--serve-nats":
		port, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		mport, _ := strconv.Atoi(os.Getenv("KAGZI_NATS_MONITOR_PORT"))
		ns, err := natsserver.StartMonitored(port, mport)
		if err != nil {
			return err
		}
		<-ctx.Done()
		ns.Stop()
		return nil
	}
	return fmt.Errorf("bench test child: unknown command %q", args)
}

// TestSoakScenario runs the soak scenario for 20 s with a line every 10 s,
// every service a process of its own.
func TestSoakScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every service as a process and runs for 20 s")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var lines bytes.Buffer
	res, err := Run(ctx, Options{Scenario: "soak", AdminURL: testdb.AdminURL(), Exe: exe, Rate: 50,
		Duration: 20 * time.Second, Interval: 10 * time.Second, Progress: &lines})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report lines:\n%s", lines.String())
	r, ok := res.Detail.(*SoakResult)
	if !ok {
		t.Fatalf("detail %T", res.Detail)
	}
	if got := strings.Count(lines.String(), "runs/s"); got != 2 || len(r.Intervals) != 2 {
		t.Fatalf("%d lines, %d intervals, want 2", got, len(r.Intervals))
	}
	for _, iv := range r.Intervals {
		if iv.Finished == 0 || iv.RunsPerSec <= 0 || iv.Probes == 0 {
			t.Errorf("interval %d: no runs or probes: %+v", iv.N, iv)
		}
		if iv.DispatchP50ms <= 0 || iv.DispatchP99ms < iv.DispatchP50ms || iv.DispatchP99ms > 10_000 {
			t.Errorf("interval %d: dispatch p50 %v p99 %v ms", iv.N, iv.DispatchP50ms, iv.DispatchP99ms)
		}
		if iv.ServicesUSPerRun <= 0 || iv.SizeBytes < r.StartBytes || iv.SizeBytes <= 0 || iv.LiveTuples < 0 {
			t.Errorf("interval %d: cpu %v µs/run, size %d (start %d)", iv.N, iv.ServicesUSPerRun, iv.SizeBytes, r.StartBytes)
		}
	}
	// 20 s at 50/s: about 1,000 runs, a tenth failing, 15 % with two
	// children each.
	if r.Started < 800 || r.Finished < r.Started*8/10 || r.Failed == 0 || r.Children == 0 {
		t.Errorf("started %d finished %d failed %d children %d", r.Started, r.Finished, r.Failed, r.Children)
	}
	if r.Baseline != "the first interval" || r.Note == "" || r.Criterion == "" {
		t.Errorf("summary %+v", r.SoakSummary)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, r.Rows()); err != nil || !strings.Contains(table.String(), "verdict") {
		t.Errorf("table %q %v", table.String(), err)
	}
	b, err := json.Marshal(res)
	if err != nil || !bytes.Contains(b, []byte(`"scenario":"soak"`)) || !bytes.Contains(b, []byte(`"intervals":[`)) {
		t.Errorf("json %s %v", b, err)
	}
}

func TestSummarizeSoak(t *testing.T) {
	ivs := func(n int, f func(i int) SoakInterval) []SoakInterval {
		out := make([]SoakInterval, n)
		for i := range out {
			out[i] = f(i)
			out[i].N, out[i].EndSec = i+1, float64(60*(i+1))
		}
		return out
	}
	flat := ivs(30, func(int) SoakInterval {
		return SoakInterval{DispatchP99ms: 10, ServicesUSPerRun: 400, SizeBytes: 100 << 20}
	})
	s := summarizeSoak(flat, 1<<20, time.Minute, 30*time.Minute)
	if !s.Met || s.Baseline != "minutes 2-7" || s.Final != "the last 5 minutes" || s.P99ChangePct != 0 || s.FinalGrowthPct != 0 {
		t.Fatalf("flat %+v", s)
	}
	// Windows: minutes 2-7 against 26-30.
	marked := ivs(30, func(i int) SoakInterval {
		v := SoakInterval{DispatchP99ms: 1000, ServicesUSPerRun: 400, SizeBytes: 100 << 20}
		if i >= 1 && i <= 6 {
			v.DispatchP99ms = 10
		}
		if i >= 25 {
			v.DispatchP99ms = 10.5
		}
		return v
	})
	if s := summarizeSoak(marked, 0, time.Minute, 30*time.Minute); s.BaselineP99ms != 10 || s.FinalP99ms != 10.5 || s.P99ChangePct != 5 || !s.Met {
		t.Fatalf("windows %+v", s)
	}
	// Growing tables, and a growing cost, are missed; a falling p99 is no
	// drift.
	growing := ivs(30, func(i int) SoakInterval {
		return SoakInterval{DispatchP99ms: float64(30 - i), ServicesUSPerRun: 400, SizeBytes: int64(100+i) << 20}
	})
	if s := summarizeSoak(growing, 0, time.Minute, 30*time.Minute); s.Met || s.FinalGrowthPct < 2 || s.P99ChangePct >= 0 {
		t.Fatalf("growing %+v", s)
	}
	costly := ivs(30, func(i int) SoakInterval {
		return SoakInterval{DispatchP99ms: 10, ServicesUSPerRun: float64(400 + 10*i), SizeBytes: 100 << 20}
	})
	if s := summarizeSoak(costly, 0, time.Minute, 30*time.Minute); s.Met || s.USPerRunChangePct <= 10 {
		t.Fatalf("costly %+v", s)
	}
	// Shorter than 8 minutes: the last interval against the first.
	short := ivs(3, func(i int) SoakInterval {
		return SoakInterval{DispatchP99ms: float64(10 + i), ServicesUSPerRun: 400, SizeBytes: int64(50+25*i) << 20}
	})
	s = summarizeSoak(short, 0, time.Minute, 3*time.Minute)
	if s.Baseline != "the first interval" || s.Note == "" || s.Final != "the last interval" || s.P99ChangePct != 20 || s.FinalGrowthPct != 33.33 || s.Met {
		t.Fatalf("short %+v", s)
	}
	if s := summarizeSoak(nil, 0, time.Minute, time.Minute); s.Met {
		t.Fatalf("empty %+v", s)
	}
}

func TestSoakMixAndDefaults(t *testing.T) {
	n := map[string]int{}
	for i := 0; i < 20; i++ {
		n[soakKind(i)]++
	}
	if n[SoakSteps] != 10 || n[SoakSleep] != 3 || n[SoakChildren] != 3 || n[SoakRetry] != 2 || n[SoakFail] != 2 {
		t.Fatalf("mix %v", n)
	}
	o := Options{Scenario: "soak", Exe: "kagzi"}
	if err := o.defaults(); err != nil || o.Rate != DefaultSoakRate || o.Duration != DefaultSoakDuration || o.Interval != time.Minute || o.Workers != 2 {
		t.Fatalf("defaults %+v %v", o, err)
	}
	o = Options{Scenario: "soak", Exe: "kagzi", Duration: 20 * time.Second}
	if err := o.defaults(); err != nil || o.Interval != 20*time.Second {
		t.Fatalf("interval capped at the duration: %+v %v", o, err)
	}
}
