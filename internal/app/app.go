// Package app wires each Kagzi service from its configuration, so the
// service binaries, `kagzi dev` (all in one process) and `kagzi bench`
// (each service as its own process) run exactly the same assembly.
package app

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/dispatcher"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/reaper"
	"github.com/kagzi/kagzi/internal/scheduler"
	"github.com/kagzi/kagzi/internal/svc"
	"github.com/kagzi/kagzi/pkg/store"
)

// NewStore wraps pool, logging payloads above the database's warning size.
func NewStore(pool *pgxpool.Pool, log *slog.Logger) *store.Store {
	return store.New(pool, store.Options{
		OnLargePayload: func(what string, size int) { log.Warn("large payload", "what", what, "bytes", size) },
	})
}

// Dispatcher returns the dispatcher's components (the lease service and,
// if enabled, the relay) and its readiness checks.
func Dispatcher(cfg config.Dispatcher, st *store.Store, nc *nats.Conn, log *slog.Logger) ([]svc.Component, map[string]svc.Check) {
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
	comps := []svc.Component{d}
	checks := map[string]svc.Check{"postgres": st.Ping, "nats": svc.NATSCheck(nc)}
	if relay != nil {
		comps = append(comps, relay)
		registerRelayLeader(relay)
	}
	return comps, checks
}

// RunDispatcher runs the dispatcher service until ctx ends.
func RunDispatcher(ctx context.Context, cfg config.Dispatcher, log *slog.Logger) error {
	return run(ctx, "dispatcher", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) ([]svc.Component, map[string]svc.Check) {
		return Dispatcher(cfg, st, nc, log)
	})
}

// Scheduler returns the scheduler's component and its readiness checks.
// The scheduler resyncs on NATS reconnect by itself.
func Scheduler(cfg config.Scheduler, st *store.Store, nc *nats.Conn, log *slog.Logger) (*scheduler.Scheduler, map[string]svc.Check) {
	s := scheduler.New(scheduler.Config{Batch: cfg.SchedulerBatch, CatchUpWindow: cfg.SchedulerCatchUpWindow}, st, nc, log)
	return s, map[string]svc.Check{"postgres": st.Ping, "nats": svc.NATSCheck(nc)}
}

// RunScheduler runs the scheduler service until ctx ends.
func RunScheduler(ctx context.Context, cfg config.Scheduler, log *slog.Logger) error {
	return run(ctx, "scheduler", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) ([]svc.Component, map[string]svc.Check) {
		s, checks := Scheduler(cfg, st, nc, log)
		return []svc.Component{s}, checks
	})
}

// Reaper returns the reaper service (it watches its NATS connection itself)
// and its readiness checks.
func Reaper(cfg config.Reaper, st *store.Store, nc *nats.Conn, log *slog.Logger) (*reaper.Reaper, map[string]svc.Check) {
	retention := cfg.WorkerRetention
	if retention == 0 {
		retention = -1 // keep
	}
	r := reaper.New(reaper.Config{
		DatabaseURL: cfg.DatabaseURL, WorkerTimeout: cfg.WorkerTimeout, FlushInterval: cfg.FlushInterval,
		Lease: cfg.Lease, LeaseGrace: cfg.LeaseGrace, WorkerRetention: retention,
	}, st, nc, log)
	registerReaperMetrics(r)
	return r, map[string]svc.Check{"postgres": st.Ping, "nats": svc.NATSCheck(nc)}
}

// RunReaper runs the reaper service until ctx ends.
func RunReaper(ctx context.Context, cfg config.Reaper, log *slog.Logger) error {
	return run(ctx, "reaper", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) ([]svc.Component, map[string]svc.Check) {
		r, checks := Reaper(cfg, st, nc, log)
		return []svc.Component{r}, checks
	})
}

// run is what every database service does: connect to Postgres and NATS,
// set up telemetry and the health endpoint, build the components, run them
// until ctx ends.
func run(ctx context.Context, name string, common config.Common, db config.Database, log *slog.Logger,
	build func(*store.Store, *nats.Conn) ([]svc.Component, map[string]svc.Check)) error {
	pool, err := store.Connect(ctx, db.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := svc.ConnectNATS(common.NATSURL, "kagzi-"+name, log)
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
	comps, checks := build(NewStore(pool, log), nc)
	health.Checks = checks
	for _, c := range comps {
		if rp, ok := c.(*reaper.Reaper); ok {
			health.Info = map[string]func() string{"reaper": func() string {
				if rp.IsLeader() {
					return "leader"
				}
				return "standby"
			}}
		}
		if relay, ok := c.(*dispatcher.Relay); ok {
			// Readiness does not need the relay lock (a standby is ready),
			// but /readyz says which replica relays.
			health.Info = map[string]func() string{"relay": func() string {
				if relay.IsLeader() {
					return "leader"
				}
				return "standby"
			}}
		}
	}
	return svc.RunAll(ctx, log, append([]svc.Component{health}, comps...)...)
}

// registerReaperMetrics exports the reaper's view as metrics:
// kagzi.workers.online, the live workers it tracks (every replica tracks
// them; the leader acts), and counters of what its recoveries did.
func registerReaperMetrics(rp *reaper.Reaper) {
	m := otel.GetMeterProvider().Meter("github.com/kagzi/kagzi/reaper")
	online, err := m.Int64ObservableGauge("kagzi.workers.online", metric.WithDescription("Workers heard from within the timeout, as this reaper sees them."))
	if err != nil {
		return
	}
	leader, _ := m.Int64ObservableGauge("kagzi.reaper.leader", metric.WithDescription("1 while this reaper replica holds the leader lock."))
	recovered, _ := m.Int64ObservableCounter("kagzi.runs.recovered",
		metric.WithDescription("Runs the reaper took back, by outcome: retried, failed (attempts exhausted) or undelivered (claimable again, no attempt counted)."))
	expired, _ := m.Int64ObservableCounter("kagzi.leases.expired", metric.WithDescription("Runs taken back because their lease expired."))
	lost, _ := m.Int64ObservableCounter("kagzi.workers.lost", metric.WithDescription("Workers found silent past the timeout, their runs recovered."))
	deadlines, _ := m.Int64ObservableCounter("kagzi.deadlines.missed", metric.WithDescription("Runs failed past their deadline."))
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := rp.Stats()
		o.ObserveInt64(online, int64(st.Workers))
		o.ObserveInt64(leader, b2i(st.Leader))
		o.ObserveInt64(recovered, st.RunsRetried, metric.WithAttributes(attribute.String("outcome", "retried")))
		o.ObserveInt64(recovered, st.RunsFailed, metric.WithAttributes(attribute.String("outcome", "failed")))
		o.ObserveInt64(recovered, st.RunsUndelivered, metric.WithAttributes(attribute.String("outcome", "undelivered")))
		o.ObserveInt64(expired, st.LeasesExpired)
		o.ObserveInt64(lost, st.WorkersLost)
		o.ObserveInt64(deadlines, st.DeadlinesMissed)
		return nil
	}, online, leader, recovered, expired, lost, deadlines)
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
		o.ObserveInt64(g, b2i(relay.IsLeader()))
		return nil
	}, g)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
