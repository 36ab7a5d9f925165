package scheduler

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/store"
)

// instruments are the scheduler's spans and metrics. Metric attributes are
// the namespace and workflow type; schedule and run ids go on spans.
type instruments struct {
	tracer   trace.Tracer
	fires    metric.Int64Counter
	lateness metric.Float64Histogram
	skipped  metric.Int64Counter
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) *instruments {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/kagzi/kagzi/scheduler")
	in := &instruments{tracer: tp.Tracer("github.com/kagzi/kagzi/scheduler")}
	// Instrument creation fails only on invalid names; ours are constant.
	in.fires, _ = m.Int64Counter("kagzi.schedule.fires", metric.WithDescription("Runs created by schedules firing."))
	in.lateness, _ = m.Float64Histogram("kagzi.schedule.lateness", metric.WithUnit("ms"),
		metric.WithDescription("From a fire time to the run it created."),
		metric.WithExplicitBucketBoundaries(1, 5, 10, 25, 50, 100, 250, 1000, 5000, 60000, 600000))
	in.skipped, _ = m.Int64Counter("kagzi.schedule.skipped",
		metric.WithDescription("Schedule advances that skipped missed fire times (beyond max_catchup or the catch-up window)."))
	return in
}

// fired records one schedule's advance: a kagzi.schedule.fire span in each
// created run's own trace (the first span of a scheduled run's trace), a
// kagzi.schedule.catchup span when the advance fired more than one missed
// time, a kagzi.schedule.skip span when it fired none, and the metrics.
func (in *instruments) fired(ctx context.Context, sc store.Schedule, runs []store.Run, start, now time.Time) {
	attrs := metric.WithAttributes(attribute.String("namespace", sc.Namespace), attribute.String("workflow_type", sc.Type))
	common := []attribute.KeyValue{
		attribute.String("kagzi.schedule_id", sc.ID.String()),
		attribute.String("kagzi.namespace", sc.Namespace),
		attribute.String("kagzi.workflow_type", sc.Type),
		attribute.String("kagzi.queue", sc.Queue),
	}
	if len(runs) == 0 {
		_, span := in.tracer.Start(ctx, "kagzi.schedule.skip "+sc.Type, trace.WithTimestamp(start),
			trace.WithNewRoot(), trace.WithAttributes(common...))
		if sc.NextFireAt != nil {
			span.SetAttributes(attribute.String("kagzi.schedule.due_since", sc.NextFireAt.UTC().Format(time.RFC3339Nano)))
		}
		span.SetAttributes(attribute.Int("kagzi.schedule.max_catchup", sc.MaxCatchup))
		span.End()
		in.skipped.Add(ctx, 1, attrs)
		return
	}
	var links []trace.Link
	for _, r := range runs {
		rctx := tracectx.WithTraceParent(ctx, r.TraceContext)
		_, span := in.tracer.Start(rctx, "kagzi.schedule.fire "+sc.Type, trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(common...),
			trace.WithAttributes(attribute.String("kagzi.run_id", r.ID.String())))
		if r.ScheduleFireAt != nil {
			late := now.Sub(*r.ScheduleFireAt)
			span.SetAttributes(attribute.String("kagzi.schedule.fire_at", r.ScheduleFireAt.UTC().Format(time.RFC3339Nano)),
				attribute.Int64("kagzi.schedule.lateness_ms", late.Milliseconds()))
			in.lateness.Record(ctx, float64(late)/float64(time.Millisecond), attrs)
		}
		links = append(links, trace.Link{SpanContext: span.SpanContext()})
		span.End()
	}
	in.fires.Add(ctx, int64(len(runs)), attrs)
	if len(runs) > 1 {
		_, span := in.tracer.Start(ctx, "kagzi.schedule.catchup "+sc.Type, trace.WithTimestamp(start),
			trace.WithNewRoot(), trace.WithLinks(links...), trace.WithAttributes(common...),
			trace.WithAttributes(attribute.Int("kagzi.schedule.fired", len(runs))))
		span.End()
	}
}
