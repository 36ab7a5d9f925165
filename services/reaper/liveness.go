package reaper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Liveness: every replica follows the workers' register, heartbeat and
// deregister messages in memory; the leader writes liveness in batches,
// marks silent workers OFFLINE, takes back the runs they held, and deletes
// workers OFFLINE for longer than WorkerRetention. The registration sweep
// (registration.go) writes what this one heard of registrations.

// liveness is the liveness sweep.
type liveness struct {
	*shared
	faults
	cfg LivenessConfig
	// lease is what a live worker's runs' leases are extended to.
	lease time.Duration
	// pendingLimit is how many liveness messages wait unread before NATS
	// drops the next ones (see drops.go).
	pendingLimit int
	// onReconnect asks the leader to re-read leases and deadlines.
	onReconnect func()
	// onFlush, if set (tests), is called by the leader after each flush.
	onFlush func(workers int)

	mu      sync.Mutex
	workers map[uuid.UUID]*wstate
	// deregs are deregistrations to write.
	deregs map[uuid.UUID]dereg
	natsUp bool
	// amnesty: nobody is presumed dead before amnesty + timeout (taking
	// leadership, NATS reconnect).
	amnesty time.Time
	// announce asks the leader to publish a ReaperUp (on taking over, on
	// NATS reconnect).
	announce bool
	// flushPlanned: the leader knows a flush is due; heartbeats need not
	// wake it.
	flushPlanned bool
	lastPrune    time.Time

	// tm is the leader's state for the current term; only the leader
	// goroutine touches it.
	tm livenessTerm
	c  livenessCounters

	life   lifecycle.Base
	lifeMu sync.Mutex
	ctx    context.Context
	subs   []*nats.Subscription
	// stopStatus ends the status listener Start added.
	stopStatus func()
}

// livenessTerm is the liveness sweep's state for one term of leadership.
type livenessTerm struct {
	// sweepAt: mark OFFLINE whatever the database holds as live and was
	// not heard since taking over (zero: none).
	sweepAt time.Time
	// staleRetryAt defers a death pass that failed.
	staleRetryAt time.Time
	// recover are workers marked OFFLINE whose runs are still to take
	// back, with the runs their last heartbeat listed (received, even if a
	// flush skipped marking them held).
	recover   map[uuid.UUID][]uuid.UUID
	recoverAt time.Time
	lastFlush time.Time
	lastPurge time.Time
}

type livenessCounters struct {
	registers, heartbeats, deregisters atomic.Int64
	flushes, beats, extended, released atomic.Int64
	lost, retried, failed, undelivered atomic.Int64
	deleted                            atomic.Int64
}

func newLiveness(sh *shared, cfg LivenessConfig, lease time.Duration, pendingLimit int, onReconnect func()) *liveness {
	return &liveness{shared: sh, faults: faults{lg: sh.log}, cfg: cfg, lease: lease, pendingLimit: pendingLimit,
		onReconnect: onReconnect, workers: map[uuid.UUID]*wstate{}, deregs: map[uuid.UUID]dereg{}}
}

// refresh is how stale a live worker's persisted heartbeat may grow when
// nothing about it changes.
func (l *liveness) refresh() time.Duration { return max(l.lease/3, l.cfg.FlushInterval) }

// Start subscribes to the three liveness subjects on one channel, which
// keeps their order, and follows the NATS connection's status.
func (l *liveness) Start(ctx context.Context) error {
	l.lifeMu.Lock()
	defer l.lifeMu.Unlock()
	ctx, err := l.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	l.ctx = ctx
	liveCap := 1 << 16
	if l.pendingLimit > 0 {
		liveCap = l.pendingLimit
	}
	live := make(chan *nats.Msg, liveCap)
	for _, subj := range []string{protocol.SubjectWorkerRegisterAll, protocol.SubjectWorkerHeartbeatAll, protocol.SubjectWorkerDeregisterAll} {
		sub, err := l.nc.ChanSubscribe(subj, live)
		if err != nil {
			l.unsubscribe()
			l.life.Stop(nil)
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		l.drops.AddChan(sub, live, l.dropped)
		l.subs = append(l.subs, sub)
	}
	// Listening before reading the status, so no change falls between.
	l.stopStatus = natsutil.OnStatus(l.nc, l.onStatus, nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	now := l.clock.Now()
	l.mu.Lock()
	l.natsUp = l.nc.IsConnected()
	l.amnesty = now
	l.mu.Unlock()
	l.life.Go(func() { l.ingest(ctx, live) })
	return nil
}

// unsubscribe ends the subscriptions and the status listener; lifeMu held.
func (l *liveness) unsubscribe() {
	for _, s := range l.subs {
		_ = s.Unsubscribe()
	}
	l.subs = nil
	if l.stopStatus != nil {
		l.stopStatus()
		l.stopStatus = nil
	}
}

// Stop unsubscribes and waits for the messages being applied; safe to
// call twice.
func (l *liveness) Stop() {
	l.life.Stop(func() {
		l.lifeMu.Lock()
		l.unsubscribe()
		l.lifeMu.Unlock()
	})
}

func (l *liveness) dropMalformed(m *nats.Msg, err error) {
	l.malformed.Drop(l.ctx, m.Subject, err)
}

// dropped: NATS dropped liveness messages. A dropped heartbeat is a
// missed one, not an absent one: like a reconnect, it grants every worker
// one timeout to be heard again before it is presumed dead (a dropped
// registration is made up for by the next heartbeat, which the leader
// checks against the worker's row).
func (l *liveness) dropped() {
	l.log.Warn("NATS dropped liveness messages: every worker gets one timeout to be heard")
	l.mu.Lock()
	l.amnesty = l.clock.Now()
	l.mu.Unlock()
	l.wake()
}

// gain takes over: every worker the database holds as live, and every one
// this replica heard, is alive as of now.
func (l *liveness) gain(ctx context.Context, now time.Time) error {
	l.tm = livenessTerm{recover: map[uuid.UUID][]uuid.UUID{}}
	t := &l.tm
	l.mu.Lock()
	if l.amnesty.Before(now) {
		l.amnesty = now
	}
	l.flushPlanned = false
	nss := map[string]bool{}
	gens := map[uuid.UUID]uint64{}
	for _, w := range l.workers {
		gens[w.id] = w.regGen
		w.db, w.rejected, w.regRetryAt, w.checkAt = dbUnknown, false, time.Time{}, time.Time{}
		w.persistedAt, w.persistedDraining = time.Time{}, false
		w.askAt, w.askWait = time.Time{}, 0
		w.heard = !w.lastBeat.IsZero()
		nss[w.ns] = true
	}
	l.mu.Unlock()

	live := map[uuid.UUID]store.Worker{}
	complete := map[string]bool{}
	for ns := range nss {
		complete[ns] = true
		for _, st := range []store.WorkerStatus{store.WorkerOnline, store.WorkerDraining} {
			const limit = 10000
			ws, err := l.st.WorkersList(ctx, store.WorkersListParams{Namespace: ns, Status: st, Limit: limit})
			if err != nil {
				return err
			}
			if len(ws) == limit {
				complete[ns] = false
			}
			for _, w := range ws {
				live[w.ID] = w
			}
		}
	}
	oldest, err := l.st.WorkersOldestHeartbeat(ctx)
	if err != nil {
		return err
	}

	l.mu.Lock()
	for id, w := range l.workers {
		row, ok := live[id]
		switch {
		case w.regGen != gens[id]:
			// Registered while we looked: write that registration.
			w.db = dbStale
		case ok && !incompleteLocked(w) && !sameRegistration(w.reg, paramsFromRow(row)):
			// The row lacks what the registration this replica heard says
			// (it was written from heartbeats): write it.
			w.db = dbStale
		case ok:
			w.db = dbLive
			if incompleteLocked(w) {
				w.reg = paramsFromRow(row)
			}
			w.persistedDraining = row.Status == store.WorkerDraining
			// Written by the last leader, which acknowledged it, or the
			// worker repeats it and is acknowledged then.
			w.ackDue = false
		case !complete[w.ns]:
			// Checked one by one by the registration pass.
		case now.Sub(w.lastBeat) > l.cfg.WorkerTimeout:
			// Silent here and not live there: the last leader buried it.
			delete(l.workers, id)
		default:
			w.db = dbStale
		}
	}
	for id, row := range live {
		if _, ok := l.workers[id]; ok {
			continue
		}
		draining := row.Status == store.WorkerDraining
		l.workers[id] = &wstate{id: id, ns: row.Namespace, queue: row.Queue, reg: paramsFromRow(row),
			draining: draining, db: dbLive, persistedDraining: draining}
	}
	// Registrations sent while no reaper led were heard by no writer.
	l.announce = true
	if oldest != nil {
		// Live rows in namespaces nobody here heard of get one timeout too.
		t.sweepAt = l.amnesty.Add(l.cfg.WorkerTimeout)
	}
	l.mu.Unlock()
	l.purge(ctx, now)
	return nil
}

// tracked is the number of workers followed in memory.
func (l *liveness) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.workers)
}

// step marks the silent workers OFFLINE, takes back their runs, and
// flushes liveness when it is due.
func (l *liveness) step(ctx context.Context) {
	l.reapDead(ctx)
	l.recoverRuns(ctx)
	if now := l.clock.Now(); !now.Before(l.tm.lastFlush.Add(l.cfg.FlushInterval)) {
		if err := l.flush(ctx, false); err != nil {
			l.tm.lastFlush = now
		}
	}
}

// next is the earliest of a worker's death, a retry, a recovery and the
// next flush of workers due one.
func (l *liveness) next() time.Time {
	t := &l.tm
	var e earliest
	now := l.clock.Now()
	if len(t.recover) > 0 {
		e.at(later(t.recoverAt, now))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	due := false
	for _, w := range l.workers {
		if w.rejected {
			continue
		}
		if l.natsUp {
			e.at(later(l.expiryLocked(w), t.staleRetryAt))
		}
		due = due || l.dueLocked(w)
	}
	if l.natsUp && !t.sweepAt.IsZero() {
		e.at(later(t.sweepAt, t.staleRetryAt))
	}
	l.flushPlanned = due
	if due {
		e.at(later(t.lastFlush.Add(l.cfg.FlushInterval), now))
	}
	return e.t
}

// onStatus pauses death detection while NATS is down (heartbeats are
// missed, not absent) and grants an amnesty and a resync on reconnect.
func (l *liveness) onStatus(st nats.Status) {
	l.mu.Lock()
	if st == nats.CONNECTED {
		l.natsUp = true
		l.amnesty = l.clock.Now()
		// Registrations sent while it was away reached no reaper that
		// writes them, if this one leads.
		l.announce = true
	} else {
		l.natsUp = false
	}
	l.mu.Unlock()
	if st == nats.CONNECTED {
		l.onReconnect()
		l.log.Info("nats reconnected: workers get one timeout to be heard")
	}
	l.wake()
}

func (l *liveness) ingest(ctx context.Context, ch chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			// The namespace in the subject is the one NATS permissions
			// let the sender speak for; the message must name the same.
			kind, ns, err := protocol.ParseWorker(m.Subject)
			if err != nil {
				l.dropMalformed(m, err)
				continue
			}
			switch kind {
			case protocol.WorkerRegisterKind:
				l.onRegister(m, ns)
			case protocol.WorkerHeartbeatKind:
				l.onHeartbeat(m, ns)
			case protocol.WorkerDeregisterKind:
				l.onDeregister(m, ns)
			}
		}
	}
}

// subjectNS reports, as a malformed message, one whose namespace is not
// its subject's.
func (l *liveness) subjectNS(m *nats.Msg, subjectNS, msgNS string) bool {
	if subjectNS != msgNS {
		l.dropMalformed(m, fmt.Errorf("message names namespace %q on a subject of namespace %q", msgNS, subjectNS))
		return false
	}
	return true
}

func (l *liveness) onRegister(m *nats.Msg, ns string) {
	var reg protocol.WorkerRegister
	if err := protocol.Decode(m.Data, &reg); err != nil {
		l.dropMalformed(m, err)
		return
	}
	if !l.subjectNS(m, ns, reg.Namespace) {
		return
	}
	l.c.registers.Add(1)
	now := l.clock.Now()
	l.mu.Lock()
	w := l.workers[reg.WorkerID]
	if w == nil {
		w = &wstate{id: reg.WorkerID}
		l.workers[reg.WorkerID] = w
	} else if w.ns != "" && w.ns != reg.Namespace {
		// A worker id is random; one of another namespace reusing it
		// would take over that worker's liveness.
		l.mu.Unlock()
		l.dropMalformed(m, fmt.Errorf("worker %s registers in namespace %q, it is known in %q", reg.WorkerID, reg.Namespace, w.ns))
		return
	}
	p := registerParams(&reg)
	// Acknowledged once written: the worker repeats its registration
	// until then (see protocol.RegistrationNotice).
	w.ackDue = true
	if w.db == dbLive && !w.rejected && w.reg != nil && sameRegistration(w.reg, p) {
		// The worker repeats a registration that is written already (its
		// acknowledgement was lost, or came from no reaper, or the worker
		// was asked): nothing changed, it only says it is alive.
		w.lastBeat, w.checkAt = now, time.Time{}
		l.pruneLocked(now)
		l.mu.Unlock()
		l.wake()
		return
	}
	w.ns, w.queue = reg.Namespace, reg.Queue
	w.reg = p
	w.regGen++
	w.lastBeat = now
	w.db, w.rejected, w.regRetryAt, w.checkAt = dbStale, false, time.Time{}, time.Time{}
	w.askAt, w.askWait = time.Time{}, 0
	l.pruneLocked(now)
	l.mu.Unlock()
	l.wake()
}

func (l *liveness) onHeartbeat(m *nats.Msg, ns string) {
	var hb protocol.Heartbeat
	if err := protocol.Decode(m.Data, &hb); err != nil {
		l.dropMalformed(m, err)
		return
	}
	if !l.subjectNS(m, ns, hb.Namespace) {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	w := l.workers[hb.WorkerID]
	if w == nil {
		// Unknown here: a reaper that started after the registration, or a
		// worker marked OFFLINE coming back. The leader checks its row.
		w = &wstate{id: hb.WorkerID, ns: hb.Namespace, queue: hb.Queue, db: dbUnknown}
		l.workers[hb.WorkerID] = w
	} else if w.ns != hb.Namespace {
		l.mu.Unlock()
		l.dropMalformed(m, fmt.Errorf("heartbeat of worker %s names namespace %q, it registered in %q", hb.WorkerID, hb.Namespace, w.ns))
		return
	}
	w.queue = hb.Queue
	w.lastBeat, w.checkAt = now, time.Time{}
	w.runs = hb.Runs
	w.draining = hb.Draining
	w.heard = true
	w.beats++
	// Counted once the state holds it: a test waiting on the counter may
	// look at the state at once.
	l.c.heartbeats.Add(1)
	l.pruneLocked(now)
	needReg := w.db != dbLive && !w.rejected
	needFlush := !l.flushPlanned && l.dueLocked(w)
	if needFlush {
		l.flushPlanned = true
	}
	wake := needReg || needFlush
	l.mu.Unlock()
	if wake {
		l.wake()
	}
}

func (l *liveness) onDeregister(m *nats.Msg, ns string) {
	var d protocol.WorkerDeregister
	if err := protocol.Decode(m.Data, &d); err != nil {
		l.dropMalformed(m, err)
		return
	}
	if !l.subjectNS(m, ns, d.Namespace) {
		return
	}
	l.c.deregisters.Add(1)
	now := l.clock.Now()
	l.mu.Lock()
	if w := l.workers[d.WorkerID]; w != nil && w.ns != d.Namespace {
		l.mu.Unlock()
		l.dropMalformed(m, fmt.Errorf("deregistration of worker %s names namespace %q, it registered in %q", d.WorkerID, d.Namespace, w.ns))
		return
	}
	delete(l.workers, d.WorkerID)
	l.deregs[d.WorkerID] = dereg{ns: d.Namespace, at: now}
	l.pruneLocked(now)
	l.mu.Unlock()
	l.wake()
}

type deadJob struct {
	id uuid.UUID
	ns string
}

// reapDead marks the silent workers OFFLINE and queues their runs for
// recovery.
func (l *liveness) reapDead(ctx context.Context) {
	t := &l.tm
	now := l.clock.Now()
	if t.staleRetryAt.After(now) {
		return
	}
	l.mu.Lock()
	if !l.natsUp {
		l.mu.Unlock()
		return
	}
	var dead []deadJob
	for id, w := range l.workers {
		if l.expiryLocked(w).After(now) {
			continue
		}
		if w.rejected {
			delete(l.workers, id) // never registered: nothing to recover
			continue
		}
		dead = append(dead, deadJob{w.id, w.ns})
	}
	l.mu.Unlock()
	sweep := !t.sweepAt.IsZero() && !t.sweepAt.After(now)
	if len(dead) == 0 && !sweep {
		return
	}
	// The database must know every heartbeat heard before now, so that
	// only the silent are stale there.
	if err := l.flush(ctx, true); err != nil {
		t.staleRetryAt = now.Add(retryAfter)
		return
	}
	ids, err := fenced(ctx, l.shared, func(st *store.Store) ([]uuid.UUID, error) {
		return st.WorkersMarkStaleOffline(ctx, now.Add(-l.cfg.WorkerTimeout))
	})
	if err != nil {
		if ctx.Err() == nil {
			l.failed("mark stale workers offline", err)
		}
		t.staleRetryAt = now.Add(retryAfter)
		return
	}
	if sweep {
		t.sweepAt = time.Time{}
	}
	marked := make(map[uuid.UUID]bool, len(ids))
	var check []deadJob
	l.mu.Lock()
	for _, id := range ids {
		marked[id] = true
		t.recover[id] = nil
		if w := l.workers[id]; w != nil {
			t.recover[id] = slices.Clone(w.runs)
			if l.expiryLocked(w).After(now) {
				w.db = dbStale // heard again meanwhile: it registers afresh
			} else {
				delete(l.workers, id)
			}
		}
	}
	for _, d := range dead {
		w := l.workers[d.id]
		if marked[d.id] || w == nil {
			continue
		}
		if w.db == dbLive {
			check = append(check, d)
			continue
		}
		// Never made it into the database as live: nothing to mark, but
		// runs may be locked to it.
		delete(l.workers, d.id)
		t.recover[d.id] = slices.Clone(w.runs)
	}
	l.mu.Unlock()
	for _, d := range check {
		row, err := l.st.WorkersGet(ctx, d.ns, d.id)
		l.mu.Lock()
		switch {
		case err == nil && row.Status != store.WorkerOffline:
			// Its row was written after we last heard it (a registration
			// takes the database's clock): dead once that runs out.
			if w := l.workers[d.id]; w != nil {
				w.checkAt = row.LastHeartbeatAt.Add(l.cfg.WorkerTimeout + time.Millisecond)
				if !w.checkAt.After(now) {
					w.checkAt = now.Add(recheck)
				}
			}
		case err == nil || errors.Is(err, store.ErrNotFound):
			if w := l.workers[d.id]; w != nil {
				t.recover[d.id] = slices.Clone(w.runs)
			} else {
				t.recover[d.id] = nil
			}
			delete(l.workers, d.id)
		default:
			if w := l.workers[d.id]; w != nil {
				w.checkAt = now.Add(retryAfter)
			}
		}
		l.mu.Unlock()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			l.failed("check silent worker", err)
		}
	}
	if n := len(t.recover); n > 0 {
		l.log.Warn("workers lost", "marked_offline", len(ids), "to_recover", n, "timeout", l.cfg.WorkerTimeout)
	}
}

// recoverRuns takes back the runs of the workers found dead, one statement
// per worker.
func (l *liveness) recoverRuns(ctx context.Context) {
	t := &l.tm
	now := l.clock.Now()
	if len(t.recover) == 0 || t.recoverAt.After(now) {
		return
	}
	for id, listed := range t.recover {
		if ctx.Err() != nil {
			return
		}
		runs, err := fenced(ctx, l.shared, func(st *store.Store) ([]store.RecoveredRun, error) { return st.RunsRecoverWorker(ctx, id, listed...) })
		if err != nil {
			l.failed("recover runs of a lost worker", err)
			t.recoverAt = now.Add(retryAfter)
			continue
		}
		delete(t.recover, id)
		l.c.lost.Add(1)
		var retried, failed, undelivered int
		for _, rr := range runs {
			switch {
			case rr.Undelivered:
				undelivered++
			case rr.Status == store.StatusFailed:
				failed++
			default:
				retried++
			}
			l.log.Debug("run recovered", "run_id", rr.RunID, "ns", rr.Namespace, "status", rr.Status,
				"undelivered", rr.Undelivered, "worker_id", id)
		}
		l.c.retried.Add(int64(retried))
		l.c.failed.Add(int64(failed))
		l.c.undelivered.Add(int64(undelivered))
		l.log.Warn("worker lost: runs recovered", "worker_id", id, "retried", retried, "failed", failed, "undelivered", undelivered)
	}
}

type snap struct {
	id       uuid.UUID
	at       time.Time
	draining bool
	beats    uint64
}

// flush writes the heartbeats heard since the last flush in one statement
// and the leases of the runs they list in another, in one transaction
// fenced by the leader's term. Unless force, it writes
// nothing when no worker is due (see dueLocked).
func (l *liveness) flush(ctx context.Context, force bool) error {
	t := &l.tm
	l.mu.Lock()
	var beats []store.WorkerBeat
	var leases []store.RunsExtendLeasesParams
	var snaps []snap
	due := false
	for _, w := range l.workers {
		if w.db != dbLive || !w.heard || w.rejected {
			continue
		}
		due = due || l.dueLocked(w)
		beats = append(beats, store.WorkerBeat{WorkerID: w.id, At: w.lastBeat, Draining: w.draining})
		leases = append(leases, store.RunsExtendLeasesParams{WorkerID: w.id, RunIDs: w.runs, Until: w.lastBeat.Add(l.lease)})
		snaps = append(snaps, snap{w.id, w.lastBeat, w.draining, w.beats})
	}
	l.mu.Unlock()
	if len(beats) == 0 || !force && !due {
		return nil
	}
	// Both writes in one fenced transaction: the fence costs one read a
	// flush, not one a write.
	var n, ext, rel int64
	err := l.st.Fenced(ctx, protocol.LeaderReaper, l.term.Load(), func(st *store.Store) (err error) {
		if n, err = st.WorkersHeartbeat(ctx, beats); err != nil {
			return fmt.Errorf("persist heartbeats: %w", err)
		}
		if ext, rel, err = st.RunsExtendLeases(ctx, leases, l.cfg.LeaseGrace); err != nil {
			return fmt.Errorf("extend leases: %w", err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			l.failed("flush liveness", err)
		}
		return err
	}
	now := l.clock.Now()
	t.lastFlush = now
	l.mu.Lock()
	for _, s := range snaps {
		w := l.workers[s.id]
		if w == nil {
			continue
		}
		w.persistedAt, w.persistedDraining = s.at, s.draining
		if w.beats == s.beats {
			w.heard = false
		}
		if n < int64(len(beats)) {
			// Some rows were not live (OFFLINE or deleted behind our back):
			// check each one again.
			w.db = dbUnknown
		}
	}
	l.mu.Unlock()
	l.c.flushes.Add(1)
	l.c.beats.Add(n)
	l.c.extended.Add(ext)
	l.c.released.Add(rel)
	if rel > 0 {
		l.log.Warn("released runs their live workers do not hold", "runs", rel)
	}
	if l.onFlush != nil {
		l.onFlush(len(beats))
	}
	l.purge(ctx, now)
	return nil
}

// purge deletes long-OFFLINE workers, at most hourly and only alongside
// other work (on taking over, after a flush).
func (l *liveness) purge(ctx context.Context, now time.Time) {
	t := &l.tm
	if l.cfg.WorkerRetention <= 0 || now.Sub(t.lastPurge) < time.Hour {
		return
	}
	t.lastPurge = now
	n, err := fenced(ctx, l.shared, func(st *store.Store) (int64, error) {
		return st.WorkersDeleteOffline(ctx, now.Add(-l.cfg.WorkerRetention))
	})
	if err != nil {
		if ctx.Err() == nil {
			l.failed("delete offline workers", err)
		}
		return
	}
	l.c.deleted.Add(n)
}

// follows reports whether the worker is followed here and its
// registration was not refused: its runs' leases are its heartbeats'.
func (l *liveness) follows(id uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.workers[id]
	return w != nil && !w.rejected
}
