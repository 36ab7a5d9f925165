// Package dispatcherapp wires the dispatcher service (the lease service
// and, if enabled, the relay) from its configuration. The dispatcher
// binary, `kagzi dev` and `kagzi serve` use it; it links no other service.
package dispatcherapp

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/dbsvc"
	"github.com/kagzi/kagzi/internal/dispatcher"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/internal/svc"
)

// New returns the dispatcher's parts over st and nc.
func New(cfg config.Dispatcher, st *store.Store, nc *nats.Conn, log *slog.Logger) dbsvc.Parts {
	dcfg := dispatcher.Config{
		Lease: cfg.Lease, DeliveryTimeout: cfg.DeliveryTimeout, MaxClaim: cfg.MaxClaim, ReportWriters: cfg.ReportWriters,
		BeaconInterval: cfg.BeaconInterval,
	}
	var relay *dispatcher.Relay
	if cfg.Relay {
		dcfg.Published = dispatcher.NewPublished()
		relay = dispatcher.NewRelay(dispatcher.RelayConfig{DatabaseURL: cfg.DatabaseURL, Published: dcfg.Published}, nc, log)
		dcfg.RelayID = relay.LeaderID
	}
	d := dispatcher.New(dcfg, st, nc, log)
	natsutil.OnReconnect(nc, d.Resync)
	p := dbsvc.Parts{Components: []svc.Component{d}, Checks: dbsvc.Ready(st, nc)}
	if relay != nil {
		p.Components = append(p.Components, relay)
		// Readiness does not need the relay lock (a standby is ready),
		// but /readyz says which replica relays.
		p.Info = map[string]func() string{"relay": dbsvc.LeaderInfo(relay.IsLeader)}
		registerRelayLeader(relay)
	}
	return p
}

// Run runs the dispatcher service until ctx ends.
func Run(ctx context.Context, cfg config.Dispatcher, log *slog.Logger) error {
	return dbsvc.Run(ctx, "dispatcher", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) dbsvc.Parts {
		return New(cfg, st, nc, log)
	})
}

// registerRelayLeader exports kagzi.relay.leader: 1 on the dispatcher
// replica that relays Postgres notifications to NATS, 0 on the others; the
// sum over replicas is 1 when all is well.
func registerRelayLeader(relay *dispatcher.Relay) {
	m := otel.GetMeterProvider().Meter("github.com/kagzi/kagzi/dispatcher")
	g, err := m.Int64ObservableGauge("kagzi.relay.leader", metric.WithDescription("1 while this dispatcher replica holds the relay lock."))
	if err != nil {
		return
	}
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, dbsvc.B2I(relay.IsLeader()))
		return nil
	}, g)
}
