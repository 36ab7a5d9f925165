package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/natsserver"
	"github.com/kagzi/kagzi/tests/chaos"
	"github.com/kagzi/kagzi/tests/modeltest"
)

func init() { register(newChaosCmd) }

func newChaosCmd(_ *cliutil.App) *cobra.Command {
	var (
		o         chaos.Options
		serveNATS int
		regPath   string
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run thousands of workflows while killing and restarting every process, and check that nothing was lost or applied twice",
		Long: `chaos starts a Postgres cluster of its own (initdb and pg_ctl in a temp
directory, on a free port), a NATS server (nats-server when installed, else
the embedded server in a child process) and every Kagzi service as its own
process: 2 dispatchers, 2 schedulers, the reaper and 3 workers, with short
timeouts (heartbeat 500ms, worker timeout 2s, lease 10s).

For --duration it starts --runs runs of a 5-step workflow (steps of random
0-20 ms work; some runs sleep 100-500 ms, some wait for an event a driver
sends) while an every-second schedule fires, and meanwhile: SIGKILLs a
worker every --kill-every and replaces it; SIGKILLs the relay leader
dispatcher, a scheduler and the reaper once each and restarts them;
restarts the NATS server; and restarts Postgres (pg_ctl restart -m fast).
It waits for every run to finish, then checks from the database and from
the workers' own logs of every step invocation that:

  every run completed; every step has exactly one latest, completed result;
  every recorded result was produced by a logged execution, and no write
  under a stale lease was applied; no step ran after its run finished; no
  sleep woke early; every run a killed worker held ran again; each schedule
  fire time fired at most once, and none outside the Postgres outage was
  missed.

It prints

  chaos: N runs, N completed, 0 lost, 0 duplicate results, max recovery X ms

With --model, the runs are instead random programs of the model test
(tests/modeltest: sequences and Parallel groups of steps with scripted
outcomes per attempt, retry policies, durable sleeps, event waits, child
workflows, deadlines, cancel requests, terminations, children left running
under each parent-close policy), 3000 unless --runs says otherwise, generated from
--seed (plus the checked-in regression cases with --regressions), under
the same faults; each run's status, output or error and step invocations
are checked against a reference model, and each divergence is shrunk to a
minimal program (re-run through the engine, faults over) and printed with
its seed. It then prints

  chaos --model: N programs (seed S, R regression cases), N completed, N failed, N cancelled, 0 divergences, F forks (0 diverge), R id reuse starts (0 diverge), K worker kills

followed by one line per violation, and exits 1 on any violation (the
working directory, with every process's log, is then kept). Progress goes
to stderr. See docs/BENCHMARKS.md.`,
		Example: `  kagzi chaos
  kagzi chaos --model --seed 7
  kagzi chaos --runs 500 --duration 20s
  kagzi chaos --runs 10000 --timeout 15m --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serveNATS > 0 {
				return serveEmbeddedNATS(cmd, serveNATS)
			}
			o.Log = cmd.ErrOrStderr()
			if regPath != "" {
				if !o.Model {
					return cliutil.Usagef("--regressions needs --model")
				}
				regs, err := modeltest.LoadRegressions(regPath)
				if err != nil {
					return err
				}
				for _, r := range regs {
					o.Regressions = append(o.Regressions, r.Program)
				}
			}
			res, err := chaos.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			fmt.Fprintln(errw, "timeline:")
			for _, l := range res.Timeline {
				fmt.Fprintln(errw, "  "+l)
			}
			for _, l := range res.Report.Details() {
				fmt.Fprintln(errw, l)
			}
			if n := len(res.ServiceErrors); n > 0 {
				fmt.Fprintln(errw, "errors in the services' logs (not invariants: the services retry), most frequent first:")
				for i, l := range res.ServiceErrors {
					if i == 12 {
						fmt.Fprintf(errw, "  … and %d more kinds\n", n-12)
						break
					}
					fmt.Fprintln(errw, "  "+l)
				}
			}
			fmt.Fprintf(errw, "took %.1f s\n", res.Elapsed.Seconds())
			if res.Kept {
				fmt.Fprintf(errw, "logs kept in %s\n", res.Dir)
			}
			if err := res.Report.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			if res.Report.Failed() {
				return fmt.Errorf("chaos: %d violations", len(res.Report.Violations))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Runs, "runs", 0, fmt.Sprintf("runs to start (default %d; %d programs with --model)", chaos.DefaultRuns, chaos.DefaultModelPrograms))
	f.BoolVar(&o.Model, "model", false, "run random programs of the model test and check each against the reference model")
	f.StringVar(&regPath, "regressions", "", "with --model: also run the regression cases of this file (tests/modeltest/testdata/regressions.json)")
	f.IntVar(&o.ShrinkTries, "shrink-tries", 60, "with --model: engine runs spent shrinking one divergence")
	f.IntVar(&o.Steps, "steps", chaos.DefaultSteps, "steps per run")
	f.DurationVar(&o.Duration, "duration", chaos.DefaultDuration, "chaos phase: runs start over its first 80%, the faults happen within it")
	f.IntVar(&o.Workers, "workers", chaos.DefaultWorkers, "worker processes kept alive")
	f.IntVar(&o.Dispatchers, "dispatchers", chaos.DefaultDispatchers, "dispatcher processes")
	f.IntVar(&o.Schedulers, "schedulers", chaos.DefaultSchedulers, "scheduler processes")
	f.DurationVar(&o.KillEvery, "kill-every", chaos.DefaultKillEvery, "interval between worker SIGKILLs")
	f.DurationVar(&o.FreezeFor, "freeze-for", chaos.DefaultFreezeFor,
		"how long the relay leader, the reaper, a worker, a scheduler and a dispatcher are each frozen (SIGSTOP); negative: none")
	f.Float64Var(&o.SleepFraction, "sleep-fraction", chaos.DefaultSleepFraction, "fraction of runs that sleep 100-500 ms")
	f.Float64Var(&o.EventFraction, "event-fraction", chaos.DefaultEventFraction, "fraction of runs that wait for an event")
	f.IntVar(&o.Concurrency, "concurrency", chaos.DefaultConcurrency, "max concurrency of each worker")
	f.DurationVar(&o.Timeout, "timeout", chaos.DefaultTimeout, "bound on the whole run; runs not finished by then are lost")
	f.DurationVar(&o.MaxRecovery, "max-recovery", 0, "if set, a run taking longer than this to run again after its worker was killed is a violation (default: reported only)")
	f.DurationVar(&o.HeartbeatInterval, "heartbeat", chaos.DefaultHeartbeat, "KAGZI_HEARTBEAT_INTERVAL of the workers")
	f.DurationVar(&o.WorkerTimeout, "worker-timeout", chaos.DefaultWorkerTimeout, "KAGZI_WORKER_TIMEOUT of the reaper")
	f.DurationVar(&o.Lease, "lease", chaos.DefaultLease, "KAGZI_LEASE of the dispatchers and the reaper")
	f.StringVar(&o.Dir, "dir", "", "working directory (default a new temp directory)")
	f.BoolVar(&o.Keep, "keep", false, "keep the working directory (it is kept anyway on a violation)")
	f.StringVar(&o.NATSServer, "nats-server", "", `nats-server binary (default: found on the PATH or in /usr/sbin; "embedded" runs the embedded server in a child process)`)
	f.BoolVar(&o.NATSDefaults, "nats-defaults", false, "run nats-server with its default pings (every 2 minutes) instead of Kagzi's 1 s: frozen processes keep their NATS connections")
	f.StringVar(&o.LogLevel, "log-level", "info", "KAGZI_LOG_LEVEL of the services (logs go to the working directory)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the random choices (default random; printed)")
	f.IntVar(&serveNATS, "serve-nats", 0, "internal: run the embedded NATS server on this port until interrupted")
	_ = f.MarkHidden("serve-nats")
	return cmd
}

// serveEmbeddedNATS is the child process `kagzi chaos` runs as its NATS
// server when nats-server is not installed: it can be killed and
// restarted like a real one.
func serveEmbeddedNATS(cmd *cobra.Command, port int) error {
	start := natsserver.Start
	// KAGZI_NATS_MONITOR_PORT serves /varz there (`kagzi bench` reads the
	// message counters).
	//
	// KAGZI_NATS_MONITOR_PORT: internal to `kagzi bench`, which sets it for
	// the NATS server it starts: the port of that server's monitoring
	// endpoint (`/varz`)
	if mp, err := strconv.Atoi(envOr("KAGZI_NATS_MONITOR_PORT", "")); err == nil && mp > 0 {
		start = func(port int) (*natsserver.Server, error) { return natsserver.StartMonitored(port, mp) }
	}
	ns, err := start(port)
	if err != nil {
		return fmt.Errorf("embedded nats on port %d: %w", port, err)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "embedded nats listening on "+ns.URL()+" (pid "+strconv.Itoa(os.Getpid())+")")
	<-cmd.Context().Done()
	ns.Stop()
	return nil
}
