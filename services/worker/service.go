package worker

import (
	"context"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
)

// New returns a worker over nc with the workflows register adds.
func New(cfg Config, nc *nats.Conn, log *slog.Logger, register func(*worker.Worker) error) (*worker.Worker, error) {
	w, err := worker.New(worker.Config{
		Namespace: cfg.Namespace, Queue: cfg.Queue, MaxConcurrency: cfg.MaxConcurrency,
		HeartbeatInterval: cfg.HeartbeatInterval, WaitTimeout: cfg.WaitTimeout, DrainTimeout: cfg.DrainTimeout,
		MaxInlineRetry: cfg.MaxInlineRetry, Logger: log,
	}, nc)
	if err != nil {
		return nil, err
	}
	if err := register(w); err != nil {
		return nil, err
	}
	return w, nil
}

// Run runs a worker service until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger, register func(*worker.Worker) error) error {
	return process.Serve(ctx, process.Options{Name: protocol.RoleWorker, Common: cfg.Common, Log: log,
		NATSOptions: []nats.Option{worker.Inbox(cfg.Namespace, cfg.Identity)}},
		func(nc *nats.Conn) (process.Parts, error) {
			w, err := New(cfg, nc, log, register)
			if err != nil {
				return process.Parts{}, err
			}
			return process.Parts{Components: []lifecycle.Component{w},
				Checks: map[string]lifecycle.Check{"nats": lifecycle.NATSCheck(nc)}}, nil
		})
}
