// Command worker is Kagzi's reference worker: it registers the example
// workflows (internal/examples) and runs them. It needs NATS only —
// no database connection and no database credentials. Configuration comes
// from the environment (see the README).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/examples"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/internal/workerapp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg config.Worker
	err := config.Load(ctx, &cfg)
	if err == nil {
		err = workerapp.Run(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "worker"), examples.Register)
	}
	svc.Exit("worker", err)
}
