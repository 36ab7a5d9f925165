package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/internal/leadership"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
)

// LockKey is the advisory lock that elects the acting reaper.
const LockKey int64 = 0x6b61677a6902 // "kagzi" 02

// campaignRetry is the wait before campaigning again after losing the
// leader's connection.
const campaignRetry = 200 * time.Millisecond

// Stats are a reaper's counters since New.
type Stats struct {
	Leader bool  // this replica acts now
	Terms  int64 // times it became leader
	// Workers is the number of workers tracked in memory.
	Workers int
	// NATSUp: the reaper's NATS connection is up. While it is down, no
	// worker is presumed dead (heartbeats are missed, not absent).
	NATSUp bool
	// Received messages, by kind; Malformed ones were dropped.
	Registers, Heartbeats, Deregisters, Wakeups, Malformed int64
	// Registered and Deregistered count workers written as such.
	Registered, Deregistered int64
	// RegistrationAcks counts the registrations the leader acknowledged
	// once written, RegistrationAsks the times it asked a worker it knew
	// only from heartbeats to register, and Announcements its ReaperUp
	// messages (see protocol.RegistrationNotice).
	RegistrationAcks, RegistrationAsks, Announcements int64
	// Flushes count liveness flushes (two statements each); the others
	// count what they did.
	Flushes, BeatsPersisted, LeasesExtended, RunsReleased int64
	// WorkersLost counts workers found silent whose runs were recovered;
	// RunsRetried and RunsFailed count those runs by outcome (a retried
	// run counted an attempt).
	WorkersLost, RunsRetried, RunsFailed int64
	// LeasesExpired counts runs taken back because their lease expired.
	LeasesExpired int64
	// RunsUndelivered counts the runs of both recoveries that their holder
	// never confirmed receiving: claimable again at once, no attempt
	// counted (they are not in RunsRetried).
	RunsUndelivered int64
	// DeadlinesMissed counts runs failed past their deadline.
	DeadlinesMissed int64
	// LeaseQueries and DeadlineQueries count reads of the next lease
	// expiry and next deadline; LeaseChecksPending is the number of lease
	// re-reads scheduled by wakeups (see the package doc).
	LeaseQueries, DeadlineQueries int64
	LeaseChecksPending            int
	// WorkersDeleted counts OFFLINE workers deleted after the retention.
	WorkersDeleted int64
	// RunsDeleted counts finished runs deleted after their retention
	// period, in RetentionBatches transactions; RetentionQueries counts
	// the reads of the next expiry.
	RunsDeleted, RetentionBatches, RetentionQueries int64
	// NextExpiry and OldestFinished are what the leader last read
	// (store.RunsExpiry): when the next finished run expires, and when the
	// oldest one stored finished (nil: none, or not the leader).
	NextExpiry, OldestFinished *time.Time
	// Errors counts failed statements (each is retried).
	Errors int64
	// Drops counts the times NATS dropped messages before they were read
	// (see drops.go).
	Drops int64
	// BatchRunsDone, BatchRunsFailed and BatchRunsSkipped count the
	// outcomes of batch actions this replica recorded as leader;
	// BatchesCompleted the batches it completed; BatchesRunning the
	// batches it works on now.
	BatchRunsDone, BatchRunsFailed, BatchRunsSkipped, BatchesCompleted, BatchesRunning int64
	// AttributeFolds counts the folds of attribute count deltas, and
	// AttributeDeltasFolded the deltas they folded.
	AttributeFolds, AttributeDeltasFolded int64
	// EventsFannedOut counts the published events this replica fanned
	// out as leader, TriggerRunsStarted the runs they started.
	EventsFannedOut, TriggerRunsStarted int64
	// StartBatchRuns counts the start batches this replica closed at
	// their deadline as leader.
	StartBatchRuns int64
	// EventsGivenUp counts the events this replica gave up as leader,
	// their fan-out failed store.MaxFanOutAttempts times (poison events).
	EventsGivenUp int64
	// EventsDeleted and WaitTokensDeleted count the published events and
	// wait tokens retention deleted (KAGZI_EVENT_RETENTION).
	EventsDeleted, WaitTokensDeleted int64
}

// Reaper is the recovery service: the sweeps (liveness, registration,
// leases, deadlines, retention), which every replica starts, and the
// leadership that decides which replica's sweeps act (lead.go).
type Reaper struct {
	cfg Config
	k   knobs
	sh  *shared
	log *slog.Logger

	live      *liveness
	reg       *registration
	leases    *leases
	deadlines *deadlines
	retain    *retention
	batches   *batches
	fanOuts   *fanOuts
	counts    *counts
	starts    *startBatches
	// sweeps are the nine in the order the leader steps them.
	sweeps []sweep

	// mu guards resync, which asks the leader to re-read leases and
	// deadlines (NATS reconnect, a relay's announcement, dropped wakeups).
	mu     sync.Mutex
	resync bool
	kick   chan struct{}

	// watch beacons while this replica leads and ends the session of a
	// leader that fell silent while it does not.
	watch *leadership.Watch
	// failures counts the takeovers that failed.
	failures faults
	terms    atomic.Int64
	wakeups  atomic.Int64
	// onStep, if set (tests), is called by the leader after each step of
	// its loop, with the clock's time before the step.
	onStep func(at time.Time)

	life   lifecycle.Base
	lifeMu sync.Mutex
	// ctx is the running reaper's (life.Begin), set by Start before any
	// subscription.
	ctx  context.Context
	subs []*nats.Subscription
}

// knobs are what tests set besides the configuration; their zero values
// are production's.
type knobs struct {
	// Clock is the source of time (nil: the wall clock): when a worker
	// was last heard, when a lease or a deadline is due. Leases and
	// deadlines are compared with its time in the database too, so a
	// test that moves a fake clock moves the whole reaper.
	Clock clock.Clock
	// LockKey overrides the advisory lock key (0: LockKey).
	LockKey int64
	// PendingLimit is how many liveness messages wait unread before NATS
	// drops the next ones, and as many of each other subject (0: 65536
	// and 1<<20); see drops.go.
	PendingLimit int
	// FanOut, if set, replaces store.PublishedEventsFanOut in the fan-out's
	// fenced transactions (a poison event's refusals).
	FanOut func(ctx context.Context, tx *store.Store, id uuid.UUID) (store.FanOut, error)
}

// New returns a reaper over st and nc configured by cfg (as config.Load or
// config.Defaults returned it); Start runs it. The leader election holds
// its session at cfg.SessionURL(), which must reach Postgres directly.
func New(cfg Config, st *store.Store, nc *nats.Conn, log *slog.Logger) *Reaper {
	return newReaper(cfg, knobs{}, st, nc, log)
}

func newReaper(cfg Config, k knobs, st *store.Store, nc *nats.Conn, log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if k.Clock == nil {
		k.Clock = clock.Real{}
	}
	if k.LockKey == 0 {
		k.LockKey = LockKey
	}
	log = log.With("component", "reaper")
	r := &Reaper{cfg: cfg, k: k, log: log, kick: make(chan struct{}, 1), failures: faults{lg: log}}
	r.sh = &shared{st: st, nc: nc, log: log, clock: k.Clock, wake: r.wakeLeader, drops: natsutil.WatchDrops(nc),
		malformed: natsutil.NewMalformed("reaper", log, slog.LevelWarn, nil)}
	r.live = newLiveness(r.sh, cfg.LivenessConfig, cfg.Lease.Duration, k.PendingLimit, r.resyncLater)
	r.reg = newRegistration(r.live, uuid.New())
	r.leases = newLeases(r.sh, cfg.Lease, r.live.follows, k.PendingLimit, r.wakeupsDropped)
	r.deadlines = newDeadlines(r.sh)
	r.retain = newRetention(r.sh, cfg.RetentionConfig)
	r.batches = newBatches(r.sh)
	r.counts = newCounts(r.sh)
	r.fanOuts = newFanOuts(r.sh)
	r.starts = newStartBatches(r.sh)
	r.fanOuts.fanOut = k.FanOut
	r.retain.onDeleted = r.counts.touch
	r.batches.onActed = r.counts.touch
	r.sweeps = []sweep{r.reg, r.live, r.leases, r.deadlines, r.retain, r.batches, r.fanOuts, r.starts, r.counts}
	r.watch = leadership.New(leadership.Options{Role: protocol.LeaderReaper, LockKey: k.LockKey, Interval: cfg.BeaconInterval},
		st, nc, log)
	return r
}

// IsLeader reports whether this replica acts now.
func (r *Reaper) IsLeader() bool { return r.sh.leader.Load() }

// Stats returns the reaper's counters.
func (r *Reaper) Stats() Stats {
	l, g, ls, d, rt, bc := &r.live.c, &r.reg.c, &r.leases.c, &r.deadlines.c, &r.retain.c, &r.batches.c
	r.live.mu.Lock()
	n, up := len(r.live.workers), r.live.natsUp
	r.live.mu.Unlock()
	var next, oldest *time.Time
	r.retain.mu.Lock()
	if r.retain.expiry != nil {
		next, oldest = r.retain.expiry.Next, r.retain.expiry.OldestFinished
	}
	r.retain.mu.Unlock()
	errs := r.failures.errs()
	for _, s := range r.sweeps {
		errs += s.errs()
	}
	return Stats{
		RunsDeleted: rt.deleted.Load(), RetentionBatches: rt.batches.Load(), RetentionQueries: rt.queries.Load(),
		NextExpiry: next, OldestFinished: oldest,
		Leader: r.sh.leader.Load(), Terms: r.terms.Load(), Workers: n, NATSUp: up,
		Registers: l.registers.Load(), Heartbeats: l.heartbeats.Load(), Deregisters: l.deregisters.Load(),
		Wakeups: r.wakeups.Load(), Malformed: r.sh.malformed.Count(),
		Registered: g.registered.Load(), Deregistered: g.deregistered.Load(),
		RegistrationAcks: g.acks.Load(), RegistrationAsks: g.asks.Load(), Announcements: g.announces.Load(),
		Flushes: l.flushes.Load(), BeatsPersisted: l.beats.Load(), LeasesExtended: l.extended.Load(), RunsReleased: l.released.Load(),
		WorkersLost: l.lost.Load(), RunsRetried: l.retried.Load(), RunsFailed: l.failed.Load(),
		LeasesExpired: ls.expired.Load(), RunsUndelivered: l.undelivered.Load() + ls.undelivered.Load(), DeadlinesMissed: d.missed.Load(),
		LeaseQueries: ls.queries.Load(), DeadlineQueries: d.queries.Load(), LeaseChecksPending: r.leases.pendingChecks(),
		WorkersDeleted: l.deleted.Load(), Errors: errs, Drops: r.sh.drops.Count(),
		BatchRunsDone: bc.done.Load(), BatchRunsFailed: bc.failed.Load(), BatchRunsSkipped: bc.skipped.Load(),
		BatchesCompleted: bc.completed.Load(), BatchesRunning: bc.running.Load(),
		AttributeFolds: r.counts.c.folds.Load(), AttributeDeltasFolded: r.counts.c.deltas.Load(),
		EventsFannedOut: r.fanOuts.c.events.Load(), TriggerRunsStarted: r.fanOuts.c.runs.Load(), StartBatchRuns: r.starts.runs.Load(),
		EventsGivenUp: r.fanOuts.c.givenUp.Load(), EventsDeleted: rt.events.Load(), WaitTokensDeleted: rt.tokens.Load(),
	}
}

// Start starts the sweeps, which subscribe to what they follow, and
// subscribes to wakeups and relay announcements, then campaigns for
// leadership in the background; the leader reads its backlog (leases,
// deadlines, live workers) only after the subscriptions are in place.
func (r *Reaper) Start(ctx context.Context) error {
	if r.cfg.SessionURL() == "" {
		return errors.New("reaper: a database url is required")
	}
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	ctx, err := r.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	r.ctx = ctx
	pending := 1 << 20
	if r.k.PendingLimit > 0 {
		pending = r.k.PendingLimit
	}
	started := 0
	fail := func(err error) error {
		r.unsubscribe()
		for i := started - 1; i >= 0; i-- {
			r.sweeps[i].Stop()
		}
		r.life.Stop(nil)
		return err
	}
	for _, s := range r.sweeps {
		if err := s.Start(ctx); err != nil {
			return fail(fmt.Errorf("reaper: %w", err))
		}
		started++
	}
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{protocol.SubjectReadyAll, r.onWakeup}, {protocol.SubjectRelayUp, r.onRelayUp}} {
		sub, err := r.sh.nc.Subscribe(s.subj, s.h)
		if err != nil {
			return fail(fmt.Errorf("reaper: subscribe %s: %w", s.subj, err))
		}
		_ = sub.SetPendingLimits(pending, 1<<30)
		r.sh.drops.Add(sub, r.wakeupsDropped)
		r.subs = append(r.subs, sub)
	}
	// Dispatchers announce their lease on their beacons; one shorter than
	// this reaper's breaks the rule between them (config.Lease.Check).
	leases, err := natsutil.CheckLeases(r.sh.nc, r.cfg.Lease, func(err error) {
		r.sh.log.Error("KAGZI_LEASE is longer than a dispatcher's", "err", err)
	})
	if err != nil {
		return fail(fmt.Errorf("reaper: subscribe %s: %w", protocol.SubjectDispatcherBeacon, err))
	}
	r.subs = append(r.subs, leases)
	if err := r.sh.nc.Flush(); err != nil {
		return fail(fmt.Errorf("reaper: flush subscriptions: %w", err))
	}
	if err := r.watch.Start(ctx); err != nil {
		return fail(fmt.Errorf("reaper: %w", err))
	}
	l := &pgsession.Leader{
		URL: r.cfg.SessionURL(), LockKey: r.k.LockKey, Role: protocol.LeaderReaper, Retry: campaignRetry,
		Lead:    r.lead,
		OnError: func(err error) { r.log.Warn("leadership", "err", err) },
	}
	r.life.Go(func() { _ = l.Run(ctx) })
	return nil
}

// unsubscribe ends the Reaper's own subscriptions; lifeMu held.
func (r *Reaper) unsubscribe() {
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.subs = nil
}

// Stop unsubscribes, stops the sweeps, steps down and waits; safe to call
// twice.
func (r *Reaper) Stop() {
	r.life.Stop(func() {
		r.lifeMu.Lock()
		r.unsubscribe()
		r.lifeMu.Unlock()
		for i := len(r.sweeps) - 1; i >= 0; i-- {
			r.sweeps[i].Stop()
		}
	})
	r.watch.Stop()
}

// wakeLeader nudges the leader loop (a no-op on a standby).
func (r *Reaper) wakeLeader() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// resyncLater asks the leader to re-read leases, deadlines and the
// running batches.
func (r *Reaper) resyncLater() {
	r.mu.Lock()
	r.resync = true
	r.mu.Unlock()
	r.batches.reread.Store(true)
	r.fanOuts.reread.Store(true)
	r.wakeLeader()
}

// onWakeup hands a wakeup to the lease and deadline sweeps.
func (r *Reaper) onWakeup(m *nats.Msg) {
	var w protocol.Wakeup
	if err := protocol.Decode(m.Data, &w); err != nil {
		r.sh.malformed.Drop(r.ctx, m.Subject, err)
		return
	}
	r.counts.touch() // before the count, so whoever sees the count sees it
	r.wakeups.Add(1)
	now := r.sh.clock.Now()
	news := r.deadlines.onWakeup(now)
	if r.leases.onWakeup(&w, now) {
		news = true
	}
	if news {
		r.wakeLeader()
	}
}

func (r *Reaper) onRelayUp(m *nats.Msg) {
	var up protocol.RelayUp
	if err := protocol.Decode(m.Data, &up); err != nil {
		r.sh.malformed.Drop(r.ctx, m.Subject, err)
		return
	}
	r.resyncLater()
}
