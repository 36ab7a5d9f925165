package main

import (
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	kapp "github.com/kagzi/kagzi/internal/app"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/internal/workerapp"
	"github.com/kagzi/kagzi/services/worker/examples"
)

func init() { register(newServeCmd) }

// newServeCmd runs one service in this process, configured from the
// environment exactly as its own binary is. `kagzi bench` uses it to run
// each service as a separate process from one executable.
func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "serve dispatcher|scheduler|reaper|worker",
		Short:  "Run one Kagzi service in the foreground (configured from KAGZI_* variables)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			// KAGZI_CPU_PROFILE names a file for a CPU profile of the whole
			// run of the service: `kagzi bench --profile` sets it.
			if path := envOr("KAGZI_CPU_PROFILE", ""); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			switch args[0] {
			case "dispatcher":
				var cfg config.Dispatcher
				if err := config.Load(ctx, &cfg); err != nil {
					return err
				}
				return kapp.RunDispatcher(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "dispatcher"))
			case "scheduler":
				var cfg config.Scheduler
				if err := config.Load(ctx, &cfg); err != nil {
					return err
				}
				return kapp.RunScheduler(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "scheduler"))
			case "reaper":
				var cfg config.Reaper
				if err := config.Load(ctx, &cfg); err != nil {
					return err
				}
				return kapp.RunReaper(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "reaper"))
			case "worker":
				var cfg config.Worker
				if err := config.Load(ctx, &cfg); err != nil {
					return err
				}
				return workerapp.Run(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "worker"), examples.Register)
			}
			return usagef("unknown service %q: want dispatcher, scheduler, reaper or worker", args[0])
		},
	}
	return cmd
}
