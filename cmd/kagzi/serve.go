package main

import (
	"errors"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/examples"
	"github.com/kagzi/kagzi/tests/testflows"
)

func init() { register(newServeCmd) }

// newServeCmd runs one service in this process, configured from the
// environment exactly as its own binary is. `kagzi bench` uses it to run
// each service as a separate process from one executable.
func newServeCmd(a *cliutil.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "serve dispatcher|scheduler|reaper|worker",
		Short:  "Run one Kagzi service in the foreground (configured from KAGZI_* variables)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			// KAGZI_CPU_PROFILE names a file for a CPU profile of the whole
			// run of the service: `kagzi bench --profile` sets it.
			//
			// KAGZI_CPU_PROFILE: internal to `kagzi bench --profile`, which
			// sets it for the services it starts: the file of a service's
			// CPU profile
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
			err := devserver.Serve(ctx, args[0], registerAll)
			if errors.Is(err, devserver.ErrUnknownService) {
				return cliutil.Usagef("%v", err)
			}
			return err
		},
	}
	return cmd
}

// registerAll registers the example workflows and the test harnesses'
// (chaos, bench, model test) on the workers `kagzi serve` and `kagzi dev`
// run.
func registerAll(w *worker.Worker) error {
	if err := examples.Register(w); err != nil {
		return err
	}
	if err := bench.RegisterWorkflows(w); err != nil {
		return err
	}
	return testflows.Register(w)
}
