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

// Defaults of Options.
const (
	DefaultWorkerTimeout   = 6 * time.Second
	DefaultFlushInterval   = 2 * time.Second
	DefaultLease           = 30 * time.Second
	DefaultLeaseGrace      = 10 * time.Second
	DefaultWorkerRetention = 24 * time.Hour
)

// Options tunes a Reaper. Zero fields take the defaults.
type Options struct {
	// DatabaseURL is where the leader election holds its dedicated
	// connection (required), a session that holds the leader lock: it
	// must reach Postgres directly, not through a connection pooler (the
	// service gives it KAGZI_DATABASE_SESSION_URL).
	DatabaseURL string
	// WorkerTimeout: a worker not heard for this long is marked OFFLINE and
	// its runs are recovered (default 6 s: three missed heartbeats at the
	// workers' default interval of 2 s, so recovery starts within 6 s of a
	// crash).
	WorkerTimeout time.Duration
	// FlushInterval batches the writes of liveness (default 2 s).
	FlushInterval time.Duration
	// Lease is what a live worker's runs' leases are extended to, from its
	// last heartbeat (default 30 s). It must not exceed the dispatchers'
	// lease (they share KAGZI_LEASE).
	Lease time.Duration
	// LeaseGrace: a run locked to a live worker that its heartbeats do not
	// list is released once its lease was last set this long before
	// (default 10 s; at least twice FlushInterval, so a run whose
	// completion report is in flight is never released).
	LeaseGrace time.Duration
	// WorkerRetention: OFFLINE workers last heard of longer ago are
	// deleted (default 24 h; negative keeps them).
	WorkerRetention time.Duration
	// RetentionBatch is the most finished runs one transaction of the
	// retention cleanup deletes (default DefaultRetentionBatch, at most
	// store.MaxDeleteBatch). How long runs are kept is the database's
	// (store.RetentionSet).
	RetentionBatch int
	// RetentionPause is the least time between two batches of a backlog
	// of expired runs (default DefaultRetentionPause); a batch that took
	// longer is followed by a pause as long as it took.
	RetentionPause time.Duration
	// LockKey overrides the advisory lock key (tests; default LockKey).
	LockKey int64
	// Retry is the wait before campaigning again after losing the
	// leader's connection (default 200 ms).
	Retry time.Duration
	// PendingLimit is how many liveness messages wait unread before NATS
	// drops the next ones (default 65536), and as many of each other
	// subject (default 1<<20); see drops.go.
	PendingLimit int
	// BeaconInterval is the time between the leader's beacons (default
	// protocol.DefaultBeaconInterval): a standby ends the session of a
	// leader silent for three of them, and takes over (see package
	// leadership).
	BeaconInterval time.Duration
	// Clock is the source of time (default the wall clock): when a worker
	// was last heard, when a lease or a deadline is due. Leases and
	// deadlines are compared with its time in the database too, so a test
	// that moves a fake clock moves the whole reaper.
	Clock clock.Clock
}

func (c Options) withDefaults() Options {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.WorkerTimeout <= 0 {
		c.WorkerTimeout = DefaultWorkerTimeout
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.LeaseGrace <= 0 {
		c.LeaseGrace = DefaultLeaseGrace
	}
	if c.WorkerRetention == 0 {
		c.WorkerRetention = DefaultWorkerRetention
	}
	if c.RetentionBatch <= 0 {
		c.RetentionBatch = DefaultRetentionBatch
	}
	c.RetentionBatch = min(c.RetentionBatch, store.MaxDeleteBatch)
	if c.RetentionPause <= 0 {
		c.RetentionPause = DefaultRetentionPause
	}
	if c.LockKey == 0 {
		c.LockKey = LockKey
	}
	if c.Retry <= 0 {
		c.Retry = 200 * time.Millisecond
	}
	return c
}

// refresh is how stale a live worker's persisted heartbeat may grow when
// nothing about it changes.
func (c Options) refresh() time.Duration { return max(c.Lease/3, c.FlushInterval) }

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
}

// dbState is what the leader knows of a worker's row.
type dbState uint8

const (
	dbUnknown dbState = iota // not checked (heard from an unknown worker, or after a failover)
	dbLive                   // registered and not OFFLINE
	dbStale                  // must be registered (again)
)

// dereg is a deregistration heard and not yet written.
type dereg struct {
	ns string
	at time.Time
}

// wstate is the memory of one worker.
type wstate struct {
	id        uuid.UUID
	ns, queue string
	// reg is its last registration (nil: not seen by this replica).
	reg    *store.WorkersRegisterParams
	regGen uint64
	// lastBeat is when it was last heard (zero: never, known from the
	// database only).
	lastBeat time.Time
	runs     []uuid.UUID
	draining bool

	// ackDue: a registration was heard that the leader acknowledges once
	// it is written (kept by every replica: the leader that writes it may
	// be the next one).
	ackDue bool

	// Leader state.
	db       dbState
	rejected bool // the store refused its registration: ignored
	heard    bool // heard since it was last persisted
	// beats counts the heartbeats heard: a flush clears heard only if none
	// came while it wrote, even one with the same time (a coarse or fake
	// clock), whose draining flag or runs would otherwise go unwritten.
	beats uint64
	// persistedAt and persistedDraining are its last flushed heartbeat.
	persistedAt       time.Time
	persistedDraining bool
	// regRetryAt defers the next registration attempt; checkAt defers
	// the death of a worker whose row was written after it was last heard.
	regRetryAt, checkAt time.Time
	// askAt is when the worker may be asked to register next, and
	// askWait the wait after that ask (see ask).
	askAt   time.Time
	askWait time.Duration
}

// Reaper is the recovery service.
type Reaper struct {
	cfg Options
	st  *store.Store
	nc  *nats.Conn
	log *slog.Logger
	// id names this replica in its ReaperUp.
	id uuid.UUID

	mu      sync.Mutex
	workers map[uuid.UUID]*wstate
	// deregs are deregistrations to write.
	deregs map[uuid.UUID]dereg
	natsUp bool
	// amnesty: nobody is presumed dead before amnesty + timeout (taking
	// leadership, NATS reconnect).
	amnesty time.Time
	// deadlineCheck is when the next deadline must be re-read because of
	// wakeups (zero: no need); lastDeadlineQuery rate-limits it.
	deadlineCheck     time.Time
	lastDeadlineQuery time.Time
	// leaseChecks are pending lease re-reads, by bucket (see doc.go).
	leaseChecks map[int64]struct{}
	// resync asks the leader to re-read leases and deadlines.
	resync bool
	// announce asks the leader to publish a ReaperUp (on taking over, on
	// NATS reconnect).
	announce bool
	// flushPlanned: the leader knows a flush is due; heartbeats need not
	// wake it.
	flushPlanned bool
	lastPrune    time.Time
	kick         chan struct{}

	leader atomic.Bool
	// watch beacons while this replica leads and ends the session of a
	// leader that fell silent while it does not.
	watch *leadership.Watch
	// term is the leader's current term (store.LeadersElect), which
	// fences its writes.
	term atomic.Int64
	c    counters
	// onFlush, if set (tests), is called by the leader after each flush.
	onFlush func(workers int)
	// onStep, if set (tests), is called by the leader after each step of
	// its loop, with the clock's time before the step.
	onStep func(at time.Time)
	// onRetention, if set (tests), is called in each retention batch's
	// transaction, after its deletion and before its commit.
	onRetention func(ctx context.Context, tx *store.Store)
	// expiry is what the leader last read of the next expiry (nil on a
	// standby); guarded by mu.
	expiry *store.RunsExpiry

	life   lifecycle.Base
	lifeMu sync.Mutex
	// ctx is the running reaper's (life.Begin), set by Start before any
	// subscription.
	ctx  context.Context
	subs []*nats.Subscription
	// stopStatus ends the status listener Start added.
	stopStatus func()
	drops      *natsutil.Drops
}

type counters struct {
	terms, registers, heartbeats, deregisters, wakeups           atomic.Int64
	malformed                                                    *natsutil.Malformed
	registered, deregistered, flushes, beats, extended, released atomic.Int64
	acks, asks, announces                                        atomic.Int64
	lost, retried, failed, expired, deadlines, leaseQ, deadlineQ atomic.Int64
	undelivered                                                  atomic.Int64
	deleted, errors                                              atomic.Int64
	runsDeleted, retainBatches, retainQ                          atomic.Int64
}

// New returns a reaper over st and nc; Start runs it.
func New(cfg Options, st *store.Store, nc *nats.Conn, log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Reaper{
		cfg:         cfg,
		st:          st,
		nc:          nc,
		log:         log.With("component", "reaper"),
		id:          uuid.New(),
		workers:     map[uuid.UUID]*wstate{},
		deregs:      map[uuid.UUID]dereg{},
		leaseChecks: map[int64]struct{}{},
		kick:        make(chan struct{}, 1),
		drops:       natsutil.WatchDrops(nc),
		c:           counters{malformed: natsutil.NewMalformed("reaper", log, slog.LevelWarn, nil)},
		watch: leadership.New(leadership.Options{Role: protocol.LeaderReaper, LockKey: cfg.LockKey, Interval: cfg.BeaconInterval},
			st, nc, log),
	}
}

// IsLeader reports whether this replica acts now.
func (r *Reaper) IsLeader() bool { return r.leader.Load() }

// Stats returns the reaper's counters.
func (r *Reaper) Stats() Stats {
	r.mu.Lock()
	n, checks, up := len(r.workers), len(r.leaseChecks), r.natsUp
	var next, oldest *time.Time
	if r.expiry != nil {
		next, oldest = r.expiry.Next, r.expiry.OldestFinished
	}
	r.mu.Unlock()
	c := &r.c
	return Stats{
		RunsDeleted: c.runsDeleted.Load(), RetentionBatches: c.retainBatches.Load(), RetentionQueries: c.retainQ.Load(),
		NextExpiry: next, OldestFinished: oldest,
		Leader: r.leader.Load(), Terms: c.terms.Load(), Workers: n, NATSUp: up,
		Registers: c.registers.Load(), Heartbeats: c.heartbeats.Load(), Deregisters: c.deregisters.Load(),
		Wakeups: c.wakeups.Load(), Malformed: c.malformed.Count(),
		Registered: c.registered.Load(), Deregistered: c.deregistered.Load(),
		RegistrationAcks: c.acks.Load(), RegistrationAsks: c.asks.Load(), Announcements: c.announces.Load(),
		Flushes: c.flushes.Load(), BeatsPersisted: c.beats.Load(), LeasesExtended: c.extended.Load(), RunsReleased: c.released.Load(),
		WorkersLost: c.lost.Load(), RunsRetried: c.retried.Load(), RunsFailed: c.failed.Load(),
		LeasesExpired: c.expired.Load(), RunsUndelivered: c.undelivered.Load(), DeadlinesMissed: c.deadlines.Load(),
		LeaseQueries: c.leaseQ.Load(), DeadlineQueries: c.deadlineQ.Load(), LeaseChecksPending: checks,
		WorkersDeleted: c.deleted.Load(), Errors: c.errors.Load(), Drops: r.drops.Count(),
	}
}

// Start subscribes to liveness, wakeups and relay announcements, then
// campaigns for leadership in the background; the leader reads its
// backlog (leases, deadlines, live workers) only after the subscriptions
// are in place.
func (r *Reaper) Start(ctx context.Context) error {
	if r.cfg.DatabaseURL == "" {
		return errors.New("reaper: a database url is required")
	}
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	ctx, err := r.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	r.ctx = ctx
	// One channel for the three liveness subjects keeps their order.
	liveCap, pending := 1<<16, 1<<20
	if r.cfg.PendingLimit > 0 {
		liveCap, pending = r.cfg.PendingLimit, r.cfg.PendingLimit
	}
	live := make(chan *nats.Msg, liveCap)
	fail := func(err error) error {
		for _, s := range r.subs {
			_ = s.Unsubscribe()
		}
		r.subs = nil
		r.life.Stop(nil)
		return err
	}
	for _, subj := range []string{protocol.SubjectWorkerRegisterAll, protocol.SubjectWorkerHeartbeatAll, protocol.SubjectWorkerDeregisterAll} {
		sub, err := r.nc.ChanSubscribe(subj, live)
		if err != nil {
			return fail(fmt.Errorf("reaper: subscribe %s: %w", subj, err))
		}
		r.drops.AddChan(sub, live, r.livenessDropped)
		r.subs = append(r.subs, sub)
	}
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{protocol.SubjectReadyAll, r.onWakeup}, {protocol.SubjectRelayUp, r.onRelayUp}, {protocol.SubjectWorkAll, r.onWorkRequest},
		{protocol.SubjectDirectWorkAll, r.onWorkRequest}} {
		sub, err := r.nc.Subscribe(s.subj, s.h)
		if err != nil {
			return fail(fmt.Errorf("reaper: subscribe %s: %w", s.subj, err))
		}
		_ = sub.SetPendingLimits(pending, 1<<30)
		r.drops.Add(sub, r.wakeupsDropped)
		r.subs = append(r.subs, sub)
	}
	if err := r.nc.Flush(); err != nil {
		return fail(fmt.Errorf("reaper: flush subscriptions: %w", err))
	}
	// Listening before reading the status, so no change falls between.
	r.stopStatus = natsutil.OnStatus(r.nc, r.onStatus, nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	r.natsUp = r.nc.IsConnected()
	r.amnesty = now
	r.mu.Unlock()
	r.life.Go(func() { r.ingest(ctx, live) })
	if err := r.watch.Start(ctx); err != nil {
		return fail(fmt.Errorf("reaper: %w", err))
	}
	l := &pgsession.Leader{
		URL: r.cfg.DatabaseURL, LockKey: r.cfg.LockKey, Role: protocol.LeaderReaper, Retry: r.cfg.Retry,
		Lead:    r.lead,
		OnError: func(err error) { r.log.Warn("leadership", "err", err) },
	}
	r.life.Go(func() { _ = l.Run(ctx) })
	return nil
}

// Stop unsubscribes, steps down and waits; safe to call twice.
func (r *Reaper) Stop() {
	r.life.Stop(func() {
		r.lifeMu.Lock()
		subs, stopStatus := r.subs, r.stopStatus
		r.lifeMu.Unlock()
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		if stopStatus != nil {
			stopStatus()
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

func (r *Reaper) dropMalformed(m *nats.Msg, err error) {
	r.c.malformed.Drop(r.ctx, m.Subject, err)
}

func (r *Reaper) onWakeup(m *nats.Msg) {
	var w protocol.Wakeup
	if err := protocol.Decode(m.Data, &w); err != nil {
		r.dropMalformed(m, err)
		return
	}
	r.c.wakeups.Add(1)
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	news := false
	if r.deadlineCheck.IsZero() {
		news = true
		r.deadlineCheck = now
		if next := r.lastDeadlineQuery.Add(time.Second); next.After(now) {
			r.deadlineCheck = next
		}
	}
	e := now
	if w.AvailableAt.After(e) {
		e = w.AvailableAt
	}
	if b := r.bucket(e); !hasKey(r.leaseChecks, b) {
		news = true
		r.leaseChecks[b] = struct{}{}
	}
	if len(r.leaseChecks) > 4096 {
		cut := r.bucket(now.Add(-r.cfg.Lease))
		for b := range r.leaseChecks {
			if b < cut {
				delete(r.leaseChecks, b)
			}
		}
	}
	r.mu.Unlock()
	if news {
		r.wakeLeader()
	}
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

func (r *Reaper) onRelayUp(m *nats.Msg) {
	var up protocol.RelayUp
	if err := protocol.Decode(m.Data, &up); err != nil {
		r.dropMalformed(m, err)
		return
	}
	r.mu.Lock()
	r.resync = true
	r.mu.Unlock()
	r.wakeLeader()
}
