// Package workerapp wires a worker process from its configuration. It is
// apart from package app so a worker binary links no database driver.
package workerapp

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/pkg/worker"
)

// New returns a worker over nc with the workflows register adds.
func New(cfg config.Worker, nc *nats.Conn, log *slog.Logger, register func(*worker.Worker) error) (*worker.Worker, error) {
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
func Run(ctx context.Context, cfg config.Worker, log *slog.Logger, register func(*worker.Worker) error) error {
	natsOpts, err := cfg.NATSAuth.Options()
	if err != nil {
		return err
	}
	natsOpts = append(natsOpts, worker.Inbox(cfg.Namespace, cfg.Identity))
	nc, err := svc.ConnectNATS(cfg.NATSURL, "kagzi-worker", log, natsOpts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	health := &svc.Health{Addr: cfg.HTTPAddr, Checks: map[string]svc.Check{"nats": svc.NATSCheck(nc)}, Log: log}
	stop, err := svc.Telemetry(ctx, "kagzi-worker", health, log)
	if err != nil {
		return err
	}
	defer stop()
	w, err := New(cfg, nc, log, register)
	if err != nil {
		return err
	}
	return svc.RunAll(ctx, log, health, w)
}
