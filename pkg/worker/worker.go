package worker

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/metricattr"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Errors of the Worker's lifecycle.
var (
	// ErrStarted: Start was called before, or Register after Start. It
	// wraps lifecycle.ErrStarted, as every component's second Start does.
	ErrStarted = fmt.Errorf("worker: %w", lifecycle.ErrStarted)
	// ErrStopped: the worker was stopped (or its Start failed).
	ErrStopped = errors.New("worker: stopped")
	// ErrNoTypes: Start without any registered workflow type.
	ErrNoTypes = errors.New("worker: no workflow types registered")
)

// phase is where a Worker is between New and its stop.
type phase int

const (
	stateNew phase = iota
	stateRunning
	stateStopped
)

// Worker executes the workflow runs of one namespace and queue. Make one
// with New, register workflow types with Register, then Start (or Run) it.
// Its methods are safe for concurrent use.
type Worker struct {
	cfg   Config
	nc    *nats.Conn
	log   *slog.Logger
	inbox string // long-lived delivery inbox
	// margin is added to the wait of a work request before it is renewed.
	margin time.Duration

	mu       sync.Mutex
	state    phase
	types    map[string]*registration
	typeList []protocol.TypeVersion
	base     context.Context // Start's ctx without its cancellation: parent of runs
	draining bool
	active   int // run goroutines alive: occupied slots
	runs     map[uuid.UUID]*runState
	seq      uint64        // last work request's Seq
	out      *outstanding  // the outstanding work request, if any
	regs     regState      // the fate of its registration (registration.go)
	idle     chan struct{} // closed when draining and no run is held (idleCheck)
	// ending counts end reports pending (sendEnd); ends holds a token for
	// each, bounding them to MaxConcurrency.
	ending int
	ends   chan struct{}

	kick chan struct{} // wakes the request loop
	// life owns the worker's loops; a run's goroutine is the run's own
	// (see startRuns).
	life lifecycle.Base
	// ready is closed once Start is over (it set the worker up, or
	// failed) or can no longer run (Stop came first): Stop waits for it,
	// so a drain never meets a worker half started.
	ready chan struct{}
	sess  *session      // what Start set up for Stop; guarded by mu
	done  chan struct{} // closed when stopped

	stats    counters
	combiner combiner
	live     liveness
	drops    *natsutil.Drops

	// pulse tells whether the worker froze (SIGSTOP, a paused VM): see
	// stallLimit. stalled is its StalledSince, which tests replace to
	// simulate a freeze.
	pulse   *lifecycle.Pulse
	stalled func(since time.Time, max time.Duration) bool

	tracer trace.Tracer
	stepMS metric.Float64Histogram
	// executions counts the executions that ended here, per type and
	// outcome.
	executions metric.Int64Counter
	execAttrs  metricattr.Cache[execKey]
}

// session is what a Start set up that its Stop takes down.
type session struct {
	// stopRequests ends the request loop: a draining worker asks for no
	// more work while its other loops go on.
	stopRequests context.CancelFunc
	// unwatch and forget end the drain triggers (Start's ctx, a drain the
	// engine asked for) once a Stop is under way.
	unwatch     func() bool
	forget      context.CancelFunc
	unsubscribe func()
	status      chan nats.Status
}

// outstanding is the work request the worker waits an answer for.
type outstanding struct {
	seq      uint64
	credits  int
	sent     time.Time
	deadline time.Time
	// blind: sent after a probe reached no dispatcher, or after a
	// reconnect, and before one was heard, so it may have reached none
	// (see liveness.go).
	blind bool
	// target is the dispatcher it was addressed to, uuid.Nil if it went
	// to the queue group (route.go).
	target uuid.UUID
}

// New makes a Worker that talks over nc with the given configuration
// (see Config for defaults). It reports every invalid field at once.
func New(cfg Config, nc *nats.Conn) (*Worker, error) {
	if nc == nil {
		return nil, errors.New("worker: nil NATS connection")
	}
	if err := natsutil.CheckServer(nc); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	margin := min(max(cfg.WaitTimeout/10, 100*time.Millisecond), 2*time.Second)
	tp, mp := cfg.TracerProvider, cfg.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	// Instrument creation fails only on invalid names; ours are constant.
	stepMS, _ := mp.Meter("github.com/kagzi/kagzi/worker").Float64Histogram("kagzi.step.duration", metric.WithUnit("ms"),
		metric.WithDescription("Duration of step attempts."),
		metric.WithExplicitBucketBoundaries(1, 5, 10, 25, 50, 100, 250, 1000, 5000, 30000))
	executions, _ := mp.Meter("github.com/kagzi/kagzi/worker").Int64Counter("kagzi.executions",
		metric.WithDescription("Executions of runs that ended on this worker, by workflow type and outcome (completed, failed, suspended, abandoned, rerun)."))
	pulse := lifecycle.NewPulse(0)
	w := &Worker{
		pulse:      pulse,
		stalled:    pulse.StalledSince,
		tracer:     tp.Tracer("github.com/kagzi/kagzi/worker"),
		stepMS:     stepMS,
		executions: executions,
		cfg:        cfg,
		nc:         nc,
		log: cfg.Logger.With("worker_id", cfg.WorkerID.String(),
			"namespace", cfg.Namespace, "queue", cfg.Queue),
		inbox:  nc.NewInbox(),
		margin: margin,
		drops:  natsutil.WatchDrops(nc),
		types:  make(map[string]*registration),
		runs:   make(map[uuid.UUID]*runState),
		kick:   make(chan struct{}, 1),
		ends:   make(chan struct{}, cfg.MaxConcurrency),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	if nc.AuthRequired() && !strings.HasPrefix(nc.Opts.InboxPrefix, protocol.WorkerInbox(cfg.Namespace, "")) {
		// Without it the worker receives nothing where NATS enforces
		// permissions (see Inbox); where the server asks for no
		// credentials, nothing is enforced and nothing needs saying.
		w.log.Warn("the NATS connection has no worker inbox prefix (worker.Inbox): with NATS authorization no delivery reaches this worker",
			"inbox_prefix", nc.Opts.InboxPrefix)
	}
	return w, nil
}

// ID is the worker's id.
func (w *Worker) ID() uuid.UUID { return w.cfg.WorkerID }

// Config is the worker's configuration with defaults applied.
func (w *Worker) Config() Config { return w.cfg }

// Start subscribes to the worker's delivery inbox and cancel subject,
// registers the worker and starts asking for work; it returns once the
// worker is running. Cancelling ctx later drains the worker as Stop does;
// runs and the drain keep ctx's values but not its cancellation.
//
// A Worker starts at most once; after a failed Start it is stopped.
func (w *Worker) Start(ctx context.Context) error {
	if ctx == nil {
		return errors.New("worker: Start with a nil context")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	w.mu.Lock()
	switch {
	case w.state == stateStopped:
		w.mu.Unlock()
		return ErrStopped
	case len(w.types) == 0:
		w.mu.Unlock()
		return ErrNoTypes
	}
	// Runs outlive Start's ctx by up to the drain timeout: they need its
	// values (trace, logging) but their cancellation is the Worker's. The
	// loops too: a cancelled ctx drains with them still going, and only
	// the hard stop ends them.
	base := context.WithoutCancel(ctx)
	loopCtx, err := w.life.Begin(base)
	if err != nil {
		w.mu.Unlock()
		return ErrStarted
	}
	defer close(w.ready)
	w.state = stateRunning
	w.typeList = make([]protocol.TypeVersion, 0, len(w.types))
	for _, r := range w.types {
		w.typeList = append(w.typeList, protocol.TypeVersion{Type: r.name, Version: r.version})
	}
	// By type, each type's versions in registration order: the first is
	// the one a run without a version is pinned to.
	sort.Slice(w.typeList, func(i, j int) bool {
		a, b := w.typeList[i], w.typeList[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return w.types[typeKey(a.Type, a.Version)].seq < w.types[typeKey(b.Type, b.Version)].seq
	})
	w.base = base
	w.mu.Unlock()

	fail := func(err error) error {
		w.life.Stop(nil)
		w.mu.Lock()
		w.state = stateStopped
		w.mu.Unlock()
		close(w.done)
		return fmt.Errorf("worker: start: %w", err)
	}
	deliveries, err := w.nc.SubscribeSync(w.inbox)
	if err != nil {
		return fail(err)
	}
	cancels, err := w.nc.SubscribeSync(protocol.SubjectCancel(w.cfg.Namespace, w.cfg.WorkerID))
	if err != nil {
		_ = deliveries.Unsubscribe()
		return fail(err)
	}
	liveCh, liveSubs, err := w.subscribeLiveness()
	if err != nil {
		_ = deliveries.Unsubscribe()
		_ = cancels.Unsubscribe()
		return fail(err)
	}
	regCh, regSubs, err := w.subscribeRegistration()
	if err != nil {
		_ = deliveries.Unsubscribe()
		_ = cancels.Unsubscribe()
		for _, s := range liveSubs {
			_ = s.Unsubscribe()
		}
		return fail(err)
	}
	w.watchDrops(deliveries, cancels, liveSubs, liveCh, regSubs, regCh)
	unsubscribe := func() {
		_ = deliveries.Unsubscribe()
		_ = cancels.Unsubscribe()
		for _, s := range append(liveSubs, regSubs...) {
			_ = s.Unsubscribe()
		}
	}
	// Subscriptions precede the registration and the first work request
	// on this connection, so the server has them before any dispatcher
	// can answer, or any reaper acknowledge.
	if err := w.sendRegistration(true); err != nil {
		unsubscribe()
		return fail(err)
	}
	// Before the first work request: a pulse not started never stalls. It
	// ticks until the hard stop; leave waits for it.
	if err := w.pulse.Start(loopCtx); err != nil {
		unsubscribe()
		return fail(err)
	}
	status := w.nc.StatusChanged(nats.CONNECTED)

	reqCtx, stopRequests := context.WithCancel(loopCtx)
	// The cancellation of ctx and a drain the engine asks for (cancelLoop
	// calls requestDrain) both stop the worker as Stop does. Stop runs in
	// the goroutine AfterFunc starts, none of the loops': it waits for
	// them.
	trigger, requestDrain := context.WithCancel(ctx)
	unwatch := context.AfterFunc(trigger, w.Stop)
	w.mu.Lock()
	w.sess = &session{stopRequests: stopRequests, unwatch: unwatch, forget: requestDrain,
		unsubscribe: unsubscribe, status: status}
	w.mu.Unlock()
	// Go cannot refuse here: only Stop ends the Base, after ready. Were it
	// to refuse, leave would still unsubscribe what the loop was to read.
	w.life.Go(func() { w.deliveryLoop(loopCtx, deliveries) })
	w.life.Go(func() { w.cancelLoop(loopCtx, cancels, requestDrain) })
	w.life.Go(func() { w.statusLoop(loopCtx, status) })
	w.life.Go(func() { w.heartbeatLoop(loopCtx) })
	w.life.Go(func() { w.livenessLoop(loopCtx, liveCh) })
	w.life.Go(func() { w.registrationLoop(loopCtx, regCh) })
	w.life.Go(func() { w.requestLoop(reqCtx) })
	w.log.Info("worker started", "types", len(w.typeList), "max_concurrency", w.cfg.MaxConcurrency)
	return nil
}

// Stop drains the worker: it stops asking for work, lets in-flight runs
// finish for up to Config.DrainTimeout, then cancels the rest and releases
// them to the engine, and deregisters. It returns when the drain is over.
// Stop is safe to call more than once and concurrently; cancelling the
// ctx given to Start drains the same way. Stop before Start just marks
// the worker stopped.
func (w *Worker) Stop() {
	w.mu.Lock()
	if w.state == stateNew {
		w.state = stateStopped
		close(w.ready)
		close(w.done)
	}
	w.mu.Unlock()
	<-w.ready
	// Base.Stop runs the drain in the first call only: that call leaves,
	// once the loops are over; the others wait for it on done.
	first := false
	w.life.Stop(func() {
		first = true
		w.drain()
	})
	if first {
		w.leave()
	}
	<-w.done
}

// Done is closed when the worker has stopped (drain complete).
func (w *Worker) Done() <-chan struct{} { return w.done }

// Run starts the worker and blocks until ctx is cancelled or Stop is
// called, then until the drain is over. It returns Start's error, if any.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-w.done
	return nil
}

// Stats are counters of a worker since New.
type Stats struct {
	// Running is the number of runs executing (occupied slots).
	Running int
	// Ending is the number of runs whose end report is sent and not yet
	// acknowledged (they hold no slot); their outcome is counted then.
	Ending int
	// Requests counts work requests sent.
	Requests uint64
	// Accepted and Refused count deliveries.
	Accepted, Refused uint64
	// RefusedStalled counts the deliveries of Refused that were refused
	// only because the worker had stalled (frozen, paused) since it asked
	// for them: their dispatcher may have released them meanwhile.
	RefusedStalled uint64
	// RunsStarted counts runs accepted for execution; the others count how
	// executions ended.
	RunsStarted, RunsCompleted, RunsFailed, RunsSuspended, RunsAbandoned uint64
	// RunsReleased counts runs given back by a drain.
	RunsReleased uint64
	// ReportRetries counts report attempts that had to be repeated.
	ReportRetries uint64
	// Renewals counts work requests renewed before their time because the
	// dispatcher holding them may have gone away (it fell silent, left or
	// lost requests, or the relay moved), a delivery was dropped, or the
	// worker stalled (see RefusedStalled).
	Renewals uint64
	// Drops counts the times NATS dropped messages of the worker's
	// subscriptions before it read them (see drops.go).
	Drops int64
	// Malformed counts messages dropped because they did not decode.
	Malformed uint64
	// ServerSilent counts the times the worker left a NATS server that
	// did not answer once every dispatcher it heard had fallen silent.
	ServerSilent uint64
	// Registrations counts the registrations sent: on start, after a
	// reconnect, and again until the acting reaper acknowledges one.
	Registrations uint64
	// Registered: the acting reaper acknowledged the registration (see
	// protocol.RegistrationNotice).
	Registered bool
	// LeaseChecks counts the round trips made before a step function ran
	// because the worker had stalled since it last heard that the run's
	// lease held (see wfexec.LeaseConfirmer).
	LeaseChecks uint64
}

type counters struct {
	requests, accepted, refused                                         atomic.Uint64
	started, completed, failed, suspended, abandoned, released, retries atomic.Uint64
	malformed, renewals, refusedStalled                                 atomic.Uint64
	serverSilent                                                        atomic.Uint64
	registrations, leaseChecks                                          atomic.Uint64
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	running, ending, registered := w.active, w.ending, w.regs.acked
	w.mu.Unlock()
	s := &w.stats
	return Stats{
		Running:        running,
		Ending:         ending,
		Requests:       s.requests.Load(),
		Accepted:       s.accepted.Load(),
		Refused:        s.refused.Load(),
		RefusedStalled: s.refusedStalled.Load(),
		RunsStarted:    s.started.Load(),
		RunsCompleted:  s.completed.Load(),
		RunsFailed:     s.failed.Load(),
		RunsSuspended:  s.suspended.Load(),
		RunsAbandoned:  s.abandoned.Load(),
		RunsReleased:   s.released.Load(),
		ReportRetries:  s.retries.Load(),
		Renewals:       s.renewals.Load(),
		Drops:          w.drops.Count(),
		Malformed:      s.malformed.Load(),
		ServerSilent:   s.serverSilent.Load(),
		Registrations:  s.registrations.Load(),
		Registered:     registered,
		LeaseChecks:    s.leaseChecks.Load(),
	}
}

// malformed counts, logs and drops a message that did not decode.
func (w *Worker) malformed(what, subject string, err error) {
	w.stats.malformed.Add(1)
	w.log.Warn("dropped malformed message", "message", what, "subject", subject, "err", err)
}

// poke wakes the request loop.
func (w *Worker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Worker) publish(subject string, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	return w.nc.Publish(subject, data)
}

func (w *Worker) publishRegister() error {
	w.mu.Lock()
	types := w.typeList
	w.mu.Unlock()
	return w.publish(protocol.SubjectWorkerRegister(w.cfg.Namespace), &protocol.WorkerRegister{
		WorkerID:       w.cfg.WorkerID,
		Namespace:      w.cfg.Namespace,
		Queue:          w.cfg.Queue,
		Hostname:       w.cfg.Hostname,
		PID:            os.Getpid(),
		Version:        w.cfg.Version,
		Types:          types,
		MaxConcurrency: w.cfg.MaxConcurrency,
		Labels:         w.cfg.Labels,
	})
}
