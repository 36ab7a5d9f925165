// Package client is what applications import to start workflow runs and
// follow them. Build it with Connect (a database URL) or NewFromPool (the
// application's pgx pool) and a NATS connection; start runs of a workflow
// declared with workflow.New with StartWorkflow, whose handle's Result is
// the workflow's output type. The client returns the engine's row types
// (pkg/kagzitype, under the client's names: Run, Schedule, RunStatus …)
// and its errors (ErrNotFound, ErrConflict, …): an application never
// imports the engine's data layer.
//
// It offers Start (optionally inside the application's own pgx
// transaction), StartMany, Get, List, Cancel, Result, which waits for a
// run's end by push (a NATS subscription made before Postgres is checked,
// so no result is missed and nothing polls), SendEvent for runs that take
// events with WaitForEvent or DrainEvents (SignalWithStart starting the
// run if none is live; a run cannot end past an event it has not seen, see
// SignalWithStart), CompleteWaitToken for the tokens a workflow waits for
// (workflow.NewWaitToken), Publish for events that start a run per
// matching trigger (docs/triggers.md), Update
// for requests a workflow answers while the caller waits
// (workflow.NewUpdate), Retry for failed runs (dead letters), Fork and
// ForkMany to rerun runs from a step after a fix, global
// concurrency limits per workflow type, the operator's default version per
// type (SetDefaultVersion), how long finished runs are kept
// (SetRetention), and remote drain of a worker (DrainWorker).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// Typed errors of the client, besides ErrNotFound, ErrConflict,
// ErrInvalidArgument and ErrPayloadTooLarge, which it returns wrapped.
var (
	// ErrRunFailed is wrapped by the error Result returns for a run that
	// failed or was cancelled; errors.As to *RunError for details.
	ErrRunFailed = errors.New("run did not complete")
	// ErrNoWorker is wrapped by the error of a start with
	// StartOptions.RequireWorker that no live worker serves: nothing was
	// started.
	ErrNoWorker = store.ErrNoWorker
)

// RunError says how a run ended when it did not complete.
type RunError struct {
	RunID   uuid.UUID
	Status  RunStatus
	Message string
}

func (e *RunError) Error() string {
	return fmt.Sprintf("run %s %s: %s", e.RunID, e.Status, e.Message)
}

// Unwrap makes errors.Is(err, ErrRunFailed) hold.
func (e *RunError) Unwrap() error { return ErrRunFailed }

// Options configure a Client.
type Options struct {
	// Namespace the client works in (default "default").
	Namespace string
	// Queue is the default task queue of started runs (default "default").
	Queue string
	// TracerProvider and MeterProvider default to the otel globals.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Client starts and follows runs. It is safe for concurrent use.
type Client struct {
	st *store.Store
	// pool is closed by Close when Connect opened it.
	pool  interface{ Close() }
	nc    *nats.Conn
	ns    string
	queue string

	// resync is closed and replaced when waiters must re-check Postgres
	// (NATS reconnected or a relay restarted: finish events may be lost).
	resync chan struct{}
	rsMu   sync.Mutex
	relay  *nats.Subscription
	// drops tells of messages NATS dropped before they were read: a
	// dropped finish event or relay announcement is a lost one.
	drops *natsutil.Drops

	tracer    trace.Tracer
	started   metric.Int64Counter
	debounced metric.Int64Counter
	// served is what the client last read of which types live workers
	// serve, for Handle.Warnings.
	served served
}

// NewFromStore returns a client over a store the caller already holds (the
// engine's services, the CLI and operators' tools, which use pkg/store);
// applications use Connect or NewFromPool. The caller keeps owning st's
// pool, and nc may be nil (no live notifications).
func NewFromStore(st *store.Store, nc *nats.Conn, opts Options) (*Client, error) {
	if st == nil {
		return nil, fmt.Errorf("client: %w: nil store", ErrInvalidArgument)
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Queue == "" {
		opts.Queue = "default"
	}
	if err := protocol.ValidToken("namespace", opts.Namespace); err != nil {
		return nil, fmt.Errorf("client: %w: %v", store.ErrInvalidArgument, err)
	}
	if err := protocol.ValidToken("queue", opts.Queue); err != nil {
		return nil, fmt.Errorf("client: %w: %v", store.ErrInvalidArgument, err)
	}
	if nc != nil {
		if err := natsutil.CheckServer(nc); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	c := &Client{st: st, nc: nc, ns: opts.Namespace, queue: opts.Queue,
		resync: make(chan struct{})}
	tp, mp := opts.TracerProvider, opts.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c.tracer = tp.Tracer("github.com/kagzi/kagzi/client")
	c.started, _ = mp.Meter("github.com/kagzi/kagzi/client").Int64Counter("kagzi.runs.started",
		metric.WithDescription("Runs started (new runs, not idempotent repeats)."))
	c.debounced, _ = mp.Meter("github.com/kagzi/kagzi/client").Int64Counter("kagzi.runs.debounced",
		metric.WithDescription("Debounced starts merged into an open run instead of starting one."))
	if nc != nil {
		sub, err := nc.Subscribe(protocol.SubjectRelayUp, func(*nats.Msg) { c.kick() })
		if err != nil {
			return nil, fmt.Errorf("client: subscribe: %w", err)
		}
		c.relay = sub
		natsutil.OnReconnect(nc, c.kick)
		c.drops = natsutil.WatchDrops(nc)
		c.drops.Add(sub, c.kick)
	}
	return c, nil
}

// Close releases the client's subscriptions, and the database pool if
// Connect opened it.
func (c *Client) Close() {
	if c.relay != nil {
		_ = c.relay.Unsubscribe()
	}
	if c.pool != nil {
		c.pool.Close()
	}
}

func (c *Client) kick() {
	c.rsMu.Lock()
	close(c.resync)
	c.resync = make(chan struct{})
	c.rsMu.Unlock()
}

func (c *Client) resyncChan() <-chan struct{} {
	c.rsMu.Lock()
	defer c.rsMu.Unlock()
	return c.resync
}

// Namespace is the client's namespace.
func (c *Client) Namespace() string { return c.ns }

// StartOptions tune one start.
type StartOptions struct {
	// Queue overrides the client's default queue.
	Queue string
	// Version pins the workflow version; empty means the type's default
	// version (SetDefaultVersion), or without one the version of the first
	// worker that claims the run (then fixed for its replays).
	Version string
	// ExternalID makes the start idempotent: while a run with this id is
	// live, starting again returns it.
	ExternalID string
	// RetryPolicy of the run (nil: defaults, 5 attempts).
	RetryPolicy *retry.Policy
	// Deadline fails the run if it has not finished by then.
	Deadline time.Time
	// Priority: higher is claimed first (default 0).
	Priority int
	// StartAt delays the first execution.
	StartAt time.Time
	// TraceParent is a W3C traceparent to join the run to; a malformed one
	// is ignored.
	TraceParent string
	// ConcurrencyKey counts the run against its type's per-key limit
	// (SetKeyConcurrencyLimit) under this key, e.g. a customer id: at most
	// that many runs with the key run at once, and keys take turns.
	ConcurrencyKey string
	// RateLimitKey counts each claim of the run against the rate limit of
	// this key (SetRateLimit); without a limit set for the key it is free.
	RateLimitKey string
	// RequireWorker refuses the start with ErrNoWorker when no live worker
	// serves the type (at Version, if set) on the queue, instead of
	// starting a run that waits PENDING until one registers. It is checked
	// in the start's own statement; in StartMany, one such run refuses the
	// whole batch.
	RequireWorker bool
	// Debounce merges this start into the open run of its debounce key
	// (see Debounce); nil: no debounce.
	Debounce *Debounce
	// IDReusePolicy says whether ExternalID may name a new run given the
	// runs that held it and ended (see IDReusePolicy; default
	// AllowDuplicate). IDReuseWindow bounds, for AllowDuplicateFailedOnly
	// and RejectDuplicate, how long ago such a run ended to count (0: as
	// long as retention keeps it; at most MaxIDReuseWindow).
	IDReusePolicy IDReusePolicy
	IDReuseWindow time.Duration
	// Attributes are the run's search attributes, by which List and Count
	// find it (ListOptions.Query). Each is declared in the namespace first
	// (DeclareAttribute) and given as a Go value of its kind: string
	// (keyword or text), []string (a keyword list), an integer type (int,
	// or float), float64 (float), bool, time.Time. An undeclared name or
	// a value of another kind is ErrAttribute. At most 32 per run; a
	// keyword is at most 256 bytes, a list 32 values, a text 2 KiB, all
	// values together 16 KiB. A run continued as new keeps them.
	Attributes map[string]any
	// Batch makes the start an item of a batch that becomes one run (see
	// Batching); Start and StartTx only.
	Batch *Batching
}

// Handle refers to a started run.
type Handle struct {
	c *Client
	// RunID identifies the run.
	RunID uuid.UUID
	// Created is false when the start returned an existing run: the live
	// run with the same external id, or the open debounced run the start
	// merged into (StartOptions.Debounce).
	Created bool
	// Warnings are what a caller should know of a start that was not
	// refused: that no live worker serves the run's type on its queue, so
	// it waits PENDING until one registers (StartOptions.RequireWorker
	// refuses such a start). Whether a type is served is read at most
	// every few seconds per type, so a worker that just registered or left
	// may not show yet.
	Warnings []string
	// Item is the item a batched start added (StartOptions.Batch), nil
	// for other starts; RunID is then zero until the batch closes.
	Item *BatchItem
}

func (c *Client) params(typ string, input any, o StartOptions) (store.RunsCreateParams, error) {
	if o.Batch != nil {
		return store.RunsCreateParams{}, fmt.Errorf("%w: only Start and StartTx take a batch", ErrStartBatch)
	}
	if err := protocol.ValidToken("workflow type", typ); err != nil {
		return store.RunsCreateParams{}, fmt.Errorf("%w: %v", store.ErrInvalidArgument, err)
	}
	raw, err := encodeInput(input)
	if err != nil {
		return store.RunsCreateParams{}, err
	}
	q := o.Queue
	if q == "" {
		q = c.queue
	}
	if err := protocol.ValidToken("queue", q); err != nil {
		return store.RunsCreateParams{}, fmt.Errorf("%w: %v", store.ErrInvalidArgument, err)
	}
	p := store.RunsCreateParams{Namespace: c.ns, Queue: q, Type: typ, Version: o.Version,
		ExternalID: o.ExternalID, Input: raw, RetryPolicy: o.RetryPolicy, Priority: o.Priority, TraceContext: o.TraceParent,
		RequireWorker: o.RequireWorker, ConcurrencyKey: o.ConcurrencyKey, RateLimitKey: o.RateLimitKey, Attributes: o.Attributes}
	if err := flowParams(&p, o); err != nil {
		return store.RunsCreateParams{}, err
	}
	if !o.Deadline.IsZero() {
		d := o.Deadline
		p.DeadlineAt = &d
	}
	if !o.StartAt.IsZero() {
		s := o.StartAt
		p.AvailableAt = &s
	}
	return p, nil
}

// encodeInput encodes an input or payload as JSON; a json.RawMessage is
// taken as it is. JSON text is UTF-8: raw JSON (or a RawMessage inside a
// value) that is not is refused, where a decoder would silently read each
// bad byte as U+FFFD.
func encodeInput(input any) ([]byte, error) {
	raw, ok := input.(json.RawMessage)
	switch {
	case input == nil:
		return []byte("null"), nil
	case ok:
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%w: input is not valid JSON", store.ErrInvalidArgument)
		}
	default:
		var err error
		if raw, err = json.Marshal(input); err != nil {
			return nil, fmt.Errorf("%w: input does not encode as JSON: %v", store.ErrInvalidArgument, err)
		}
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: input is not UTF-8 (JSON text must be; byte %d is not)", store.ErrInvalidArgument, badUTF8(raw))
	}
	return raw, nil
}

// badUTF8 is the offset of the first byte of b that is not UTF-8.
func badUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// Start starts a run of workflow type typ with input (encoded as JSON; a
// json.RawMessage is taken as it is, and must be valid JSON and UTF-8, or
// the start is ErrInvalidArgument).
func (c *Client) Start(ctx context.Context, typ string, input any, opts StartOptions) (*Handle, error) {
	return c.start(ctx, c.st, typ, input, opts)
}

// StartTx starts a run inside the caller's transaction: the run exists
// (and is delivered) only if the caller commits.
func (c *Client) StartTx(ctx context.Context, tx pgx.Tx, typ string, input any, opts StartOptions) (*Handle, error) {
	return c.start(ctx, c.st.WithTx(tx), typ, input, opts)
}

func (c *Client) start(ctx context.Context, st *store.Store, typ string, input any, opts StartOptions) (*Handle, error) {
	if opts.Batch != nil {
		return c.startBatched(ctx, st, typ, input, opts)
	}
	p, err := c.params(typ, input, opts)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", protocol.Echo(typ), err)
	}
	ctx, span := c.startSpan(ctx, &p)
	defer span.End()
	run, created, err := st.RunsCreate(ctx, p)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("start %s: %w", protocol.Echo(typ), flowError(err))
	}
	span.SetAttributes(attribute.String("kagzi.run_id", run.ID.String()), attribute.Bool("kagzi.created", created))
	if created {
		c.started.Add(ctx, 1, metric.WithAttributes(attribute.String("namespace", c.ns), attribute.String("queue", p.Queue),
			attribute.String("workflow_type", p.Type)))
	} else if p.Debounce != nil {
		c.countDebounced(ctx, 1, p.Queue, p.Type)
	}
	return &Handle{c: c, RunID: run.ID, Created: created, Warnings: c.warnings(ctx, st, p)}, nil
}

// startSpan opens the root span of a run's trace (under the caller's span
// or the given traceparent, if any) and stores its context on the run, so
// dispatch, every attempt and every step join the same trace.
func (c *Client) startSpan(ctx context.Context, p *store.RunsCreateParams) (context.Context, trace.Span) {
	if p.TraceContext != "" {
		ctx = tracectx.WithTraceParent(ctx, p.TraceContext)
	}
	if p.RunID == uuid.Nil {
		if id, err := uuid.NewV7(); err == nil {
			p.RunID = id
		}
	}
	ctx, span := c.tracer.Start(ctx, "kagzi.start "+p.Type, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("kagzi.workflow_type", p.Type), attribute.String("kagzi.queue", p.Queue),
			attribute.String("kagzi.namespace", c.ns), attribute.String("kagzi.run_id", p.RunID.String())))
	// Stored is what the span carries, not the caller's string: a malformed
	// traceparent joins no trace, and kept verbatim it would put unbounded
	// (even unstorable) text on the run.
	p.TraceContext = tracectx.TraceParent(ctx)
	return ctx, span
}

// StartRequest is one run of StartMany.
type StartRequest struct {
	Type    string
	Input   any
	Options StartOptions
}

// StartMany starts many runs in one statement (one transaction, a handful
// of notifications).
func (c *Client) StartMany(ctx context.Context, reqs []StartRequest) ([]*Handle, error) {
	ps := make([]store.RunsCreateParams, len(reqs))
	spans := make([]trace.Span, len(reqs))
	for i, r := range reqs {
		p, err := c.params(r.Type, r.Input, r.Options)
		if err != nil {
			return nil, fmt.Errorf("start many: request %d: %w", i, err)
		}
		// Each run gets a trace of its own.
		_, spans[i] = c.startSpan(ctx, &p)
		ps[i] = p
	}
	res, err := c.st.RunsCreateMany(ctx, ps)
	for _, sp := range spans {
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
	if err != nil {
		return nil, fmt.Errorf("start many: %w", flowError(err))
	}
	out := make([]*Handle, len(res))
	type key struct{ queue, typ string }
	created, debounced := map[key]int64{}, map[key]int64{}
	for i, r := range res {
		out[i] = &Handle{c: c, RunID: r.RunID, Created: r.Created, Warnings: c.warnings(ctx, c.st, ps[i])}
		if r.Created {
			created[key{ps[i].Queue, ps[i].Type}]++
		} else if ps[i].Debounce != nil {
			debounced[key{ps[i].Queue, ps[i].Type}]++
		}
	}
	for k, n := range debounced {
		c.countDebounced(ctx, n, k.queue, k.typ)
	}
	for k, n := range created {
		c.started.Add(ctx, n, metric.WithAttributes(attribute.String("namespace", c.ns), attribute.String("queue", k.queue),
			attribute.String("workflow_type", k.typ)))
	}
	return out, nil
}

// WorkersServing counts the live workers (ONLINE or DRAINING) that serve
// runs of typ at version (empty: any version) on queue (empty: the
// client's default queue). A run nobody serves is accepted and waits
// PENDING until a worker registers its type; 0 says that is what it does.
func (c *Client) WorkersServing(ctx context.Context, queue, typ, version string) (int, error) {
	if queue == "" {
		queue = c.queue
	}
	return c.st.WorkersServing(ctx, c.ns, queue, typ, version)
}

// Handle returns a handle for an existing run id.
func (c *Client) Handle(id uuid.UUID) *Handle { return &Handle{c: c, RunID: id} }

// Get returns a run with its input and output, and its fork links.
func (c *Client) Get(ctx context.Context, id uuid.UUID) (*Run, error) {
	r, err := c.st.RunsGet(ctx, c.ns, id)
	if err != nil {
		return nil, err
	}
	if err := c.forkLinks(ctx, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetByExternalID returns the run holding externalID: the live one, else
// the newest (for a chain of continue-as-new, the run it has reached).
func (c *Client) GetByExternalID(ctx context.Context, externalID string) (*Run, error) {
	r, err := c.st.RunsGetByExternalID(ctx, c.ns, externalID)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, r.ID)
}

// The page size of List.
const (
	// DefaultPageSize is ListOptions.Limit when 0.
	DefaultPageSize = store.DefaultPageSize
	// MaxPageSize is the largest ListOptions.Limit; read more with the
	// cursor.
	MaxPageSize = store.MaxPageSize
)

// ListOptions filter List.
type ListOptions struct {
	Statuses []RunStatus
	Type     string
	Queue    string
	// Query filters runs in Kagzi's query language, ANDed with the fields
	// above, over the built-in fields (type, queue, status, external_id,
	// created_at, started_at, finished_at, ...) and the namespace's search
	// attributes, e.g. `customer = '42' AND status = 'FAILED' AND
	// finished_at > '2025-01-02T15:04:05Z'`. A malformed query, an unknown
	// field or a value of the wrong kind is ErrInvalidArgument naming its
	// position; a query that runs longer than store.QueryTimeout is
	// ErrQueryTimeout.
	Query string
	// Limit is the page size: 0 for DefaultPageSize, at most MaxPageSize;
	// a negative one is ErrInvalidArgument.
	Limit int
	// Cursor continues from a previous page's next cursor.
	Cursor string
}

// List lists runs newest first; next is "" on the last page.
func (c *Client) List(ctx context.Context, o ListOptions) (runs []Run, next string, err error) {
	p := store.RunsListParams{Namespace: c.ns, Statuses: o.Statuses, Type: o.Type, Queue: o.Queue, Query: o.Query, Limit: o.Limit}
	if o.Cursor != "" {
		cur, err := store.ParseCursor(o.Cursor)
		if err != nil {
			return nil, "", err
		}
		p.After = &cur
	}
	rs, nc, err := c.st.RunsList(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if nc != nil {
		next = nc.String()
	}
	return nonNil(rs), next, nil
}

// Cancel asks a live run to cancel, and with it the children it started
// (except those started with workflow.ParentCloseAbandon). A running run's
// worker is told by push and its workflow context is cancelled; a sleeping
// or waiting run is delivered at once with its context cancelled. The
// workflow may clean up (workflow.WithoutCancel) and ends CANCELLED if it
// returns an error, COMPLETED if it returns a result; Wait tells which. A
// run that never started is cancelled at once. Cancelling a finished run
// is ErrConflict.
func (c *Client) Cancel(ctx context.Context, id uuid.UUID) error {
	_, err := c.st.RunsCancel(ctx, c.ns, id)
	return err
}

// Terminate ends a live run at once, CANCELLED with the error "terminated"
// and reason: no workflow code runs after it, and a running run's worker
// abandons it. Its children get their parent-close policies (terminated
// by default). Terminating a finished run is ErrConflict.
func (c *Client) Terminate(ctx context.Context, id uuid.UUID, reason string) error {
	_, err := c.st.RunsTerminate(ctx, c.ns, id, reason)
	return err
}

// afterSubscribe, when set by a test, runs between Wait's subscription and
// its first read of Postgres: the window a lost result would fall into.
var afterSubscribe func(id uuid.UUID)

// Wait blocks until the run is finished and returns it. It subscribes to
// the run's finish event first and then reads Postgres, so a run that
// finishes in between is still seen; it re-reads only when told something
// changed (the event, a NATS reconnect, a relay restart, NATS dropping
// messages it had not read).
func (c *Client) Wait(ctx context.Context, id uuid.UUID) (*Run, error) {
	if c.nc == nil {
		return nil, errors.New("wait: client has no NATS connection")
	}
	f, err := c.follow(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("wait: %w", err)
	}
	defer f.close()
	if afterSubscribe != nil {
		afterSubscribe(id)
	}
	for {
		resync := c.resyncChan()
		r, err := c.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("wait %s: %w", id, err)
		}
		if r.Status.Terminal() {
			return r, nil
		}
		if err := f.wait(ctx, resync); err != nil {
			return nil, err
		}
	}
}

// Result waits for the run to finish and decodes its output into out (a
// pointer, or nil to discard). A run that failed or was cancelled returns
// a *RunError. A run that continued as new (workflow.ContinueAsNew) is
// followed to the run it continued as, and so on: Result is the result of
// the last run of the chain, the one that did not continue.
func (h *Handle) Result(ctx context.Context, out any) error {
	r, err := h.c.Wait(ctx, h.RunID)
	for err == nil && r.Status == StatusCompleted && r.ContinuedAs != nil {
		r, err = h.c.Wait(ctx, *r.ContinuedAs)
	}
	if err != nil {
		return err
	}
	if r.Status != StatusCompleted {
		return &RunError{RunID: r.ID, Status: r.Status, Message: r.Error}
	}
	if out == nil || len(r.Output) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Output, out); err != nil {
		return fmt.Errorf("result of %s: decode output: %w", h.RunID, err)
	}
	return nil
}

// SendEvent sends an event named name with payload (encoded as JSON; nil
// is null) to the run id. The run receives it in WaitForEvent: at once if
// it waits for that name now (it is woken), else when it next waits for
// it — an event sent early is kept. Each event is received once. Sending
// to an unknown run is ErrNotFound; to a finished run (or a schedule
// template), ErrConflict.
func (c *Client) SendEvent(ctx context.Context, runID uuid.UUID, name string, payload any) (*SentEvent, error) {
	if runID == uuid.Nil {
		return nil, fmt.Errorf("send event: %w: run id is required", store.ErrInvalidArgument)
	}
	return c.sendEvent(ctx, store.EventsSendParams{RunID: runID}, name, payload)
}

// SendEventByExternalID is SendEvent to the run holding an external id:
// the live one, else (to report that it finished) the newest.
func (c *Client) SendEventByExternalID(ctx context.Context, externalID, name string, payload any) (*SentEvent, error) {
	if externalID == "" {
		return nil, fmt.Errorf("send event: %w: external id is required", store.ErrInvalidArgument)
	}
	return c.sendEvent(ctx, store.EventsSendParams{ExternalID: externalID}, name, payload)
}

func (c *Client) sendEvent(ctx context.Context, p store.EventsSendParams, name string, payload any) (*SentEvent, error) {
	if err := protocol.ValidEventName(name); err != nil {
		return nil, fmt.Errorf("send event: %w: %v", store.ErrInvalidArgument, err)
	}
	raw, err := encodeInput(payload)
	if err != nil {
		return nil, fmt.Errorf("send event %q: %w", protocol.Echo(name), err)
	}
	p.Namespace, p.Name, p.Payload = c.ns, name, raw
	ev, err := c.st.EventsSend(ctx, p)
	if err != nil {
		return nil, err
	}
	sent := sentEvent(ev)
	return &sent, nil
}

// Retry gives a failed run a fresh start (a dead letter back into the
// queue): it resumes from its last completed step with a full attempt
// budget, for the run and for its failed steps . Only
// a FAILED run can be retried (ErrConflict otherwise).
func (c *Client) Retry(ctx context.Context, id uuid.UUID) (*Run, error) {
	start := time.Now()
	r, err := c.st.RunsRetry(ctx, c.ns, id)
	if err != nil {
		return nil, err
	}
	// The retry continues the run's trace: it is a span in it.
	_, span := c.tracer.Start(tracectx.WithTraceParent(ctx, r.TraceContext), "kagzi.retry "+r.Type, trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("kagzi.run_id", r.ID.String()), attribute.String("kagzi.workflow_type", r.Type)))
	span.End()
	return &r, nil
}

// SetConcurrencyLimit allows at most max runs of workflow type typ to run
// at once in queue (empty: the client's default queue), across every
// worker; the dispatchers' claims enforce it. 0 pauses the type. Raising
// a limit wakes the queue: runs waiting for a slot are claimed at once.
func (c *Client) SetConcurrencyLimit(ctx context.Context, queue, typ string, max int) (*ConcurrencyLimit, error) {
	if queue == "" {
		queue = c.queue
	}
	l, err := c.st.LimitsSet(ctx, c.ns, queue, typ, max)
	if err != nil {
		return nil, err
	}
	out := limitFrom(l)
	return &out, nil
}

// RemoveConcurrencyLimit lifts the limit of typ in queue (empty: the
// client's default queue), waking the runs that waited for a slot; an
// absent limit is ErrNotFound.
func (c *Client) RemoveConcurrencyLimit(ctx context.Context, queue, typ string) error {
	if queue == "" {
		queue = c.queue
	}
	return c.st.LimitsDelete(ctx, c.ns, queue, typ)
}

// ConcurrencyLimits lists the namespace's limits.
func (c *Client) ConcurrencyLimits(ctx context.Context) ([]ConcurrencyLimit, error) {
	ls, err := c.st.LimitsList(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	out := make([]ConcurrencyLimit, len(ls))
	for i, l := range ls {
		out[i] = limitFrom(l)
	}
	return out, nil
}
