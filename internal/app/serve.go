package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/internal/workerapp"
	"github.com/kagzi/kagzi/pkg/worker"
)

// ErrUnknownService is returned by Serve for a service it does not know.
var ErrUnknownService = errors.New("unknown service")

// Serve runs one service (dispatcher, scheduler, reaper or worker, whose
// workflows register adds) in this process until ctx ends, configured from
// the environment exactly as its own binary is. `kagzi serve` runs it, and
// so do test binaries that stand in for the kagzi binary as service
// processes.
func Serve(ctx context.Context, service string, register func(*worker.Worker) error) error {
	switch service {
	case "dispatcher":
		var cfg config.Dispatcher
		if err := config.Load(ctx, &cfg); err != nil {
			return err
		}
		return RunDispatcher(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "dispatcher"))
	case "scheduler":
		var cfg config.Scheduler
		if err := config.Load(ctx, &cfg); err != nil {
			return err
		}
		return RunScheduler(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "scheduler"))
	case "reaper":
		var cfg config.Reaper
		if err := config.Load(ctx, &cfg); err != nil {
			return err
		}
		return RunReaper(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "reaper"))
	case "worker":
		var cfg config.Worker
		if err := config.Load(ctx, &cfg); err != nil {
			return err
		}
		return workerapp.Run(ctx, cfg, svc.Logger(cfg.LogLevel).With("service", "worker"), register)
	}
	return fmt.Errorf("%w %q: want dispatcher, scheduler, reaper or worker", ErrUnknownService, service)
}
