// Package app composes Kagzi's services from the outside for the tools
// that run several of them (`kagzi dev`, `kagzi serve`, `kagzi bench` and
// the test harnesses). Each service's wiring lives in its own package
// (dispatcherapp, schedulerapp, reaperapp, workerapp), which the service's
// binary uses directly, so a binary links only its own service.
package app

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/dbsvc"
	"github.com/kagzi/kagzi/internal/dispatcherapp"
	"github.com/kagzi/kagzi/internal/reaper"
	"github.com/kagzi/kagzi/internal/reaperapp"
	"github.com/kagzi/kagzi/internal/scheduler"
	"github.com/kagzi/kagzi/internal/schedulerapp"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/internal/svc"
)

// NewStore wraps pool, logging payloads above the database's warning size.
func NewStore(pool *pgxpool.Pool, log *slog.Logger) *store.Store { return dbsvc.NewStore(pool, log) }

// Dispatcher returns the dispatcher's components (the lease service and,
// if enabled, the relay) and its readiness checks.
func Dispatcher(cfg config.Dispatcher, st *store.Store, nc *nats.Conn, log *slog.Logger) ([]svc.Component, map[string]svc.Check) {
	p := dispatcherapp.New(cfg, st, nc, log)
	return p.Components, p.Checks
}

// RunDispatcher runs the dispatcher service until ctx ends.
func RunDispatcher(ctx context.Context, cfg config.Dispatcher, log *slog.Logger) error {
	return dispatcherapp.Run(ctx, cfg, log)
}

// Scheduler returns the scheduler's component and its readiness checks.
func Scheduler(cfg config.Scheduler, st *store.Store, nc *nats.Conn, log *slog.Logger) (*scheduler.Scheduler, map[string]svc.Check) {
	return schedulerapp.New(cfg, st, nc, log)
}

// RunScheduler runs the scheduler service until ctx ends.
func RunScheduler(ctx context.Context, cfg config.Scheduler, log *slog.Logger) error {
	return schedulerapp.Run(ctx, cfg, log)
}

// Reaper returns the reaper service and its readiness checks.
func Reaper(cfg config.Reaper, st *store.Store, nc *nats.Conn, log *slog.Logger) (*reaper.Reaper, map[string]svc.Check) {
	return reaperapp.New(cfg, st, nc, log)
}

// RunReaper runs the reaper service until ctx ends.
func RunReaper(ctx context.Context, cfg config.Reaper, log *slog.Logger) error {
	return reaperapp.Run(ctx, cfg, log)
}
