package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/batchbench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

func init() { register(newBenchCmd) }

func newBenchCmd(a *cliutil.App) *cobra.Command {
	var o bench.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency, sleep lateness, idle cost, scale, connections, cron, recovery, soak, event triggers and webhooks with every service as its own process",
		Long: `bench creates its own database next to --database-url, runs the dispatcher,
scheduler, reaper and workers as separate processes over real TCP hops to
Postgres and NATS (an embedded NATS server unless --nats-url is given
explicitly), drives the scenario through the client SDK, prints the figures
(a table, or JSON with --json) and drops the database. Throughput reports
the CPU every process spent per run (/proc), and with --own-postgres the
statements per run (pg_stat_statements). --compare river runs the same
workload on River afterwards and prints the ratios. See docs/BENCHMARKS.md.

Scenarios:
  throughput  start --runs runs of a no-op workflow of --steps steps, report
              runs_per_sec and steps_per_sec (first start to last result);
              with --sleepers N, also N runs sleeping 100-1000 ms started
              among the first half of them, and how late they woke
  latency     start --runs runs at --rate per second, report dispatch
              (start commit -> workflow code running) and result
              (start -> result received) percentiles
  sleep       start --runs (default 2000) runs at --rate per second
              (default 500; 0: all at once), each sleeping a random
              100-1000 ms, report how late they woke (late_p50_ms,
              late_p99_ms: code running again minus due time)
  idle        all services and --workers (default 10) workers up, no work,
              for --duration (default 30s): report statements_per_sec
  scale       throughput of --runs (default 10000) runs with 0, 1,000,000 and
              5,000,000 finished runs in the table (--sizes): runs_per_sec each,
              and dispatch p50/p99 of 2,000 runs started at 200/s
  connections Postgres connections held with 1 and with 50 worker processes
  cron        --schedules (default 50) schedules firing every second for
              --duration (default 30s): lateness percentiles, duplicates, missed
  recovery    a worker holding --runs (default 100) runs is killed: time until
              they all run on another worker (--worker-timeout)
  console     --runs (default 5,000,000) finished runs in a namespace, then the
              web console over HTTP: the runs page's first render, and p50/p99
              of --repeat (default 200) runs pages and JSON API first pages
  soak        --rate (default 150) starts per second for --duration (default
              30m) of a mix of steps, sleeps, child runs, step retries and
              failing runs, with a retention of 1 minute: a line every
              --interval (default 1m) with runs/s, dispatch p50/p99, CPU per
              run, the run tables' size and dead tuples (on stderr with
              --json), then the last 5 minutes against minutes 2-7 (the last
              interval against the first when shorter than 8 minutes)
  targets     every figure the throughput targets are set in, River's beside
              each from the same command: 1-step, 0-step and 10-step
              throughput, dispatch latency at 200 starts/s, and sleep
              lateness under the 1-step load (500 sleepers); one table of
              ratios and verdicts (about 3 minutes; add --own-postgres)
  triggers    publish --runs (default 2000) events at --rate per second (0:
              full speed), each matching 3 triggers, with 2 dispatchers and 2
              reapers: the relay's dispatcher and the leading reaper are
              SIGKILLed at a third and two thirds; report events/s fanned out,
              published -> runs created p50/p99, and that every event started
              its 3 runs once and workers completed them all
  webhooks    --runs (default 10000) signed GitHub deliveries at --rate per
              second to a console process's POST /webhooks/{source}: request
              p50/p99, deliveries per minute, each accepted once, none lost
  http        --rate starts/s for --duration (default 15s), by turns by the Go
              client and the HTTP API (POST /v1/runs on a console): start
              p50/p99 of each (target: HTTP p99 at most 5 ms above Go's)`,
		Example: `  kagzi bench --scenario throughput --steps 1 --runs 20000
  kagzi bench --scenario throughput --steps 1 --own-postgres --compare river
  kagzi bench --scenario throughput --own-postgres --pgbouncer
  kagzi bench --scenario latency --rate 200 --json
  kagzi bench --scenario sleep --json
  kagzi bench --scenario throughput --steps 1 --sleepers 500 --own-postgres --json
  kagzi bench --scenario idle --duration 30s
  kagzi bench --scenario scale --sizes 0,1000000,5000000
  kagzi bench --scenario recovery --worker-timeout 2s --json
  kagzi bench --scenario console --runs 5000000 --repeat 200
  kagzi bench --scenario soak --own-postgres --duration 30m
  kagzi bench --scenario targets --own-postgres
  kagzi bench --scenario triggers --runs 2000 --rate 200
  kagzi bench --scenario webhooks --runs 10000 --rate 200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.AdminURL = a.DatabaseURL
			if o.Scenario == "sleep" && !cmd.Flags().Changed("rate") {
				o.Rate = bench.DefaultSleepRate
			}
			if o.Scenario == "throughput" && !cmd.Flags().Changed("rate") {
				o.Rate = 0 // all at once
			}
			if o.Scenario == "soak" {
				if !cmd.Flags().Changed("rate") {
					o.Rate = bench.DefaultSoakRate
				}
				// With --json, stdout holds the JSON document alone.
				o.Progress = cmd.OutOrStdout()
				if a.JSON {
					o.Progress = cmd.ErrOrStderr()
				}
			}
			if !cmd.Flags().Changed("nats-url") {
				o.NATSURL = ""
			} else {
				o.NATSURL = a.NATSURL
			}
			o.Log = process.Logger("warn")
			if verbose {
				o.Log = process.Logger("info")
				o.ServiceLog = os.Stderr
			}
			// The line counts the runs the scenario waits for and those
			// that finished (a scenario that waits for none shows the
			// time, and the runs it made at the end). The soak's report
			// lines and --verbose's logs have the terminal to themselves.
			var prog *cliutil.Progress
			if o.Scenario != "soak" && !verbose {
				// The label is written unescaped: a known scenario's name
				// only, never what was typed.
				label := "bench, runs"
				if slices.Contains(bench.Scenarios, o.Scenario) {
					label = "bench " + o.Scenario + ", runs"
				}
				var err error
				if prog, err = a.Progress(cmd, label, 0); err != nil {
					return err
				}
			}
			if prog != nil {
				o.Counter = prog
			}
			prog.Start()
			res, err := bench.Run(cmd.Context(), o)
			if res != nil {
				prog.Done(int64(res.Runs))
			}
			prog.Done(-1)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if a.JSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			if res.Detail != nil {
				return bench.WriteTable(out, res.Detail.Rows())
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "scenario\t%s\n", res.Scenario)
			fmt.Fprintf(tw, "runs\t%d (failed %d)\n", res.Runs, res.Failed)
			fmt.Fprintf(tw, "steps per run\t%d\n", res.Steps)
			fmt.Fprintf(tw, "processes\t%d dispatcher, 1 scheduler, 1 reaper, %d workers\n", res.Dispatchers, res.Workers)
			fmt.Fprintf(tw, "duration\t%.2f s\n", res.DurationSec)
			fmt.Fprintf(tw, "runs/s\t%.0f\n", res.RunsPerSec)
			if res.Scenario == "throughput" {
				fmt.Fprintf(tw, "steps/s\t%.0f\n", res.StepsPerSec)
				rows := append(res.Sleepers.Rows(), bench.HopRows(res.Hops)...)
				rows = append(rows, res.Cost.Rows()...)
				for _, row := range append(rows, res.CPU.Rows()...) {
					fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
				}
			} else {
				fmt.Fprintf(tw, "dispatch p50 / p99\t%.2f / %.2f ms\n", res.DispatchP50ms, res.DispatchP99ms)
				fmt.Fprintf(tw, "result p50 / p99\t%.2f / %.2f ms\n", res.ResultP50ms, res.ResultP99ms)
				for _, row := range bench.HopRows(res.Hops) {
					fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
				}
			}
			for _, row := range res.ComparisonRows() {
				fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Scenario, "scenario", "throughput", strings.Join(bench.Scenarios, ", "))
	f.IntVar(&o.Runs, "runs", 0, "number of runs (default 20000 for throughput, 2000 for latency and sleep, 10000 for scale, 2000 for connections, 100 for recovery, 5000000 finished runs for console, 100000 for batch; events for triggers, 2000, at most 100000; deliveries for webhooks, 10000, at most 1000000)")
	f.IntVar(&o.Steps, "steps", 1, "steps per run (throughput)")
	f.IntVar(&o.Sleepers, "sleepers", 0, "SleepProbe runs started among the first half of the throughput runs, each sleeping a random 100-1000 ms: how late they wake under load (throughput; costs per run count them)")
	f.IntVar(&o.Attributes, "attributes", 0, "keyword search attributes each run sets (throughput, latency; 0 to 10)")
	f.Float64Var(&o.Rate, "rate", 200, "starts per second (latency, batch; throughput: default 0, all at once; soak: default 150; sleep: default 500, 0 starts all at once); events or deliveries per second (triggers, webhooks; 0: full speed; at most 10000)")
	f.IntVar(&o.BatchRate, "batch-rate", batchbench.DefaultRate, "the batch's rate, in runs per second (batch; 1 to 10000)")
	f.IntVar(&o.Workers, "workers", 0, "worker processes (default 2; idle 10; recovery and connections start with 1)")
	f.IntVar(&o.Dispatchers, "dispatchers", 1, "dispatcher processes")
	f.IntVar(&o.Concurrency, "concurrency", 200, "max concurrency of each worker")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench database afterwards")
	f.StringVar(&o.ProfileDir, "profile", "", "directory for CPU profiles of each service process")
	f.DurationVar(&o.Duration, "duration", 0, "how long to measure (idle, cron; default 30s; soak: default 30m)")
	f.DurationVar(&o.Interval, "interval", 0, "time between the soak's report lines (default 1m)")
	f.IntSliceVar(&o.Sizes, "sizes", nil, "finished runs in the table at each step of scale (default 0,1000000,5000000)")
	f.IntVar(&o.Repeat, "repeat", 0, "workloads per size in scale; the median counts (default 3); requests per page in console (default 200)")
	f.IntVar(&o.Schedules, "schedules", 0, "schedules firing every second (cron; default 50)")
	f.DurationVar(&o.WorkerTimeout, "worker-timeout", bench.DefaultWorkerTimeout, "KAGZI_WORKER_TIMEOUT of the bench's processes (heartbeats every quarter of it)")
	f.BoolVar(&o.CountStatements, "count-statements", false, "run the dispatcher inside the bench process and count every statement of it and the client (throughput)")
	f.BoolVar(&o.OwnPostgres, "own-postgres", false, "run on a throwaway Postgres cluster the bench starts (durable, pg_stat_statements preloaded): every Postgres process's CPU and every statement is the scenario's")
	f.StringVar(&o.Compare, "compare", "", "run the same workload on another system afterwards and print the ratios (river; throughput and latency)")
	f.BoolVar(&o.PgBouncer, "pgbouncer", false, "run the services' pooled work and the client's through a PgBouncer in transaction mode the bench starts (Debian's pgbouncer; sessions stay direct), and count its CPU")
	f.BoolVar(&o.Hops, "hops", false, "latency, and throughput with --sleepers: have the services record each run's dispatch hops (KAGZI_HOPS_DIR) and print each hop's p50 and p99 (a sleeper's from its due time to its code running again)")
	f.BoolVar(&verbose, "verbose", false, "print progress and the services' logs to stderr")
	return cmd
}
