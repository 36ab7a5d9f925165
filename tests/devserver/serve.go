package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"
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
		return serve(ctx, service, dispatcher.Run)
	case "scheduler":
		return serve(ctx, service, scheduler.Run)
	case "reaper":
		return serve(ctx, service, reaper.Run)
	case "worker":
		return serve(ctx, service, func(ctx context.Context, cfg workersvc.Config, log *slog.Logger) error {
			return workersvc.Run(ctx, cfg, log, register)
		})
	}
	return fmt.Errorf("%w %q: want dispatcher, scheduler, reaper or worker", ErrUnknownService, service)
}

// service is a service's configuration: a struct that embeds
// config.Common, by pointer.
type service[C any] interface {
	*C
	Shared() *config.Common
}

// serve loads a service's configuration from the environment and runs it.
func serve[C any, P service[C]](ctx context.Context, name string, run func(context.Context, C, *slog.Logger) error) error {
	var cfg C
	if err := config.Load(ctx, P(&cfg)); err != nil {
		return err
	}
	return run(ctx, cfg, process.Logger(P(&cfg).Shared().LogLevel).With("service", name))
}
