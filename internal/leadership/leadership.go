// Package leadership keeps the work that one replica does at a time (the
// relay, the reaper) with a replica that makes progress. The leader is
// elected with a Postgres advisory lock held by a dedicated session
// (pkg/store), which ends when its process dies or is cut off; but a
// frozen process (SIGSTOP, a paused VM, a long stop-the-world pause) keeps
// its session — its kernel still answers — and so would keep the lock for
// as long as it is frozen. So:
//
//   - the leader proves progress: it publishes a LeaderBeacon on NATS
//     when elected and every Interval after that;
//   - a standby that hears no beacon for Silence, while its own NATS
//     connection answers, ends the session of a lock holder idle for
//     longer than Silence (store.LockHolderTerminateIdle); its own lock
//     request, blocked on that lock, is then granted;
//   - only on evidence gathered while the standby itself made progress:
//     a standby that stalled (frozen too) since it last heard a beacon
//     starts its silence window again when it resumes, since what it
//     missed is its own reading, not the leader's beacons;
//   - a leader that resumes from a stall long enough for a standby to
//     have done that (Deposed) acts on nothing more: it steps down, and
//     campaigns again from a fresh view of the world.
//
// A leader frozen for any length of time is thus replaced within Silence
// plus one Interval (the standby's check) of its last beacon.
package leadership

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Options configure a Watch.
type Options struct {
	// Role is the leader role watched (protocol.LeaderRelay or
	// protocol.LeaderReaper).
	Role string
	// LockKey is the advisory lock that elects the role's leader.
	LockKey int64
	// Interval is the time between the leader's beacons (default
	// protocol.DefaultBeaconInterval).
	Interval time.Duration
}

// Silence is how long a leader that beacons every interval may stay
// silent before a standby ends its session (protocol.BeaconSilence).
func (o Options) Silence() time.Duration { return protocol.BeaconSilence(o.interval()) }

func (o Options) interval() time.Duration {
	if o.Interval <= 0 {
		return protocol.DefaultBeaconInterval
	}
	return o.Interval
}

// Watch beacons while its replica leads, and watches the leader's beacons
// while it does not. The replica's election (the lock) is its owner's;
// the owner calls Lead when elected and Follow when it steps down, and
// asks Deposed before it acts.
type Watch struct {
	opts  Options
	st    *store.Store
	nc    *nats.Conn
	log   *slog.Logger
	id    uuid.UUID
	pulse *lifecycle.Pulse

	malformed *natsutil.Malformed

	mu      sync.Mutex
	leading bool
	since   time.Time // when this replica began to lead
	heard   time.Time // last beacon of another replica, or the watch's start
	ended   int64     // silent leaders' sessions ended
	// restarted counts silence windows started again after a stall of
	// this replica's own.
	restarted int64
	sub       *nats.Subscription

	life lifecycle.Base
}

// New returns a watch of opts.Role over st (for ending a silent leader's
// session) and nc (for the beacons).
func New(opts Options, st *store.Store, nc *nats.Conn, log *slog.Logger) *Watch {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "leadership", "role", opts.Role)
	return &Watch{opts: opts, st: st, nc: nc, log: log, id: uuid.New(), pulse: lifecycle.NewPulse(0),
		malformed: natsutil.NewMalformed("leadership", log, slog.LevelWarn, nil)}
}

// Start subscribes to the role's beacons and begins beaconing or watching.
// The methods of a nil Watch do nothing: a leader without one is elected
// by its lock alone.
func (w *Watch) Start(ctx context.Context) error {
	if w == nil {
		return nil
	}
	ctx, err := w.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("leadership %s: %w", w.opts.Role, err)
	}
	if err := w.pulse.Start(ctx); err != nil {
		return err
	}
	sub, err := w.nc.Subscribe(protocol.SubjectLeaderBeacon(w.opts.Role), func(m *nats.Msg) { w.onBeacon(ctx, m) })
	if err != nil {
		w.pulse.Stop()
		return fmt.Errorf("leadership %s: subscribe: %w", w.opts.Role, err)
	}
	w.mu.Lock()
	w.sub, w.heard = sub, time.Now()
	w.mu.Unlock()
	w.life.Go(func() { w.loop(ctx) })
	return nil
}

// Stop ends the beacons and the watch; safe to call twice.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.life.Stop(func() {
		w.mu.Lock()
		sub := w.sub
		w.mu.Unlock()
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	})
	w.pulse.Stop()
}

// Lead marks this replica as the leader from now on and beacons at once.
func (w *Watch) Lead() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.leading, w.since = true, time.Now()
	w.mu.Unlock()
	w.beacon()
}

// Follow marks this replica as not leading.
func (w *Watch) Follow() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.leading = false
	w.mu.Unlock()
}

// Deposed reports whether this replica, leading, stalled since it began to
// lead for long enough that a standby may have ended its session: its
// last beacon may be older than Silence. It must then act on nothing
// more and step down; its view of the world (liveness times, what it
// relayed) is as old as the stall.
func (w *Watch) Deposed() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	leading, since := w.leading, w.since
	w.mu.Unlock()
	return leading && w.pulse.StalledSince(since, w.opts.Silence()-w.opts.interval())
}

// Ended returns how many silent leaders' sessions this replica ended.
func (w *Watch) Ended() int64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

func (w *Watch) onBeacon(ctx context.Context, m *nats.Msg) {
	var b protocol.LeaderBeacon
	if err := protocol.Decode(m.Data, &b); err != nil {
		w.malformed.Drop(ctx, m.Subject, err)
		return
	}
	if b.Role != w.opts.Role || b.LeaderID == w.id {
		return
	}
	w.mu.Lock()
	w.heard = time.Now()
	w.mu.Unlock()
}

func (w *Watch) beacon() {
	data, err := protocol.Encode(&protocol.LeaderBeacon{Role: w.opts.Role, LeaderID: w.id, IntervalMS: w.opts.interval().Milliseconds()})
	if err != nil {
		w.log.Error("leader beacon does not encode", "err", err)
		return
	}
	if err := w.nc.Publish(protocol.SubjectLeaderBeacon(w.opts.Role), data); err != nil {
		w.log.Warn("leader beacon not sent", "err", err)
	}
}

func (w *Watch) loop(ctx context.Context) {
	t := time.NewTicker(w.opts.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		leading, heard := w.leading, w.heard
		w.mu.Unlock()
		if leading {
			w.beacon()
			continue
		}
		if time.Since(heard) <= w.opts.Silence() {
			continue
		}
		if w.pulse.StalledSince(heard, w.opts.interval()) {
			// This standby stalled since it last heard the leader: the
			// silence it measures is its own. The beacons sent meanwhile
			// wait unread in its socket, and the leader's lock session is
			// idle as a lock session always is, so it would depose a
			// healthy leader. It listens for a whole Silence from now on.
			w.restartSilence()
			continue
		}
		w.endSilentLeader(ctx)
	}
}

// restartSilence starts the silence window again from now, and counts it.
func (w *Watch) restartSilence() {
	w.mu.Lock()
	w.heard = time.Now()
	w.restarted++
	w.mu.Unlock()
	w.log.Info("standby resumed from a stall: it listens for the leader again before judging it", "silence", w.opts.Silence())
}

// Restarted returns how often this replica, standing by, found that it had
// stalled itself and started its silence window again.
func (w *Watch) Restarted() int64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restarted
}

// endSilentLeader ends the session of a leader not heard for Silence, if
// this replica can tell: only while its own NATS connection answers (a
// standby cut off from NATS hears no beacon from a leader that is fine),
// and only a lock holder idle for Silence (one just elected has not had
// the time to beacon).
func (w *Watch) endSilentLeader(ctx context.Context) {
	if err := w.nc.FlushTimeout(w.opts.interval()); err != nil {
		return
	}
	n, err := w.st.LockHolderTerminateIdle(ctx, w.opts.LockKey, w.opts.Silence())
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("end a silent leader's session", "err", err)
		}
		return
	}
	w.mu.Lock()
	// Whoever leads next gets Silence to be heard.
	w.heard = time.Now()
	w.ended += int64(n)
	w.mu.Unlock()
	if n > 0 {
		w.log.Warn("leader silent: its session ended", "silence", w.opts.Silence())
	}
}
