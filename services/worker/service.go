package worker

import (
	"context"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
)

// New returns a worker over nc with the workflows register adds,
// configured by cfg (as config.Load or config.Defaults return it), which
// logs to log.
func New(cfg Config, nc *nats.Conn, log *slog.Logger, register func(*worker.Worker) error) (*worker.Worker, error) {
	wc := cfg.Config
	wc.Logger = log
	if cfg.hops != nil {
		wc.DispatchHops = cfg.hops.Mark
	}
	w, err := worker.New(wc, nc)
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
	var err error
	if cfg.hops, err = hops.Open(cfg.HopsDir, protocol.RoleWorker); err != nil {
		return err
	}
	defer func() { _ = cfg.hops.Close() }()
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
