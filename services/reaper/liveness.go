package reaper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Liveness: every replica follows the workers' register, heartbeat and
// deregister messages in memory; the leader writes liveness in batches,
// marks silent workers OFFLINE and takes back the runs they held.

// onStatus pauses death detection while NATS is down (heartbeats are
// missed, not absent) and grants an amnesty and a resync on reconnect.
func (r *Reaper) onStatus(st nats.Status) {
	r.mu.Lock()
	if st == nats.CONNECTED {
		r.natsUp = true
		r.amnesty = r.cfg.Clock.Now()
		r.resync = true
		// Registrations sent while it was away reached no reaper that
		// writes them, if this one leads.
		r.announce = true
	} else {
		r.natsUp = false
	}
	r.mu.Unlock()
	if st == nats.CONNECTED {
		r.log.Info("nats reconnected: workers get one timeout to be heard")
	}
	r.wakeLeader()
}

func (r *Reaper) ingest(ctx context.Context, ch chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			// The namespace in the subject is the one NATS permissions
			// let the sender speak for; the message must name the same.
			kind, ns, err := protocol.ParseWorker(m.Subject)
			if err != nil {
				r.dropMalformed(m, err)
				continue
			}
			switch kind {
			case protocol.WorkerRegisterKind:
				r.onRegister(m, ns)
			case protocol.WorkerHeartbeatKind:
				r.onHeartbeat(m, ns)
			case protocol.WorkerDeregisterKind:
				r.onDeregister(m, ns)
			}
		}
	}
}

func registerParams(m *protocol.WorkerRegister) *store.WorkersRegisterParams {
	types := make([]store.TypeVersion, len(m.Types))
	for i, tv := range m.Types {
		types[i] = store.TypeVersion{Type: tv.Type, Version: tv.Version}
	}
	return &store.WorkersRegisterParams{
		WorkerID: m.WorkerID, Namespace: m.Namespace, Queue: m.Queue, Hostname: m.Hostname, PID: m.PID,
		Version: m.Version, Types: types, MaxConcurrency: m.MaxConcurrency, Labels: m.Labels,
	}
}

// subjectNS reports, as a malformed message, one whose namespace is not
// its subject's.
func (r *Reaper) subjectNS(m *nats.Msg, subjectNS, msgNS string) bool {
	if subjectNS != msgNS {
		r.dropMalformed(m, fmt.Errorf("message names namespace %q on a subject of namespace %q", msgNS, subjectNS))
		return false
	}
	return true
}

func (r *Reaper) onRegister(m *nats.Msg, ns string) {
	var reg protocol.WorkerRegister
	if err := protocol.Decode(m.Data, &reg); err != nil {
		r.dropMalformed(m, err)
		return
	}
	if !r.subjectNS(m, ns, reg.Namespace) {
		return
	}
	r.c.registers.Add(1)
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	w := r.workers[reg.WorkerID]
	if w == nil {
		w = &wstate{id: reg.WorkerID}
		r.workers[reg.WorkerID] = w
	} else if w.ns != "" && w.ns != reg.Namespace {
		// A worker id is random; one of another namespace reusing it
		// would take over that worker's liveness.
		r.mu.Unlock()
		r.dropMalformed(m, fmt.Errorf("worker %s registers in namespace %q, it is known in %q", reg.WorkerID, reg.Namespace, w.ns))
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
		r.pruneLocked(now)
		r.mu.Unlock()
		r.wakeLeader()
		return
	}
	w.ns, w.queue = reg.Namespace, reg.Queue
	w.reg = p
	w.regGen++
	w.lastBeat = now
	w.db, w.rejected, w.regRetryAt, w.checkAt = dbStale, false, time.Time{}, time.Time{}
	w.askAt, w.askWait = time.Time{}, 0
	r.pruneLocked(now)
	r.mu.Unlock()
	r.wakeLeader()
}

// sameRegistration reports whether two registrations of a worker say the
// same: a repeated one is not written again.
func sameRegistration(a, b *store.WorkersRegisterParams) bool {
	if a.WorkerID != b.WorkerID || a.Namespace != b.Namespace || a.Queue != b.Queue || a.Hostname != b.Hostname ||
		a.PID != b.PID || a.Version != b.Version || a.MaxConcurrency != b.MaxConcurrency ||
		!slices.Equal(a.Types, b.Types) || len(a.Labels) != len(b.Labels) {
		return false
	}
	for k, v := range a.Labels {
		if bv, ok := b.Labels[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func (r *Reaper) onHeartbeat(m *nats.Msg, ns string) {
	var hb protocol.Heartbeat
	if err := protocol.Decode(m.Data, &hb); err != nil {
		r.dropMalformed(m, err)
		return
	}
	if !r.subjectNS(m, ns, hb.Namespace) {
		return
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	w := r.workers[hb.WorkerID]
	if w == nil {
		// Unknown here: a reaper that started after the registration, or a
		// worker marked OFFLINE coming back. The leader checks its row.
		w = &wstate{id: hb.WorkerID, ns: hb.Namespace, queue: hb.Queue, db: dbUnknown}
		r.workers[hb.WorkerID] = w
	} else if w.ns != hb.Namespace {
		r.mu.Unlock()
		r.dropMalformed(m, fmt.Errorf("heartbeat of worker %s names namespace %q, it registered in %q", hb.WorkerID, hb.Namespace, w.ns))
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
	r.c.heartbeats.Add(1)
	r.pruneLocked(now)
	needReg := w.db != dbLive && !w.rejected
	needFlush := !r.flushPlanned && r.dueLocked(w)
	if needFlush {
		r.flushPlanned = true
	}
	wake := needReg || needFlush
	r.mu.Unlock()
	if wake {
		r.wakeLeader()
	}
}

func (r *Reaper) onDeregister(m *nats.Msg, ns string) {
	var d protocol.WorkerDeregister
	if err := protocol.Decode(m.Data, &d); err != nil {
		r.dropMalformed(m, err)
		return
	}
	if !r.subjectNS(m, ns, d.Namespace) {
		return
	}
	r.c.deregisters.Add(1)
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if w := r.workers[d.WorkerID]; w != nil && w.ns != d.Namespace {
		r.mu.Unlock()
		r.dropMalformed(m, fmt.Errorf("deregistration of worker %s names namespace %q, it registered in %q", d.WorkerID, d.Namespace, w.ns))
		return
	}
	delete(r.workers, d.WorkerID)
	r.deregs[d.WorkerID] = dereg{ns: d.Namespace, at: now}
	r.pruneLocked(now)
	r.mu.Unlock()
	r.wakeLeader()
}

// pruneLocked forgets, on a standby, workers silent for two timeouts (the
// leader has marked them OFFLINE), those it only knew from the database in
// an earlier term, and deregistrations the leader has long written. At
// most once per timeout.
func (r *Reaper) pruneLocked(now time.Time) {
	if r.leader.Load() || now.Sub(r.lastPrune) < r.cfg.WorkerTimeout {
		return
	}
	r.lastPrune = now
	old := 2 * r.cfg.WorkerTimeout
	for id, w := range r.workers {
		if w.lastBeat.IsZero() || now.Sub(w.lastBeat) > old {
			delete(r.workers, id)
		}
	}
	for id, d := range r.deregs {
		if now.Sub(d.at) > old {
			delete(r.deregs, id)
		}
	}
}

// dueLocked reports whether w's liveness should be written at the next
// flush tick.
func (r *Reaper) dueLocked(w *wstate) bool {
	if w.db != dbLive || !w.heard {
		return false
	}
	return len(w.runs) > 0 || w.draining != w.persistedDraining || w.lastBeat.Sub(w.persistedAt) >= r.cfg.refresh()
}

func paramsFromRow(w store.Worker) *store.WorkersRegisterParams {
	return &store.WorkersRegisterParams{
		WorkerID: w.ID, Namespace: w.Namespace, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID, Version: w.Version,
		Types: w.Types, MaxConcurrency: w.MaxConcurrency, Labels: w.Labels,
	}
}

func (r *Reaper) writeDeregistrations(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	if t.deregAt.After(now) {
		return
	}
	r.mu.Lock()
	todo := r.deregs
	if len(todo) == 0 {
		r.mu.Unlock()
		return
	}
	r.deregs = map[uuid.UUID]dereg{}
	r.mu.Unlock()
	// again puts a deregistration back unless a newer one arrived.
	again := func(id uuid.UUID, d dereg) {
		r.mu.Lock()
		if _, newer := r.deregs[id]; !newer {
			r.deregs[id] = d
		}
		r.mu.Unlock()
	}
	for id, d := range todo {
		if ctx.Err() != nil {
			again(id, d)
			continue
		}
		_, err := fenced(ctx, r, func(st *store.Store) (store.Worker, error) { return st.WorkersDeregister(ctx, d.ns, id) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			if ctx.Err() == nil {
				r.failed("deregister worker", err)
			}
			again(id, d)
			t.deregAt = now.Add(retryAfter)
			continue
		}
		if err == nil {
			r.c.deregistered.Add(1)
			r.log.Info("worker deregistered", "worker_id", id, "ns", d.ns)
		}
	}
}

type regJob struct {
	id        uuid.UUID
	ns, queue string
	reg       *store.WorkersRegisterParams
	gen       uint64
	db        dbState
	runs      int
}

// writeRegistrations registers workers heard that are not live in the
// database, checking the row first when the leader does not know it.
func (r *Reaper) writeRegistrations(ctx context.Context) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	var jobs []regJob
	for _, w := range r.workers {
		if !r.needsRegLocked(w, now) || w.regRetryAt.After(now) {
			continue
		}
		jobs = append(jobs, regJob{id: w.id, ns: w.ns, queue: w.queue, reg: w.reg, gen: w.regGen, db: w.db, runs: len(w.runs)})
	}
	r.mu.Unlock()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		r.register(ctx, j)
	}
}

func (r *Reaper) register(ctx context.Context, j regJob) {
	update := func(fn func(w *wstate)) {
		r.mu.Lock()
		if w := r.workers[j.id]; w != nil && w.regGen == j.gen {
			fn(w)
		}
		r.mu.Unlock()
	}
	retry := func(what string, err error) {
		if ctx.Err() != nil {
			return
		}
		r.failed(what, err)
		update(func(w *wstate) { w.regRetryAt = r.cfg.Clock.Now().Add(retryAfter) })
	}
	p := j.reg
	if p != nil && len(p.Types) == 0 {
		// What heartbeats said (no worker registers without a type): the
		// row may know more, written by another leader.
		p = nil
	}
	if j.db == dbUnknown || p == nil {
		row, err := r.st.WorkersGet(ctx, j.ns, j.id)
		switch {
		case err == nil && row.Status != store.WorkerOffline && (p == nil || sameRegistration(p, paramsFromRow(row))):
			update(func(w *wstate) {
				w.db = dbLive
				if incompleteLocked(w) {
					w.reg = paramsFromRow(row)
				}
				w.persistedDraining = row.Status == store.WorkerDraining
			})
			return
		case err == nil:
			// OFFLINE, or live without what the registration heard says
			// (written from heartbeats): (re)registered.
			if p == nil {
				p = paramsFromRow(row)
				p.Queue = j.queue
			}
		case errors.Is(err, store.ErrNotFound):
			if p == nil {
				// All a heartbeat tells: the worker is asked for the rest
				// (registration.go).
				p = &store.WorkersRegisterParams{WorkerID: j.id, Namespace: j.ns, Queue: j.queue, MaxConcurrency: max(1, j.runs)}
			}
		default:
			retry("check worker", err)
			return
		}
	}
	_, err := fenced(ctx, r, func(st *store.Store) (store.Worker, error) { return st.WorkersRegister(ctx, *p) })
	switch {
	case err == nil:
		r.c.registered.Add(1)
		now := r.cfg.Clock.Now()
		update(func(w *wstate) {
			w.db, w.persistedAt, w.persistedDraining = dbLive, now, false
			if incompleteLocked(w) {
				w.reg = p
			}
		})
		r.log.Info("worker registered", "worker_id", j.id, "ns", j.ns, "queue", p.Queue, "types", len(p.Types))
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalidArgument):
		r.c.errors.Add(1)
		r.log.Warn("worker registration refused; ignoring the worker until it registers again", "worker_id", j.id, "err", err)
		update(func(w *wstate) { w.rejected = true })
	default:
		retry("register worker", err)
	}
}

// needsRegLocked reports whether w, heard and alive, is not known live in
// the database. A dead one is left to the death pass.
func (r *Reaper) needsRegLocked(w *wstate, now time.Time) bool {
	if w.db == dbLive || w.rejected || w.lastBeat.IsZero() {
		return false
	}
	return !r.natsUp || r.expiryLocked(w).After(now)
}

// expiryLocked is when w is dead unless heard again.
func (r *Reaper) expiryLocked(w *wstate) time.Time {
	base := w.lastBeat
	if base.Before(r.amnesty) {
		base = r.amnesty
	}
	exp := base.Add(r.cfg.WorkerTimeout)
	if w.checkAt.After(exp) {
		exp = w.checkAt
	}
	return exp
}

type deadJob struct {
	id uuid.UUID
	ns string
}

// reapDead marks the silent workers OFFLINE and queues their runs for
// recovery.
func (r *Reaper) reapDead(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	if t.staleRetryAt.After(now) {
		return
	}
	r.mu.Lock()
	if !r.natsUp {
		r.mu.Unlock()
		return
	}
	var dead []deadJob
	for id, w := range r.workers {
		if r.expiryLocked(w).After(now) {
			continue
		}
		if w.rejected {
			delete(r.workers, id) // never registered: nothing to recover
			continue
		}
		dead = append(dead, deadJob{w.id, w.ns})
	}
	r.mu.Unlock()
	sweep := !t.sweepAt.IsZero() && !t.sweepAt.After(now)
	if len(dead) == 0 && !sweep {
		return
	}
	// The database must know every heartbeat heard before now, so that
	// only the silent are stale there.
	if err := r.flush(ctx, t, true); err != nil {
		t.staleRetryAt = now.Add(retryAfter)
		return
	}
	ids, err := fenced(ctx, r, func(st *store.Store) ([]uuid.UUID, error) {
		return st.WorkersMarkStaleOffline(ctx, now.Add(-r.cfg.WorkerTimeout))
	})
	if err != nil {
		if ctx.Err() == nil {
			r.failed("mark stale workers offline", err)
		}
		t.staleRetryAt = now.Add(retryAfter)
		return
	}
	if sweep {
		t.sweepAt = time.Time{}
	}
	marked := make(map[uuid.UUID]bool, len(ids))
	var check []deadJob
	r.mu.Lock()
	for _, id := range ids {
		marked[id] = true
		t.recover[id] = nil
		if w := r.workers[id]; w != nil {
			t.recover[id] = slices.Clone(w.runs)
			if r.expiryLocked(w).After(now) {
				w.db = dbStale // heard again meanwhile: it registers afresh
			} else {
				delete(r.workers, id)
			}
		}
	}
	for _, d := range dead {
		w := r.workers[d.id]
		if marked[d.id] || w == nil {
			continue
		}
		if w.db == dbLive {
			check = append(check, d)
			continue
		}
		// Never made it into the database as live: nothing to mark, but
		// runs may be locked to it.
		delete(r.workers, d.id)
		t.recover[d.id] = slices.Clone(w.runs)
	}
	r.mu.Unlock()
	for _, d := range check {
		row, err := r.st.WorkersGet(ctx, d.ns, d.id)
		r.mu.Lock()
		switch {
		case err == nil && row.Status != store.WorkerOffline:
			// Its row was written after we last heard it (a registration
			// takes the database's clock): dead once that runs out.
			if w := r.workers[d.id]; w != nil {
				w.checkAt = row.LastHeartbeatAt.Add(r.cfg.WorkerTimeout + time.Millisecond)
				if !w.checkAt.After(now) {
					w.checkAt = now.Add(recheck)
				}
			}
		case err == nil || errors.Is(err, store.ErrNotFound):
			if w := r.workers[d.id]; w != nil {
				t.recover[d.id] = slices.Clone(w.runs)
			} else {
				t.recover[d.id] = nil
			}
			delete(r.workers, d.id)
		default:
			if w := r.workers[d.id]; w != nil {
				w.checkAt = now.Add(retryAfter)
			}
		}
		r.mu.Unlock()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			r.failed("check silent worker", err)
		}
	}
	if n := len(t.recover); n > 0 {
		r.log.Warn("workers lost", "marked_offline", len(ids), "to_recover", n, "timeout", r.cfg.WorkerTimeout)
	}
}

// recoverRuns takes back the runs of the workers found dead, one statement
// per worker.
func (r *Reaper) recoverRuns(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	if len(t.recover) == 0 || t.recoverAt.After(now) {
		return
	}
	for id, listed := range t.recover {
		if ctx.Err() != nil {
			return
		}
		runs, err := fenced(ctx, r, func(st *store.Store) ([]store.RecoveredRun, error) { return st.RunsRecoverWorker(ctx, id, listed...) })
		if err != nil {
			r.failed("recover runs of a lost worker", err)
			t.recoverAt = now.Add(retryAfter)
			continue
		}
		delete(t.recover, id)
		r.c.lost.Add(1)
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
			r.log.Debug("run recovered", "run_id", rr.RunID, "ns", rr.Namespace, "status", rr.Status,
				"undelivered", rr.Undelivered, "worker_id", id)
		}
		r.c.retried.Add(int64(retried))
		r.c.failed.Add(int64(failed))
		r.c.undelivered.Add(int64(undelivered))
		r.log.Warn("worker lost: runs recovered", "worker_id", id, "retried", retried, "failed", failed, "undelivered", undelivered)
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
func (r *Reaper) flush(ctx context.Context, t *term, force bool) error {
	r.mu.Lock()
	var beats []store.WorkerBeat
	var leases []store.RunsExtendLeasesParams
	var snaps []snap
	due := false
	for _, w := range r.workers {
		if w.db != dbLive || !w.heard || w.rejected {
			continue
		}
		due = due || r.dueLocked(w)
		beats = append(beats, store.WorkerBeat{WorkerID: w.id, At: w.lastBeat, Draining: w.draining})
		leases = append(leases, store.RunsExtendLeasesParams{WorkerID: w.id, RunIDs: w.runs, Until: w.lastBeat.Add(r.cfg.Lease)})
		snaps = append(snaps, snap{w.id, w.lastBeat, w.draining, w.beats})
	}
	r.mu.Unlock()
	if len(beats) == 0 || !force && !due {
		return nil
	}
	// Both writes in one fenced transaction: the fence costs one read a
	// flush, not one a write.
	var n, ext, rel int64
	err := r.st.Fenced(ctx, protocol.LeaderReaper, r.term.Load(), func(st *store.Store) (err error) {
		if n, err = st.WorkersHeartbeat(ctx, beats); err != nil {
			return fmt.Errorf("persist heartbeats: %w", err)
		}
		if ext, rel, err = st.RunsExtendLeases(ctx, leases, r.cfg.LeaseGrace); err != nil {
			return fmt.Errorf("extend leases: %w", err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			r.failed("flush liveness", err)
		}
		return err
	}
	now := r.cfg.Clock.Now()
	t.lastFlush = now
	r.mu.Lock()
	for _, s := range snaps {
		w := r.workers[s.id]
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
	r.mu.Unlock()
	r.c.flushes.Add(1)
	r.c.beats.Add(n)
	r.c.extended.Add(ext)
	r.c.released.Add(rel)
	if rel > 0 {
		r.log.Warn("released runs their live workers do not hold", "runs", rel)
	}
	if r.onFlush != nil {
		r.onFlush(len(beats))
	}
	r.purge(ctx, t, now)
	return nil
}

// purge deletes long-OFFLINE workers, at most hourly and only alongside
// other work (on taking over, after a flush).
func (r *Reaper) purge(ctx context.Context, t *term, now time.Time) {
	if r.cfg.WorkerRetention < 0 || now.Sub(t.lastPurge) < time.Hour {
		return
	}
	t.lastPurge = now
	n, err := fenced(ctx, r, func(st *store.Store) (int64, error) {
		return st.WorkersDeleteOffline(ctx, now.Add(-r.cfg.WorkerRetention))
	})
	if err != nil {
		if ctx.Err() == nil {
			r.failed("delete offline workers", err)
		}
		return
	}
	r.c.deleted.Add(n)
}
