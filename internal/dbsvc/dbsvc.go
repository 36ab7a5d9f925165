// Package dbsvc runs what every Kagzi service with a database does the
// same way: connect to Postgres and NATS, set up telemetry and the health
// endpoint, build the service's components and run them until the context
// ends. Each service's wiring package (dispatcherapp, schedulerapp,
// reaperapp) gives it the components; it knows none of them, so a service
// binary links only its own service.
package dbsvc

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Parts is what a service's wiring builds over a store and a connection.
type Parts struct {
	// Components run in order after the health endpoint.
	Components []svc.Component
	// Checks decide readiness.
	Checks map[string]svc.Check
	// Info adds lines to /readyz that do not decide readiness.
	Info map[string]func() string
}

// NewStore wraps pool, logging payloads above the database's warning size.
func NewStore(pool *pgxpool.Pool, log *slog.Logger) *store.Store {
	return store.New(pool, store.Options{
		OnLargePayload: func(what string, size int) { log.Warn("large payload", "what", what, "bytes", size) },
	})
}

// Ready returns the readiness checks every database service has.
func Ready(st *store.Store, nc *nats.Conn) map[string]svc.Check {
	return map[string]svc.Check{"postgres": st.Ping, "nats": svc.NATSCheck(nc)}
}

// Run connects, builds the service's parts and runs them until ctx ends.
func Run(ctx context.Context, name string, common config.Common, db config.Database, log *slog.Logger,
	build func(*store.Store, *nats.Conn) Parts) error {
	pool, err := store.Connect(ctx, db.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	natsOpts, err := common.NATSAuth.Options()
	if err != nil {
		return err
	}
	// name is the service's role: its inbox prefix is the one its NATS
	// permissions let it read (protocol.Permissions).
	natsOpts = append(natsOpts, nats.CustomInboxPrefix(protocol.ServiceInbox(name)))
	nc, err := svc.ConnectNATS(common.NATSURL, "kagzi-"+name, log, natsOpts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Telemetry first, so the components' instruments bind to its providers.
	health := &svc.Health{Addr: common.HTTPAddr, Log: log}
	stop, err := svc.Telemetry(ctx, "kagzi-"+name, health, log)
	if err != nil {
		return err
	}
	defer stop()
	p := build(NewStore(pool, log), nc)
	health.Checks, health.Info = p.Checks, p.Info
	return svc.RunAll(ctx, log, append([]svc.Component{health}, p.Components...)...)
}

// LeaderInfo is a /readyz line saying whether this replica holds a lock.
func LeaderInfo(isLeader func() bool) func() string {
	return func() string {
		if isLeader() {
			return "leader"
		}
		return "standby"
	}
}

// B2I is 1 for true, 0 for false (a gauge of a flag).
func B2I(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
