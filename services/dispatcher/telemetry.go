package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kagzi/kagzi/internal/metricattr"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// queueKey names the attribute set of a measurement by namespace and a
// second name (a queue, or a workflow type).
type queueKey struct{ ns, name string }

func queueAttrs(k queueKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("namespace", k.ns), attribute.String("queue", k.name)}
}

func typeAttrs(k queueKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("namespace", k.ns), attribute.String("workflow_type", k.name)}
}

func nsAttrs(ns string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("namespace", ns)}
}

// queue, typ and ns are the attribute sets of a measurement by namespace
// and queue, by namespace and workflow type, and by namespace.
func (in *instruments) queue(ns, queue string) metric.MeasurementOption {
	return in.byQueue.Get(queueKey{ns, queue}, queueAttrs)
}

func (in *instruments) typ(ns, typ string) metric.MeasurementOption {
	return in.byType.Get(queueKey{ns, typ}, typeAttrs)
}

func (in *instruments) ns(ns string) metric.MeasurementOption { return in.byNS.Get(ns, nsAttrs) }

// instruments are the dispatcher's metrics. Attributes are namespaces and
// queues only: run and worker ids go on spans, never on metrics.
type instruments struct {
	tracer trace.Tracer
	// tracing is false when the provider is the no-op one: the spans of
	// every claimed and delivered run are then not built at all, since
	// their attributes alone cost more than the rest of the claim's Go
	// side.
	tracing   bool
	byQueue   metricattr.Cache[queueKey]
	byType    metricattr.Cache[queueKey]
	byNS      metricattr.Cache[string]
	completed metric.Int64Counter
	failed    metric.Int64Counter
	leaseLost metric.Int64Counter
	dispatch  metric.Float64Histogram
	relayed   metric.Int64Counter
	// claimLatency is the claim statement's duration; reportLatency is a
	// report's, from its arrival to the reply.
	claimLatency  metric.Float64Histogram
	reportLatency metric.Float64Histogram
	// keyLimited counts claims that left runs queued behind a full
	// per-key limit; rateHeld counts the runs claims held back for a rate
	// limit (moved to a later window). Keys are never attributes.
	keyLimited metric.Int64Counter
	rateHeld   metric.Int64Counter
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) *instruments {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/kagzi/kagzi/dispatcher")
	_, off := tp.(noop.TracerProvider)
	in := &instruments{tracer: tp.Tracer("github.com/kagzi/kagzi/dispatcher"), tracing: !off}
	// Instrument creation fails only on invalid names; ours are constant.
	in.completed, _ = m.Int64Counter(
		"kagzi.runs.completed",
		metric.WithDescription("Runs completed (a continue-as-new included), per namespace and workflow type."),
	)
	in.failed, _ = m.Int64Counter(
		"kagzi.runs.failed",
		metric.WithDescription("Runs failed for good or cancelled by their workflow, per namespace and workflow type."),
	)
	in.leaseLost, _ = m.Int64Counter("kagzi.leases.lost", metric.WithDescription("Reports refused because their lease was no longer current."))
	in.dispatch, _ = m.Float64Histogram("kagzi.dispatch.latency", metric.WithUnit("ms"),
		metric.WithDescription("From a run becoming due to its claim."),
		metric.WithExplicitBucketBoundaries(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000))
	in.claimLatency, _ = m.Float64Histogram("kagzi.claim.latency", metric.WithUnit("ms"),
		metric.WithDescription("Duration of one claim statement (claiming up to a worker's credits)."),
		metric.WithExplicitBucketBoundaries(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000))
	in.reportLatency, _ = m.Float64Histogram("kagzi.report.latency", metric.WithUnit("ms"),
		metric.WithDescription("From a worker's report arriving to its reply (queued, applied in a transaction, committed)."),
		metric.WithExplicitBucketBoundaries(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000))
	in.relayed, _ = m.Int64Counter("kagzi.notifications.relayed", metric.WithDescription("Postgres notifications republished on NATS."))
	in.keyLimited, _ = m.Int64Counter("kagzi.claims.key_limited",
		metric.WithDescription("Claims that left runs queued behind a concurrency key at its per-key limit, per namespace and queue."))
	in.rateHeld, _ = m.Int64Counter("kagzi.claims.rate_limited",
		metric.WithDescription("Runs a claim held back for a full rate limit window (moved to a later window), per namespace and queue."))
	return in
}

// registerQueueDepth adds the queue gauges, read from Postgres in one
// statement when metrics are collected (at most every 5 s), so an idle
// system that nobody scrapes costs no statements: kagzi.queue.depth, the
// due runs waiting to be claimed, kagzi.queue.unserved, those of them that
// no live worker serves, and kagzi.queue.oldest_due_age, how long the
// longest-waiting of them has been due. A queue once seen keeps reporting,
// 0 when nothing is due, so a dashboard shows 0 rather than no data. The
// dispatcher owns them: it is the service that leaves such runs waiting
// (and looks at them again, backing off). kagzi.runs.paused, read in the
// same collection, counts the paused runs of each namespace (a range of
// the paused index, empty while nothing is paused); a namespace once seen
// keeps reporting, 0 when none is.
func registerQueueDepth(mp metric.MeterProvider, st *store.Store, ctx func() context.Context) error {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/kagzi/kagzi/dispatcher")
	g, err := m.Int64ObservableGauge("kagzi.queue.depth", metric.WithDescription("Due runs waiting to be claimed, per queue."))
	if err != nil {
		return err
	}
	ug, err := m.Int64ObservableGauge("kagzi.queue.unserved",
		metric.WithDescription("Due runs waiting that no live worker serves (type@version on the queue), per queue."))
	if err != nil {
		return err
	}
	ag, err := m.Float64ObservableGauge("kagzi.queue.oldest_due_age", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-waiting due run of the queue has been due (0: none is)."))
	if err != nil {
		return err
	}
	pg, err := m.Int64ObservableGauge("kagzi.runs.paused", metric.WithDescription("Live runs paused (kagzi run pause), per namespace."))
	if err != nil {
		return err
	}
	type key struct{ ns, queue string }
	var (
		mu     sync.Mutex
		last   time.Time
		cached = map[key]store.QueueDepth{}
		paused = map[string]int64{}
	)
	_, err = m.RegisterCallback(func(cctx context.Context, o metric.Observer) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) > 5*time.Second {
			qctx, cancel := context.WithTimeout(ctx(), 2*time.Second)
			depths, err := st.RunsQueueDepths(qctx)
			var np map[string]int64
			if err == nil {
				np, err = st.RunsPausedCount(qctx)
			}
			cancel()
			if err == nil {
				for ns := range paused {
					paused[ns] = 0
				}
				for ns, n := range np {
					paused[ns] = n
				}
				for k, q := range cached {
					cached[k] = store.QueueDepth{Namespace: q.Namespace, Queue: q.Queue}
				}
				for _, q := range depths {
					cached[key{q.Namespace, q.Queue}] = q
				}
				last = time.Now()
			}
		}
		for _, q := range cached {
			attrs := metric.WithAttributes(attribute.String("namespace", q.Namespace), attribute.String("queue", q.Queue))
			o.ObserveInt64(g, q.Due, attrs)
			o.ObserveInt64(ug, q.Unserved, attrs)
			age := 0.0
			if q.Due > 0 && !q.OldestDueAt.IsZero() {
				age = max(time.Since(q.OldestDueAt).Seconds(), 0)
			}
			o.ObserveFloat64(ag, age, attrs)
		}
		for ns, n := range paused {
			o.ObserveInt64(pg, n, metric.WithAttributes(attribute.String("namespace", ns)))
		}
		return nil
	}, g, ug, ag, pg)
	return err
}

// runAttrs are the span attributes naming a claimed run and its execution:
// kagzi.execution counts the run's deliveries (its lease token: 1 for the
// first, one more for every later one, after a sleep, a wait, a retry or a
// recovery alike), kagzi.retry_epoch counts the workflow's retries (1 until
// a failed run is retried by policy), kagzi.attempts is the run's attempts
// against its policy's max attempts.
func runAttrs(r *store.ClaimedRun, workerID string) trace.SpanStartOption {
	return trace.WithAttributes(
		attribute.String("kagzi.run_id", r.ID.String()),
		attribute.String("kagzi.namespace", r.Namespace),
		attribute.String("kagzi.workflow_type", r.Type),
		attribute.String("kagzi.queue", r.Queue),
		attribute.Int64("kagzi.execution", r.LeaseToken),
		attribute.Int("kagzi.retry_epoch", r.Epoch),
		attribute.Int("kagzi.attempts", r.Attempts),
		attribute.String("kagzi.worker_id", workerID),
	)
}

// claimRound records what one claim statement produced, in one call
// from the claim loop: the runs flow control held back, the statement's
// latency, a kagzi.claim span in the trace of each run it claimed, and
// each run's dispatch latency (from due to claimed, at end). Every
// measurement takes the claim's namespace and queue, which are those of
// every run it returns.
func (in *instruments) claimRound(ctx context.Context, ns, queue string, runs []store.ClaimedRun, st store.ClaimStats,
	worker uuid.UUID, start, end time.Time) {
	attrs := in.queue(ns, queue)
	if st.KeysFull > 0 {
		in.keyLimited.Add(ctx, 1, attrs)
	}
	if st.RateHeld > 0 {
		in.rateHeld.Add(ctx, int64(st.RateHeld), attrs)
	}
	in.claimLatency.Record(ctx, float64(end.Sub(start))/float64(time.Millisecond), attrs)
	if in.tracing && len(runs) > 0 {
		workerID := worker.String()
		for i := range runs {
			r := &runs[i]
			in.birthRoot(ctx, r, start)
			_, span := in.tracer.Start(tracectx.WithTraceParent(ctx, r.TraceContext), "kagzi.claim "+r.Type,
				trace.WithTimestamp(start), runAttrs(r, workerID),
				trace.WithAttributes(attribute.Int("kagzi.claim.runs", len(runs))))
			span.End(trace.WithTimestamp(end))
		}
	}
	for i := range runs {
		in.dispatch.Record(ctx, float64(end.Sub(runs[i].DueAt))/float64(time.Millisecond), attrs)
	}
}

// birthRoot reports the root span of a run's trace that the store started
// (nothing traced the run's start), at the run's first claim: kagzi.run,
// from its creation to the claim, under the span id its trace context
// names, so the trace has a real root. Children share their parent's
// context and have none of their own. Only a provider that honours
// tracectx.WithRootIDs (internal/telemetry's) can report it; with another,
// the span is left unended, so never exported with a wrong id.
func (in *instruments) birthRoot(ctx context.Context, r *store.ClaimedRun, claimed time.Time) {
	if r.LeaseToken != 1 || r.ParentRunID != nil {
		return
	}
	tid, sid, ok := tracectx.BirthRoot(r.TraceContext)
	if !ok {
		return
	}
	_, span := in.tracer.Start(tracectx.WithRootIDs(ctx, tid, sid), "kagzi.run "+r.Type, trace.WithNewRoot(),
		trace.WithTimestamp(r.CreatedAt), trace.WithAttributes(
			attribute.String("kagzi.run_id", r.ID.String()),
			attribute.String("kagzi.namespace", r.Namespace),
			attribute.String("kagzi.workflow_type", r.Type),
			attribute.String("kagzi.queue", r.Queue),
		))
	if r.ScheduleID != nil {
		span.SetAttributes(attribute.String("kagzi.schedule_id", r.ScheduleID.String()))
	}
	if sc := span.SpanContext(); sc.TraceID() == trace.TraceID(tid) && sc.SpanID() == trace.SpanID(sid) {
		span.End(trace.WithTimestamp(claimed))
	}
}

// startDispatch opens the kagzi.dispatch span of each run of a delivery
// in its trace, into spans, and makes it the TraceParent of the run's
// entry in delivered, so the worker's attempt span takes it as its parent
// (left as it is when tracing is off). The delivery ends the spans itself
// (endDispatch), so it enters this file once.
func (in *instruments) startDispatch(ctx context.Context, runs []store.ClaimedRun, delivered []protocol.DeliveredRun,
	worker uuid.UUID, spans []trace.Span) {
	if !in.tracing {
		return
	}
	workerID := worker.String()
	for i := range runs {
		r := &runs[i]
		sctx, sp := in.tracer.Start(tracectx.WithTraceParent(ctx, r.TraceContext), "kagzi.dispatch "+r.Type,
			trace.WithSpanKind(trace.SpanKindProducer), runAttrs(r, workerID))
		spans[i] = sp
		if !sp.SpanContext().IsValid() {
			continue
		}
		if tp := tracectx.TraceParent(sctx); tp != "" {
			delivered[i].TraceParent = tp
		}
	}
}

// finished counts a run's end, by namespace and workflow type. A repeated
// report that found the run already ended names no type and is not counted
// again.
func (in *instruments) finished(ctx context.Context, ns, typ, status string) {
	if typ == "" {
		return
	}
	attrs := in.typ(ns, typ)
	if status == string(store.StatusCompleted) {
		in.completed.Add(ctx, 1, attrs)
	} else {
		in.failed.Add(ctx, 1, attrs)
	}
}
