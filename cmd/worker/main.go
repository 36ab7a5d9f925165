// Command worker is Kagzi's reference worker: it registers the example
// workflows (tests/examples) and runs them. It needs NATS only —
// no database connection and no database credentials. Configuration comes
// from the environment (see docs/configuration.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/worker"
	"github.com/kagzi/kagzi/tests/examples"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg worker.Config
	err := config.Load(ctx, &cfg)
	if err == nil {
		err = worker.Run(ctx, cfg, process.Logger(cfg.LogLevel).With("service", "worker"), examples.Register)
	}
	process.Exit("worker", err)
}
