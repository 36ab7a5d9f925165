package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/leadership"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
)

// RelayLockKey is the advisory lock that elects the one relaying replica.
const RelayLockKey int64 = 0x6b61677a6901 // "kagzi" 01

// RelayDeps are what a Relay is given besides the dispatcher's Config,
// whose KAGZI_DATABASE_SESSION_URL (else KAGZI_DATABASE_URL) it holds its
// dedicated connection at (a session that LISTENs and holds the relay
// lock: it must reach Postgres directly, not through a connection pooler)
// and whose KAGZI_BEACON_INTERVAL it beacons at while it leads (a
// standby takes over from a leader silent for three of them). Zero
// fields mean none.
type RelayDeps struct {
	// Retry, if positive, replaces the wait before reconnecting after a
	// lost connection (relayRetry).
	Retry time.Duration
	// MeterProvider defaults to the otel global.
	MeterProvider metric.MeterProvider
	// Published, if set, is the dispatcher's of this process, which
	// publishes on the same NATS connection: the run ends it announced
	// are not announced again.
	Published *Published
	// Store, if set, lets this replica end the session of a relay leader
	// that stopped making progress (see package leadership); without it
	// the relay lock alone elects, and a frozen leader keeps it.
	Store *store.Store
	// Local, if set, is the dispatcher of this process: each wakeup is
	// handed to it directly as it is published, so the dispatcher
	// next to the relay claims without waiting for the wakeup's round
	// trip through the NATS server (see Dispatcher.Local).
	Local *Dispatcher
}

// relayRetry is the wait before reconnecting after a lost connection.
const relayRetry = 200 * time.Millisecond

// RelayStats are the relay's counters.
type RelayStats struct {
	Relayed   int64 // notifications republished
	Deduped   int64 // run ends not republished: the dispatcher announced them
	Malformed int64 // notifications dropped as malformed
	Leader    bool  // holds the relay lock now
}

// Relay republishes Postgres notifications on NATS. Every dispatcher
// replica runs one; the advisory lock lets exactly one of them listen.
type Relay struct {
	cfg  Config
	deps RelayDeps
	// hops is cfg's recorder, if Run opened one (KAGZI_HOPS_DIR): it
	// stamps each wakeup with when its NOTIFY arrived and when it was
	// published.
	hops *hops.Recorder
	nc   *nats.Conn
	log  *slog.Logger
	id   string

	relayed   atomic.Int64
	deduped   atomic.Int64
	tel       *instruments
	malformed *natsutil.Malformed
	leader    atomic.Bool

	// watch beacons while this replica relays and watches the leader
	// while it does not (nil without RelayDeps.Store).
	watch *leadership.Watch

	life lifecycle.Base
	mu   sync.Mutex
	ctx  context.Context
	// stopReconnect ends the reconnect listener Start added.
	stopReconnect func()
}

// NewRelay returns a relay configured by the dispatcher's cfg (as
// config.Load or config.Defaults return it); Start runs it.
func NewRelay(cfg Config, deps RelayDeps, nc *nats.Conn, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Retry <= 0 {
		deps.Retry = relayRetry
	}
	r := &Relay{cfg: cfg, deps: deps, hops: cfg.hops, nc: nc, log: log.With("component", "relay"), id: uuid.NewString(),
		tel: newInstruments(nil, deps.MeterProvider), malformed: natsutil.NewMalformed("relay", log, slog.LevelError, deps.MeterProvider)}
	if deps.Store != nil {
		r.watch = leadership.New(leadership.Options{Role: protocol.LeaderRelay, LockKey: RelayLockKey, Interval: cfg.BeaconInterval},
			deps.Store, nc, log)
	}
	return r
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Relayed: r.relayed.Load(), Deduped: r.deduped.Load(), Malformed: r.malformed.Count(), Leader: r.leader.Load()}
}

// IsLeader reports whether this replica relays now.
func (r *Relay) IsLeader() bool { return r.leader.Load() }

// LeaderID returns the relay's id (the one its relay.up carries) while it
// relays, "" otherwise.
func (r *Relay) LeaderID() string {
	if r.leader.Load() {
		return r.id
	}
	return ""
}

// Start begins competing for the relay lock in the background.
func (r *Relay) Start(ctx context.Context) error {
	ctx, err := r.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	if err := r.watch.Start(ctx); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	stop := natsutil.OnReconnect(r.nc, r.onReconnect)
	r.mu.Lock()
	r.stopReconnect = stop
	r.mu.Unlock()
	// pgxlisten owns the LISTEN loop: its Connect hook waits for the relay
	// lock on a dedicated session, and it reconnects (campaigns again)
	// after every lost session. Its backlog hook runs once LISTEN is
	// active on a new session, which is when this replica leads.
	l := &pgxlisten.Listener{
		Connect:        pgsession.LockedConnect(r.cfg.SessionURL(), RelayLockKey),
		LogError:       r.onListenError,
		ReconnectDelay: r.deps.Retry,
	}
	l.Handle(store.NotifyChannel, relayHandler{r})
	r.life.Go(func() { _ = l.Listen(ctx) })
	return nil
}

// Stop ends the relay and waits for it; safe to call twice.
func (r *Relay) Stop() {
	r.life.Stop(func() {
		r.mu.Lock()
		stop := r.stopReconnect
		r.mu.Unlock()
		if stop != nil {
			stop()
		}
	})
	r.watch.Stop()
}

// relayHandler is the relay's pgxlisten handler of NotifyChannel.
type relayHandler struct{ r *Relay }

// HandleBacklog runs on every new session once it holds the lock and
// LISTENs: this replica leads. Notifications sent while no relay listened
// are gone, so the relay announces itself and every consumer reads its
// backlog from Postgres again (the design's resync after every
// (re)connect).
func (h relayHandler) HandleBacklog(ctx context.Context, _ string, _ *pgx.Conn) error {
	h.r.watch.Lead()
	h.r.leader.Store(true)
	h.r.log.Info("relay is leader", "relay_id", h.r.id)
	h.r.announce(ctx)
	return nil
}

// HandleNotification republishes one notification, in order, on the
// listener's goroutine. A relay that stalled long enough to have been
// replaced (its standby may have ended its session and be relaying)
// relays nothing more: it closes the session, which ends its term, and
// campaigns again; if it wins, its relay.up makes every consumer read the
// backlog, so the notification it dropped is not lost.
func (h relayHandler) HandleNotification(ctx context.Context, n *pgconn.Notification, conn *pgx.Conn) error {
	if h.r.watch.Deposed() {
		h.r.log.Warn("relay stalled past its leader silence: stepping down")
		return conn.Close(ctx)
	}
	h.r.onNotification(ctx, n.Payload)
	return nil
}

// onListenError receives what ended a session or a campaign: a leader's
// session ending is the end of its leadership.
func (r *Relay) onListenError(ctx context.Context, err error) {
	r.watch.Follow()
	wasLeader := r.leader.Swap(false)
	switch {
	case ctx.Err() != nil:
	case wasLeader:
		r.log.Warn("relay lost leadership", "err", err)
	default:
		r.log.Warn("relay connection lost", "err", err)
	}
}

func (r *Relay) announce(ctx context.Context) {
	r.publish(ctx, protocol.SubjectRelayUp, &protocol.RelayUp{RelayID: r.id, At: time.Now().UTC()})
}

// onReconnect announces the relay again after its own NATS connection came
// back: what it published while the connection was failing unnoticed went
// into a dead socket, and what it published while reconnecting may not
// have fit the client's buffer. Every consumer reads its backlog again, as
// for a new relay; no other news would tell a client waiting for a run
// that finished meanwhile, whose own connection never broke.
func (r *Relay) onReconnect() {
	if !r.leader.Load() {
		return
	}
	r.mu.Lock()
	ctx := r.ctx
	r.mu.Unlock()
	r.log.Info("relay reconnected to NATS: announcing itself again", "relay_id", r.id)
	r.announce(ctx)
}

func (r *Relay) onNotification(ctx context.Context, payload string) {
	notified := r.hops.Now()
	n, err := store.ParseNotification(payload)
	if err != nil {
		r.malformed.Drop(ctx, "", err)
		return
	}
	switch n.Kind {
	case store.NotifyReady:
		w := &protocol.Wakeup{Namespace: n.Namespace, Queue: n.Queue, AvailableAt: *n.At}
		if notified != 0 {
			w.NotifiedNS, w.RelayedNS = notified, r.hops.Now()
		}
		r.deps.Local.expectLocal(w)
		r.publish(ctx, protocol.SubjectReady(n.Namespace, n.Queue), w)
		r.deps.Local.wakeLocal(w)
	case store.NotifyDone:
		for _, f := range n.Finished {
			subject := protocol.SubjectDone(n.Namespace, f.RunID)
			msg := &protocol.RunFinished{Namespace: n.Namespace, RunID: f.RunID, Status: string(f.Status)}
			if r.deps.Published.once(f.RunID, string(f.Status), func() bool { return r.publish(ctx, subject, msg) }) {
				r.deduped.Add(1)
			}
		}
	case store.NotifyCancel:
		r.publish(ctx, protocol.SubjectCancel(n.Namespace, n.WorkerID), &protocol.Cancel{Namespace: n.Namespace, RunID: n.RunID, WorkerID: n.WorkerID,
			Terminate: n.Terminate})
	case store.NotifySchedule:
		r.publish(ctx, protocol.SubjectSchedule(n.Namespace), &protocol.ScheduleChanged{Namespace: n.Namespace, ScheduleID: n.RunID, NextAt: n.At})
	case store.NotifyProgress:
		r.publish(ctx, protocol.SubjectProgress(n.Namespace, n.RunID), &protocol.RunProgress{Namespace: n.Namespace, RunID: n.RunID, StepID: n.StepID})
	case store.NotifyBatch:
		r.publish(ctx, protocol.SubjectBatch(n.Namespace), &protocol.BatchChanged{Namespace: n.Namespace, BatchID: n.RunID,
			State: n.BatchState, Moved: n.BatchMoved})
	case store.NotifyEvent:
		r.publish(ctx, protocol.SubjectEvent(n.Namespace), &protocol.EventPublished{Namespace: n.Namespace, EventID: n.RunID})
	}
}

func (r *Relay) publish(ctx context.Context, subject string, m protocol.Message) bool {
	data, err := protocol.Encode(m)
	if err != nil {
		r.malformed.Drop(ctx, subject, fmt.Errorf("does not encode: %w", err))
		return false
	}
	if err := r.nc.Publish(subject, data); err != nil {
		r.log.Warn("relay publish failed", "subject", subject, "err", err)
		return false
	}
	r.relayed.Add(1)
	r.tel.relayed.Add(ctx, 1)
	return true
}
