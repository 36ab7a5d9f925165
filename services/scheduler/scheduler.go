// Package scheduler owns cron firing: it turns due schedule templates into
// runs, exactly once per fire time across any number of replicas, with
// catch-up after downtime bounded by each schedule's max_catchup.
//
// It is woken, never polls. Start subscribes first, to schedule changes
// (protocol.SubjectScheduleAll) and relay announcements
// (protocol.SubjectRelayUp), and reads its backlog second: it fires every
// due template, a batch read by store.SchedulesDue at a time, each batch
// in one statement (store.SchedulesFireDueMany), and arms one in-process
// timer at the earliest next fire time (store.SchedulesNextDue, one
// indexed min() query), or earlier when a ScheduleChanged message carries
// an earlier time. When the timer fires it fires what is due and
// re-arms. It reads the backlog again after a NATS reconnect and on every
// relay.up, since changes may have been lost in between. An idle scheduler
// issues no statements.
//
// Every replica may try the same fire time: the store's conditional
// advance and the unique (schedule_id, schedule_fire_at) index let exactly
// one succeed. The others change nothing; they are counted as lost, not as
// errors.
//
// A schedule with an overlap policy other than allow-all fires in a
// transaction of its own that reads its live instances first
// (store.SchedulesFireDueMany); a BufferOne schedule whose live instance
// ends is made due at once by the run-end trigger of migration 015, and the
// template change reaches this scheduler as any other does.
//
// Which due times fire after downtime is store.CatchUp's decision: the due
// times at most KAGZI_SCHEDULER_CATCHUP_WINDOW old fire (at most
// store.MaxWindowFires per schedule, the most recent), so an outage shorter
// than the window loses nothing; older ones were missed and only the most
// recent max_catchup of them fire. A failed statement is retried after a
// short backoff (at most maxRetryInterval, 5 s), well within the window.
//
// The service is this package whole: Config is its configuration from the
// environment, which New takes whole (defaulted by its env tags and
// validated by config.Load or config.Defaults; Deps are its clock and
// telemetry), Assemble builds the Scheduler over a store and a NATS
// connection, and Run runs it as a process (cmd/scheduler calls it).
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Deps are what a Scheduler is given besides its Config. Zero fields
// mean none: the wall clock, the otel globals.
type Deps struct {
	// Clock is the source of time (tests).
	Clock Clock
	// PendingLimit, if positive, replaces pendingLimit (tests of NATS
	// dropping messages).
	PendingLimit int
	// TracerProvider and MeterProvider default to the otel globals.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// The wait before retrying after a failed statement starts at
// retryInterval and doubles up to maxRetryInterval, kept far below the
// catch-up window: once the database is back, the fires an outage delayed
// go out within it, not after a long backoff. A retry during an outage
// costs one failed statement (or connection attempt).
const (
	retryInterval    = 500 * time.Millisecond
	maxRetryInterval = 5 * time.Second
)

// pendingLimit is how many messages a subscription may hold unread
// before NATS drops the next ones; a drop is answered with a backlog
// read.
const pendingLimit = 1 << 20

// Stats are the scheduler's counters.
type Stats struct {
	Passes    int64 // backlog reads: fire what is due, then re-arm
	Rearms    int64 // re-arm reads alone (the armed schedule was paused, deleted or moved)
	Resyncs   int64 // backlog reads asked for by start, a NATS reconnect or relay.up
	Fired     int64 // runs created
	Advanced  int64 // due schedules this replica advanced (fired, or skipped missed times)
	Lost      int64 // due schedules another replica (or a pause or delete) changed first
	Changes   int64 // ScheduleChanged messages received
	Malformed int64 // messages dropped as malformed
	Errors    int64 // failed statements (retried)
	// Dropped counts the due times an overlap policy started nothing for
	// (skipped while an instance was live, or superseded); a held
	// (buffered) fire is not dropped.
	Dropped int64
	// Drops counts the times NATS dropped messages before they were read;
	// each one is answered with a backlog read, as a reconnect is.
	Drops int64
	// ArmedAt is when the timer fires next; nil when no schedule runs.
	ArmedAt *time.Time
}

// Scheduler is the cron firing service.
type Scheduler struct {
	cfg   Config
	deps  Deps
	st    *store.Store
	nc    *nats.Conn
	log   *slog.Logger
	clock Clock
	in    *instruments

	// kick wakes the loop; what to do is in needFire and needRearm.
	kick chan struct{}

	mu sync.Mutex
	// The one timer, armed at armedAt (zero: disarmed) for armedFor, a
	// schedule known to be due then (uuid.Nil: unknown).
	timer    Timer
	timerGen uint64
	armedAt  time.Time
	armedFor uuid.UUID
	// hint is the earliest next fire time ScheduleChanged messages carried
	// since the loop's current read began: a change that lands after the
	// read's snapshot must not be lost when the read's result re-arms.
	hint      time.Time
	hintFor   uuid.UUID
	needFire  bool
	needRearm bool
	backoff   time.Duration
	// ctx is the running scheduler's (life.Begin), set under mu.
	ctx   context.Context
	subs  []*nats.Subscription
	drops *natsutil.Drops
	// stopReconnect ends the reconnect listener Start added.
	stopReconnect func()

	life lifecycle.Base

	passes, rearms, resyncs, fired, advanced, lost atomic.Int64
	changes, errs, dropped                         atomic.Int64
	malformed                                      *natsutil.Malformed
}

// New returns a scheduler over st and nc, configured by cfg (as
// config.Load or config.Defaults return it: New does not check it again);
// Start runs it.
func New(cfg Config, deps Deps, st *store.Store, nc *nats.Conn, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = RealClock{}
	}
	if deps.PendingLimit <= 0 {
		deps.PendingLimit = pendingLimit
	}
	return &Scheduler{
		cfg: cfg, deps: deps, st: st, nc: nc, clock: deps.Clock, in: newInstruments(deps.TracerProvider, deps.MeterProvider),
		log:       log.With("component", "scheduler"),
		kick:      make(chan struct{}, 1),
		drops:     natsutil.WatchDrops(nc),
		malformed: natsutil.NewMalformed("scheduler", log, slog.LevelError, deps.MeterProvider),
	}
}

// Stats returns the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	st := Stats{
		Passes: s.passes.Load(), Rearms: s.rearms.Load(), Resyncs: s.resyncs.Load(), Fired: s.fired.Load(),
		Advanced: s.advanced.Load(), Lost: s.lost.Load(), Changes: s.changes.Load(),
		Malformed: s.malformed.Count(), Errors: s.errs.Load(), Dropped: s.dropped.Load(),
	}
	st.Drops = s.drops.Count()
	s.mu.Lock()
	if !s.armedAt.IsZero() {
		at := s.armedAt
		st.ArmedAt = &at
	}
	s.mu.Unlock()
	return st
}

// Start subscribes (first) and then reads the backlog (second, in the
// background), so no change falls between the two.
func (s *Scheduler) Start(ctx context.Context) error {
	ctx, err := s.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	for _, sub := range []struct {
		subject string
		h       nats.MsgHandler
	}{
		{protocol.SubjectScheduleAll, s.onChange},
		{protocol.SubjectRelayUp, s.onRelayUp},
	} {
		ns, err := s.nc.Subscribe(sub.subject, sub.h)
		if err != nil {
			s.abort()
			return fmt.Errorf("scheduler: subscribe %s: %w", sub.subject, err)
		}
		_ = ns.SetPendingLimits(s.deps.PendingLimit, 1<<30)
		// A dropped change or relay announcement is a lost wakeup.
		s.drops.Add(ns, func() {
			s.log.Warn("NATS dropped messages: reading the backlog", "subject", sub.subject)
			s.Resync()
		})
		s.mu.Lock()
		s.subs = append(s.subs, ns)
		s.mu.Unlock()
	}
	// The subscriptions must be live at the server before Postgres is read.
	fctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	err = s.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		s.abort()
		return fmt.Errorf("scheduler: flush subscriptions: %w", err)
	}
	stop := natsutil.OnReconnect(s.nc, s.Resync)
	s.mu.Lock()
	s.stopReconnect = stop
	s.mu.Unlock()
	s.life.Go(s.loop)
	s.Resync()
	return nil
}

func (s *Scheduler) abort() {
	s.life.Stop(s.unsubscribe)
}

func (s *Scheduler) unsubscribe() {
	s.mu.Lock()
	subs, stop := s.subs, s.stopReconnect
	s.subs, s.stopReconnect = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
}

// Stop unsubscribes, waits for a firing in progress to finish and disarms
// the timer; safe to call twice.
func (s *Scheduler) Stop() {
	s.life.Stop(s.unsubscribe)
	s.mu.Lock()
	s.disarmLocked()
	s.mu.Unlock()
}

// Resync reads the backlog again: it fires every due schedule and re-arms
// the timer from Postgres. Start, a NATS reconnect and relay.up call it.
func (s *Scheduler) Resync() {
	s.mu.Lock()
	if s.ctx == nil || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.needFire = true
	s.mu.Unlock()
	s.resyncs.Add(1)
	s.signal()
}

func (s *Scheduler) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		s.mu.Lock()
		fire, rearm := s.needFire, s.needRearm
		s.needFire, s.needRearm = false, false
		s.hint, s.hintFor = time.Time{}, uuid.Nil
		s.mu.Unlock()
		switch {
		case fire:
			s.pass()
		case rearm:
			s.rearms.Add(1)
			s.rearm(false)
		}
	}
}

// pass fires every schedule due now, then re-arms.
func (s *Scheduler) pass() {
	defer s.passes.Add(1)
	now := s.clock.Now()
	failed := false
	for s.ctx.Err() == nil && !failed {
		due, err := s.st.SchedulesDue(s.ctx, now, s.cfg.SchedulerBatch)
		if err != nil {
			s.failed("read due schedules", err)
			failed = true
			break
		}
		// One statement fires the whole batch: one commit, so the last
		// schedule of a busy second is not late by the others' commits.
		started := time.Now()
		res, err := s.st.SchedulesFireDueMany(s.ctx, due, now, s.cfg.SchedulerCatchUpWindow, "")
		if err != nil {
			s.failed("fire schedules", err, "schedules", len(due))
			failed = true
			break
		}
		for i, r := range res {
			sc := due[i]
			if r.Err != nil {
				s.failed("fire schedule", r.Err, "schedule_id", sc.ID, "ns", sc.Namespace)
				failed = true
				continue
			}
			if !r.Advanced {
				// Another replica fired it, or it was paused or deleted
				// since the read: nothing to do.
				s.lost.Add(1)
				s.log.Debug("schedule already handled", "schedule_id", sc.ID, "ns", sc.Namespace)
				continue
			}
			s.advanced.Add(1)
			s.fired.Add(int64(len(r.Runs)))
			s.logOverlap(sc, r)
			if overlapOnly(r) {
				continue
			}
			s.logFired(sc, r.Runs, now)
			s.in.fired(s.ctx, sc, r.Runs, started, s.clock.Now())
		}
		if len(due) < s.cfg.SchedulerBatch {
			break
		}
	}
	if s.ctx.Err() != nil {
		return
	}
	if failed {
		s.mu.Lock()
		s.retryLocked()
		s.mu.Unlock()
		return
	}
	s.rearm(true)
}

func (s *Scheduler) logFired(sc store.Schedule, runs []store.Run, now time.Time) {
	if len(runs) == 0 {
		s.log.Warn("skipped missed fire times", "schedule_id", sc.ID, "ns", sc.Namespace, "type", sc.Type,
			"due_since", sc.NextFireAt, "now", now, "max_catchup", sc.MaxCatchup)
		return
	}
	for _, r := range runs {
		s.log.Info("fired schedule", "schedule_id", sc.ID, "ns", sc.Namespace, "type", sc.Type,
			"fire_at", r.ScheduleFireAt, "run_id", r.ID)
	}
}

// rearm arms the timer at the earliest next fire time in Postgres, or at
// an earlier one a message carried meanwhile. clean says the pass before
// it had no failure, which ends a retry backoff.
func (s *Scheduler) rearm(clean bool) {
	next, err := s.st.SchedulesNextDue(s.ctx)
	if err != nil {
		if s.ctx.Err() != nil {
			return
		}
		s.failed("read next due schedule", err)
		s.mu.Lock()
		s.retryLocked()
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if clean {
		s.backoff = 0
	}
	at, id := time.Time{}, uuid.Nil
	if next != nil {
		at = *next
	}
	if !s.hint.IsZero() && (at.IsZero() || !s.hint.After(at)) {
		at, id = s.hint, s.hintFor
	}
	s.armLocked(at, id)
}

func (s *Scheduler) failed(what string, err error, args ...any) {
	if s.ctx.Err() != nil {
		return
	}
	s.errs.Add(1)
	s.log.Error(what, append(args, "err", err)...)
}

// retryLocked arms the timer for a retry after a failure, backing off.
func (s *Scheduler) retryLocked() {
	if s.backoff == 0 {
		s.backoff = retryInterval
	} else {
		s.backoff = min(2*s.backoff, maxRetryInterval)
	}
	s.armLocked(s.clock.Now().Add(s.backoff), uuid.Nil)
}

// armLocked replaces the timer with one at at (zero disarms).
func (s *Scheduler) armLocked(at time.Time, id uuid.UUID) {
	s.disarmLocked()
	if at.IsZero() || s.ctx == nil || s.ctx.Err() != nil {
		return
	}
	s.armedAt, s.armedFor = at, id
	gen := s.timerGen
	s.timer = s.clock.AfterFunc(at.Sub(s.clock.Now()), func() { s.onTimer(gen) })
}

func (s *Scheduler) disarmLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.timerGen++
	s.armedAt, s.armedFor = time.Time{}, uuid.Nil
}

func (s *Scheduler) onTimer(gen uint64) {
	s.mu.Lock()
	if gen != s.timerGen {
		// Replaced or stopped while it was firing.
		s.mu.Unlock()
		return
	}
	s.timer = nil
	s.armedAt, s.armedFor = time.Time{}, uuid.Nil
	s.needFire = true
	s.mu.Unlock()
	s.signal()
}

func (s *Scheduler) onChange(m *nats.Msg) {
	var c protocol.ScheduleChanged
	if err := protocol.Decode(m.Data, &c); err != nil {
		s.dropMalformed(m, err)
		return
	}
	if want := protocol.SubjectSchedule(c.Namespace); m.Subject != want {
		s.dropMalformed(m, fmt.Errorf("namespace %q does not match the subject (want %s)", c.Namespace, want))
		return
	}
	s.changes.Add(1)
	now := s.clock.Now()
	s.mu.Lock()
	wake := false
	if c.NextAt != nil {
		at := *c.NextAt
		if s.hint.IsZero() || at.Before(s.hint) {
			s.hint, s.hintFor = at, c.ScheduleID
		}
		switch {
		case !at.After(now):
			s.needFire, wake = true, true
		case s.armedAt.IsZero() || at.Before(s.armedAt):
			s.armLocked(at, c.ScheduleID)
		case at.After(s.armedAt) && s.armedFor == c.ScheduleID:
			// The schedule the timer is armed for moved later.
			s.needRearm, wake = true, true
		}
	} else if !s.armedAt.IsZero() && (s.armedFor == c.ScheduleID || s.armedFor == uuid.Nil) {
		// Paused, deleted or exhausted: if the timer may be armed for it,
		// find the next time (a timer that fires for nothing would cost
		// more, and would keep a deleted schedule armed).
		s.needRearm, wake = true, true
	}
	s.mu.Unlock()
	if wake {
		s.signal()
	}
}

func (s *Scheduler) onRelayUp(m *nats.Msg) {
	var r protocol.RelayUp
	if err := protocol.Decode(m.Data, &r); err != nil {
		s.dropMalformed(m, err)
		return
	}
	s.Resync()
}

func (s *Scheduler) dropMalformed(m *nats.Msg, err error) {
	s.malformed.Drop(s.ctx, m.Subject, err)
}
