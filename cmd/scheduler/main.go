// Command scheduler runs Kagzi's cron firing service: it turns due schedule
// templates into runs, exactly once per fire time however many replicas
// run, with catch-up after downtime bounded by each schedule's
// max_catchup. It is woken by schedule changes relayed over NATS and by
// its own timer, never by polling. Configuration comes from the
// environment (see docs/configuration.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/scheduler"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg scheduler.Config
	err := config.Load(ctx, &cfg)
	if err == nil {
		err = scheduler.Run(ctx, cfg, process.Logger(cfg.LogLevel).With("service", "scheduler"))
	}
	process.Exit("scheduler", err)
}
