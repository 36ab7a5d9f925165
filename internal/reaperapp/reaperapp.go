// Package reaperapp wires the reaper service from its configuration. The
// reaper binary, `kagzi dev` and `kagzi serve` use it; it links no other
// service.
package reaperapp

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/dbsvc"
	"github.com/kagzi/kagzi/internal/reaper"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/internal/svc"
)

// New returns the reaper over st and nc (it watches its NATS connection
// itself) and its readiness checks.
func New(cfg config.Reaper, st *store.Store, nc *nats.Conn, log *slog.Logger) (*reaper.Reaper, map[string]svc.Check) {
	retention := cfg.WorkerRetention
	if retention == 0 {
		retention = -1 // keep
	}
	r := reaper.New(reaper.Config{
		DatabaseURL: cfg.DatabaseURL, WorkerTimeout: cfg.WorkerTimeout, FlushInterval: cfg.FlushInterval,
		Lease: cfg.Lease, LeaseGrace: cfg.LeaseGrace, WorkerRetention: retention,
	}, st, nc, log)
	registerMetrics(r)
	return r, dbsvc.Ready(st, nc)
}

// Run runs the reaper service until ctx ends.
func Run(ctx context.Context, cfg config.Reaper, log *slog.Logger) error {
	return dbsvc.Run(ctx, "reaper", cfg.Common, cfg.Database, log, func(st *store.Store, nc *nats.Conn) dbsvc.Parts {
		r, checks := New(cfg, st, nc, log)
		return dbsvc.Parts{Components: []svc.Component{r}, Checks: checks,
			Info: map[string]func() string{"reaper": dbsvc.LeaderInfo(r.IsLeader)}}
	})
}

// registerMetrics exports the reaper's view as metrics:
// kagzi.workers.online, the live workers it tracks (every replica tracks
// them; the leader acts), and counters of what its recoveries did.
func registerMetrics(rp *reaper.Reaper) {
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
		o.ObserveInt64(leader, dbsvc.B2I(st.Leader))
		o.ObserveInt64(recovered, st.RunsRetried, metric.WithAttributes(attribute.String("outcome", "retried")))
		o.ObserveInt64(recovered, st.RunsFailed, metric.WithAttributes(attribute.String("outcome", "failed")))
		o.ObserveInt64(recovered, st.RunsUndelivered, metric.WithAttributes(attribute.String("outcome", "undelivered")))
		o.ObserveInt64(expired, st.LeasesExpired)
		o.ObserveInt64(lost, st.WorkersLost)
		o.ObserveInt64(deadlines, st.DeadlinesMissed)
		return nil
	}, online, leader, recovered, expired, lost, deadlines)
}
