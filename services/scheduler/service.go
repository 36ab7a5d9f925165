package scheduler

import (
	"context"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Assemble returns the scheduler service's parts over st and nc (the
// scheduler resyncs on NATS reconnect by itself) with the readiness checks.
func Assemble(cfg Config, st *store.Store, nc *nats.Conn, log *slog.Logger) process.Parts {
	s := New(cfg, Deps{}, st, nc, log)
	return process.Parts{Components: []lifecycle.Component{s}, Checks: map[string]lifecycle.Check{
		"postgres": st.Ping, "nats": lifecycle.NATSCheck(nc),
	}}
}

// Run runs the scheduler service until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool, store.Options{OnLargePayload: process.LogLargePayload(log)})
	return process.Serve(ctx, process.Options{Name: protocol.RoleScheduler, Common: cfg.Common, Log: log,
		NATSOptions: []nats.Option{nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleScheduler))}},
		func(nc *nats.Conn) (process.Parts, error) { return Assemble(cfg, st, nc, log), nil })
}
