package dispatcher

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"
	"github.com/kagzi/kagzi/pkg/store/pgsession"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Assemble returns the dispatcher service's parts over st and nc: the
// lease service and, if cfg.Relay, the relay, with the readiness checks.
func Assemble(cfg Config, st *store.Store, nc *nats.Conn, log *slog.Logger) process.Parts {
	var deps Deps
	var relay *Relay
	if cfg.Relay {
		deps.Published = NewPublished()
		relay = NewRelay(cfg, RelayDeps{Published: deps.Published, Store: st}, nc, log)
		deps.RelayID = relay.LeaderID
	}
	d := New(cfg, deps, st, nc, log)
	if relay != nil {
		relay.deps.Local = d
	}
	natsutil.OnReconnect(nc, d.Reconnected)
	p := process.Parts{Components: []lifecycle.Component{d}, Checks: map[string]lifecycle.Check{
		"postgres": st.Ping, "nats": lifecycle.NATSCheck(nc),
	}}
	if relay != nil {
		p.Components = append(p.Components, relay)
		// Readiness does not need the relay lock (a standby is ready),
		// but /readyz says which replica relays.
		p.Info = map[string]func() string{"relay": lifecycle.LeaderInfo(relay.IsLeader)}
		registerRelayLeader(relay)
	}
	return p
}

// Run runs the dispatcher service until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Relay {
		// The relay's session must not go through a pooler: better not
		// to start than to relay nothing.
		if err := pgsession.Check(ctx, cfg.SessionURL()); err != nil {
			if errors.Is(err, store.ErrSessionPooled) {
				return cfg.SessionPooled(err)
			}
			return err
		}
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.hops, err = hops.Open(cfg.HopsDir, protocol.RoleDispatcher); err != nil {
		return err
	}
	defer func() { _ = cfg.hops.Close() }()
	st := store.New(pool, store.Options{OnLargePayload: process.LogLargePayload(log)})
	return process.Serve(ctx, process.Options{Name: protocol.RoleDispatcher, Common: cfg.Common, Log: log,
		NATSOptions: []nats.Option{nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleDispatcher))}},
		func(nc *nats.Conn) (process.Parts, error) { return Assemble(cfg, st, nc, log), nil })
}

// registerRelayLeader exports kagzi.relay.leader: 1 on the dispatcher
// replica that relays Postgres notifications to NATS, 0 on the others; the
// sum over replicas is 1 when all is well.
func registerRelayLeader(relay *Relay) {
	m := otel.GetMeterProvider().Meter("github.com/kagzi/kagzi/dispatcher")
	g, err := m.Int64ObservableGauge("kagzi.relay.leader", metric.WithDescription("1 while this dispatcher replica holds the relay lock."))
	if err != nil {
		return
	}
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, process.B2I(relay.IsLeader()))
		return nil
	}, g)
}
