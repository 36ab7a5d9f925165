package client

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/kagzitype"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// Schedule statuses.
const (
	StatusScheduled = kagzitype.StatusScheduled
	StatusPaused    = kagzitype.StatusPaused
)

// MaxCatchupLimit bounds ScheduleOptions.MaxCatchup.
const MaxCatchupLimit = store.MaxCatchupLimit

// ScheduleOptions describe a schedule for CreateSchedule.
type ScheduleOptions struct {
	// Cron is the cron expression (required): 5 fields (minute hour day
	// month weekday), 6 or 7 with seconds first and/or a year last, or a
	// tag such as @daily.
	Cron string
	// Timezone is the IANA zone the expression is read in (default UTC).
	Timezone string
	// ID is the schedule's id (default a new UUID v7). Creating a schedule
	// with an id that exists is ErrConflict, so an id derived from a
	// name makes creation idempotent.
	ID uuid.UUID
	// Queue of the fired runs (default the client's queue).
	Queue string
	// Version pins the workflow version of the fired runs.
	Version string
	// MaxCatchup is how many fire times missed while no scheduler ran for
	// longer than the scheduler's catch-up window (5 min by default; fire
	// times within it always fire) are fired when one comes back, the
	// most recent ones (0, the default, skips them all; at most
	// MaxCatchupLimit).
	MaxCatchup int
	// RetryPolicy of the fired runs (nil: defaults).
	RetryPolicy *retry.Policy
	// Overlap is what a fire does while a run the schedule started is
	// still live ("": OverlapAllowAll, every fire starts a run).
	Overlap OverlapPolicy
	// Jitter makes each fire's run available at its fire time plus a
	// delay in [0, Jitter), the same for the same fire time (derived from
	// the schedule id and the fire time); whole milliseconds, at most
	// MaxJitter. The run's ScheduleFireAt stays the nominal fire time.
	Jitter time.Duration
	// ConcurrencyKey and RateLimitKey are given to every run the schedule
	// starts, as StartOptions's: the runs count against the type's
	// per-key limit under ConcurrencyKey, and each claim of one against
	// the rate limit of RateLimitKey (docs/flow-control.md).
	ConcurrencyKey, RateLimitKey string
	// Attributes are the search attributes every run the schedule fires,
	// backfills or is triggered to start is given, as StartOptions.Attributes (checked when the
	// schedule is created).
	Attributes map[string]any
}

// CreateSchedule creates a schedule that starts a run of workflow type typ
// with input (encoded as JSON) at every time of o.Cron, from the first one
// after now. An invalid type, queue, input, expression, zone, catch-up,
// overlap policy or jitter is ErrInvalidArgument and stores nothing.
func (c *Client) CreateSchedule(ctx context.Context, typ string, input any, o ScheduleOptions) (*Schedule, error) {
	if err := protocol.ValidToken("workflow type", typ); err != nil {
		return nil, fmt.Errorf("create schedule %s: %w: %v", protocol.Echo(typ), store.ErrInvalidArgument, err)
	}
	q := o.Queue
	if q == "" {
		q = c.queue
	}
	if err := protocol.ValidToken("queue", q); err != nil {
		return nil, fmt.Errorf("create schedule %s: %w: %v", protocol.Echo(typ), store.ErrInvalidArgument, err)
	}
	overlap, err := scheduleOverlapParams(o)
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", protocol.Echo(typ), err)
	}
	raw, err := encodeInput(input)
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", protocol.Echo(typ), err)
	}
	sc, err := c.st.SchedulesCreate(ctx, store.SchedulesCreateParams{
		ScheduleID: o.ID, Namespace: c.ns, Queue: q, Type: typ, Version: o.Version,
		Cron: o.Cron, Timezone: o.Timezone, Input: raw, MaxCatchup: o.MaxCatchup, RetryPolicy: o.RetryPolicy,
		Overlap: overlap, Jitter: o.Jitter, ConcurrencyKey: o.ConcurrencyKey, RateLimitKey: o.RateLimitKey,
		Attributes: o.Attributes,
	})
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", protocol.Echo(typ), err)
	}
	return &sc, nil
}

// GetSchedule returns a schedule with its input.
func (c *Client) GetSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	sc, err := c.st.SchedulesGet(ctx, c.ns, id)
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// ListSchedulesOptions page ListSchedules.
type ListSchedulesOptions struct {
	// Limit is the page size (default 50, at most 1000).
	Limit int
	// Cursor continues from a previous page's next cursor.
	Cursor string
}

// ListSchedules lists the namespace's schedules newest first, without their
// inputs; next is "" on the last page.
func (c *Client) ListSchedules(ctx context.Context, o ListSchedulesOptions) (schedules []Schedule, next string, err error) {
	p := store.SchedulesListParams{Namespace: c.ns, Limit: o.Limit}
	if o.Cursor != "" {
		cur, err := store.ParseCursor(o.Cursor)
		if err != nil {
			return nil, "", err
		}
		p.After = &cur
	}
	scs, nc, err := c.st.SchedulesList(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if nc != nil {
		next = nc.String()
	}
	return nonNil(scs), next, nil
}

// PauseSchedule pauses a schedule: it fires nothing until resumed. Pausing
// a paused schedule does nothing.
func (c *Client) PauseSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	sc, err := c.st.SchedulesPause(ctx, c.ns, id)
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// ResumeSchedule resumes a paused schedule at its first fire time after
// now: the times missed while it was paused are skipped, not caught up.
// Resuming a running schedule does nothing.
func (c *Client) ResumeSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	sc, err := c.st.SchedulesResume(ctx, c.ns, id, time.Now())
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// TriggerSchedule starts a run of the schedule now, outside its cron,
// paused or not; its next fire time does not move. The handle follows the
// run started.
func (c *Client) TriggerSchedule(ctx context.Context, id uuid.UUID) (*Handle, error) {
	// The trigger's span is the root of the run's trace.
	ctx, span := c.tracer.Start(ctx, "kagzi.trigger", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("kagzi.schedule_id", id.String()), attribute.String("kagzi.namespace", c.ns)))
	defer span.End()
	run, err := c.st.SchedulesTrigger(store.WithTraceContext(ctx, tracectx.TraceParent(ctx)), c.ns, id, time.Now())
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	span.SetAttributes(attribute.String("kagzi.run_id", run.ID.String()), attribute.String("kagzi.workflow_type", run.Type))
	return &Handle{c: c, RunID: run.ID, Created: true}, nil
}

// DeleteSchedule deletes a schedule; the runs it fired stay.
func (c *Client) DeleteSchedule(ctx context.Context, id uuid.UUID) error {
	return c.st.SchedulesDelete(ctx, c.ns, id)
}

// ScheduleHistory returns the runs a schedule fired (and those triggered),
// newest fire time first, at most limit (default 50, at most 1000).
func (c *Client) ScheduleHistory(ctx context.Context, id uuid.UUID, limit int) ([]Run, error) {
	rs, err := c.st.SchedulesHistory(ctx, c.ns, id, limit)
	if err != nil {
		return nil, err
	}
	return nonNil(rs), nil
}
