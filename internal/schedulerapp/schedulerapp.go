// Package schedulerapp wires the scheduler service from its
// configuration. The scheduler binary, `kagzi dev` and `kagzi serve` use
// it; it links no other service.
package schedulerapp

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/dbsvc"
	"github.com/kagzi/kagzi/internal/scheduler"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/internal/svc"
)

// New returns the scheduler over st and nc (it resyncs on NATS reconnect
// by itself) and its readiness checks.
func New(cfg config.Scheduler, st *store.Store, nc *nats.Conn, log *slog.Logger) (*scheduler.Scheduler, map[string]svc.Check) {
	s := scheduler.New(scheduler.Config{Batch: cfg.SchedulerBatch, CatchUpWindow: cfg.SchedulerCatchUpWindow}, st, nc, log)
	return s, dbsvc.Ready(st, nc)
}

// Run runs the scheduler service until ctx ends.
func Run(ctx context.Context, cfg config.Scheduler, log *slog.Logger) error {
	return dbsvc.Run(ctx, "scheduler", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) dbsvc.Parts {
		s, checks := New(cfg, st, nc, log)
		return dbsvc.Parts{Components: []svc.Component{s}, Checks: checks}
	})
}
