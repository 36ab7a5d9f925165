package modeltest_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kagzi/kagzi/tests/chaos"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/modeltest"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testflows"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The test binary stands in for the kagzi binary: run as
// "<test binary> serve <service>", it is that service, so the engine test
// runs every service as its own process without building kagzi first.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "serve" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := devserver.Serve(ctx, os.Args[2], testflows.Register)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Environment of TestEngineMatchesModel.
const (
	// SeedEnv picks another seed than modeltest.DefaultSeed.
	SeedEnv = "KAGZI_MODEL_SEED"
	// ProgramsEnv picks another number of programs than 300.
	ProgramsEnv = "KAGZI_MODEL_PROGRAMS"
	// ScenariosEnv picks another number of operator scenarios than 3.
	ScenariosEnv = "KAGZI_MODEL_SCENARIOS"
)

// TestEngineMatchesModel runs 300 generated programs and every checked-in
// regression case through the real services — a dispatcher, the reaper and
// three workers, each its own process — over a database and a NATS server
// of the test's own, and checks every run against the model; then some of
// the programs again, paused and resumed, and three operator scenarios
// (pauses, resumes, queries over search attributes, batches worked by the
// reaper).
func TestEngineMatchesModel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the services as processes")
	}
	t.Parallel()
	seed := uint64(modeltest.DefaultSeed)
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
		seed = s
	}
	programs := 300
	if v := os.Getenv(ProgramsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count", ProgramsEnv, v)
		}
		programs = n
	}
	scenarios := 3
	if v := os.Getenv(ScenariosEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count", ScenariosEnv, v)
		}
		scenarios = n
	}
	regs, err := modeltest.LoadRegressions("testdata/regressions.json")
	if err != nil {
		t.Fatal(err)
	}
	o := chaos.Options{
		Model: true, NoFaults: true, Runs: programs, Seed: seed,
		// Every run takes one of 10 concurrency keys, at most 6 running
		// at once per key: the programs must still end as the model says,
		// and no key may ever run more.
		Keys: 10, PerKey: 6,
		Workers: 3, Dispatchers: 1, Concurrency: 200,
		DatabaseURL: testdb.New(t), NATSURL: testnats.Start(t).URL(),
		Timeout: 4 * time.Minute, LogLevel: "warn", Log: testLog{t},
		ShrinkTries: 40, ShrinkMax: 3,
		// Then a few operator scenarios: pauses, resumes, queries over
		// search attributes and batches over the same engine.
		Scenarios: scenarios,
	}
	for _, r := range regs {
		o.Regressions = append(o.Regressions, r.Program)
	}
	o.Exe, err = os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := chaos.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.Report.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Report.Details() {
		t.Log(l)
	}
	t.Logf("took %.1f s (seed %d; %s=N picks another)", res.Elapsed.Seconds(), seed, SeedEnv)
	if res.Report.Failed() {
		t.Errorf("%s", b.String())
		if res.Kept {
			t.Logf("service logs kept in %s", res.Dir)
		}
	} else {
		t.Log(strings.TrimSpace(b.String()))
	}
	if m := res.Report.Model; m == nil || m.Programs != programs+len(regs) {
		t.Fatalf("model report %+v: want %d programs", m, programs+len(regs))
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
