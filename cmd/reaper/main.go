// Command reaper runs Kagzi's recovery service: it tracks worker liveness
// from heartbeats over NATS, marks silent workers OFFLINE and recovers
// their runs at once, expires leases nobody extends and fails runs past
// their deadline. Every replica listens; one at a time (elected with a
// Postgres advisory lock) acts. Configuration comes from the environment
// (see docs/configuration.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/reaper"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg reaper.Config
	err := config.Load(ctx, &cfg)
	if err == nil {
		err = reaper.Run(ctx, cfg, process.Logger(cfg.LogLevel).With("service", "reaper"))
	}
	process.Exit("reaper", err)
}
