// Command dispatcher runs Kagzi's lease service: it claims due runs for the
// workers that ask, delivers them, applies the workers' reports under the
// fencing token, and (one replica at a time) relays Postgres notifications
// to NATS. Configuration comes from the environment (see docs/configuration.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/dispatcher"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg dispatcher.Config
	err := config.Load(ctx, &cfg)
	if err == nil {
		err = dispatcher.Run(ctx, cfg, process.Logger(cfg.LogLevel).With("service", "dispatcher"))
	}
	process.Exit("dispatcher", err)
}
