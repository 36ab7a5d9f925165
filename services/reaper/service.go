package reaper

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kagzi/kagzi/internal/lifecycle/process"
	"github.com/kagzi/kagzi/pkg/store/pgsession"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Assemble returns the reaper service's parts over st and nc (the reaper
// watches its NATS connection itself) with the readiness checks.
func Assemble(cfg Config, st *store.Store, nc *nats.Conn, log *slog.Logger) process.Parts {
	r := New(cfg, st, nc, log)
	registerMetrics(r)
	return process.Parts{Components: []lifecycle.Component{r},
		Checks: map[string]lifecycle.Check{"postgres": st.Ping, "nats": lifecycle.NATSCheck(nc)},
		Info:   map[string]func() string{"reaper": lifecycle.LeaderInfo(r.IsLeader)}}
}

// Run runs the reaper service until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	// The leader's session must not go through a pooler: better not to
	// start than never to lead.
	if err := pgsession.Check(ctx, cfg.SessionURL()); err != nil {
		if errors.Is(err, store.ErrSessionPooled) {
			return cfg.SessionPooled(err)
		}
		return err
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool, store.Options{OnLargePayload: process.LogLargePayload(log)})
	return process.Serve(ctx, process.Options{Name: protocol.RoleReaper, Common: cfg.Common, Log: log,
		NATSOptions: []nats.Option{nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleReaper))}},
		func(nc *nats.Conn) (process.Parts, error) { return Assemble(cfg, st, nc, log), nil })
}

// registerMetrics exports the reaper's view as metrics:
// kagzi.workers.online, the live workers it tracks (every replica tracks
// them; the leader acts), counters of what its recoveries and its
// retention cleanup did, and the retention gauges, which only the leader
// exports (from its last read of the next expiry, aged to the scrape).
func registerMetrics(rp *Reaper) {
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
	deleted, _ := m.Int64ObservableCounter("kagzi.runs.deleted",
		metric.WithDescription("Finished runs deleted, with their steps, payloads and events, after their retention period."))
	oldest, _ := m.Float64ObservableGauge("kagzi.retention.oldest_finished_age", metric.WithUnit("s"),
		metric.WithDescription("How long ago the oldest finished run still stored finished (0: none is stored); leader only."))
	overdue, _ := m.Float64ObservableGauge("kagzi.retention.overdue", metric.WithUnit("s"),
		metric.WithDescription("How long the most overdue expired run has waited for the cleanup (0: none is due); leader only."))
	batchRuns, _ := m.Int64ObservableCounter("kagzi.batch.runs",
		metric.WithDescription("Runs batch operations acted on, by outcome: done, failed or skipped (no longer in a status the action takes)."))
	batchesDone, _ := m.Int64ObservableCounter("kagzi.batches.completed", metric.WithDescription("Batch operations completed."))
	batchesRunning, _ := m.Int64ObservableGauge("kagzi.batches.running", metric.WithDescription("Batch operations the leader works on now; leader only."))
	givenUp, _ := m.Int64ObservableCounter("kagzi.events.given_up",
		metric.WithDescription("Published events whose fan-out failed store.MaxFanOutAttempts times, marked failed and passed over (poison events)."))
	eventsDeleted, _ := m.Int64ObservableCounter("kagzi.events.deleted",
		metric.WithDescription("Published events deleted, with their firings and webhook deliveries, after KAGZI_EVENT_RETENTION."))
	tokensDeleted, _ := m.Int64ObservableCounter("kagzi.wait_tokens.deleted",
		metric.WithDescription("Wait tokens deleted KAGZI_EVENT_RETENTION after they were used or expired."))
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := rp.Stats()
		o.ObserveInt64(givenUp, st.EventsGivenUp)
		o.ObserveInt64(eventsDeleted, st.EventsDeleted)
		o.ObserveInt64(tokensDeleted, st.WaitTokensDeleted)
		o.ObserveInt64(batchRuns, st.BatchRunsDone, metric.WithAttributes(attribute.String("outcome", "done")))
		o.ObserveInt64(batchRuns, st.BatchRunsFailed, metric.WithAttributes(attribute.String("outcome", "failed")))
		o.ObserveInt64(batchRuns, st.BatchRunsSkipped, metric.WithAttributes(attribute.String("outcome", "skipped")))
		o.ObserveInt64(batchesDone, st.BatchesCompleted)
		if st.Leader {
			o.ObserveInt64(batchesRunning, st.BatchesRunning)
		}
		o.ObserveInt64(online, int64(st.Workers))
		o.ObserveInt64(leader, process.B2I(st.Leader))
		o.ObserveInt64(recovered, st.RunsRetried, metric.WithAttributes(attribute.String("outcome", "retried")))
		o.ObserveInt64(recovered, st.RunsFailed, metric.WithAttributes(attribute.String("outcome", "failed")))
		o.ObserveInt64(recovered, st.RunsUndelivered, metric.WithAttributes(attribute.String("outcome", "undelivered")))
		o.ObserveInt64(expired, st.LeasesExpired)
		o.ObserveInt64(lost, st.WorkersLost)
		o.ObserveInt64(deadlines, st.DeadlinesMissed)
		o.ObserveInt64(deleted, st.RunsDeleted)
		if age, late, ok := rp.retain.ages(rp.sh.clock.Now()); ok {
			o.ObserveFloat64(oldest, age.Seconds())
			o.ObserveFloat64(overdue, late.Seconds())
		}
		return nil
	}, online, leader, recovered, expired, lost, deadlines, deleted, oldest, overdue, batchRuns, batchesDone, batchesRunning,
		givenUp, eventsDeleted, tokensDeleted)
}
