package reaper

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// retryAfter is the wait before a failed statement is tried again, and
// recheck the wait before re-reading a due time that did not move (rows
// skipped because another transaction held them).
const (
	retryAfter = time.Second
	recheck    = 250 * time.Millisecond
)

// term is the leader's own state for one term of leadership; only the
// leader goroutine touches it.
type term struct {
	// leaseAt and deadlineAt are the armed timers (zero: none).
	leaseAt, deadlineAt time.Time
	// leaseQueryAt and deadlineQueryAt ask for a re-read (zero: none).
	leaseQueryAt, deadlineQueryAt time.Time
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
	deregAt   time.Time
	lastFlush time.Time
	lastPurge time.Time
}

// lead is the leader's loop: one timer armed at the earliest due time, and
// the kick channel for news from NATS.
func (r *Reaper) lead(ctx context.Context) error {
	t := &term{recover: map[uuid.UUID][]uuid.UUID{}}
	r.c.terms.Add(1)
	r.leader.Store(true)
	defer r.leader.Store(false)
	if err := r.gain(ctx, t); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.c.errors.Add(1)
		return err
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := r.step(ctx, t)
		if ctx.Err() != nil {
			r.log.Info("reaper stepped down")
			return nil
		}
		if next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			r.log.Info("reaper stepped down")
			return nil
		case <-r.kick:
		case <-timer.C:
		}
	}
}

func paramsFromRow(w store.Worker) *store.WorkersRegisterParams {
	return &store.WorkersRegisterParams{
		WorkerID: w.ID, Namespace: w.Namespace, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID, Version: w.Version,
		Types: w.Types, MaxConcurrency: w.MaxConcurrency, Labels: w.Labels,
	}
}

// gain takes over: every worker the database holds as live, and every one
// this replica heard, is alive as of now; leases and deadlines are read.
func (r *Reaper) gain(ctx context.Context, t *term) error {
	now := time.Now()
	r.mu.Lock()
	if r.amnesty.Before(now) {
		r.amnesty = now
	}
	r.flushPlanned, r.resync, r.deadlineCheck = false, false, time.Time{}
	nss := map[string]bool{}
	gens := map[uuid.UUID]uint64{}
	for _, w := range r.workers {
		gens[w.id] = w.regGen
		w.db, w.rejected, w.regRetryAt, w.checkAt = dbUnknown, false, time.Time{}, time.Time{}
		w.persistedAt, w.persistedDraining = time.Time{}, false
		w.heard = !w.lastBeat.IsZero()
		nss[w.ns] = true
	}
	r.mu.Unlock()

	live := map[uuid.UUID]store.Worker{}
	complete := map[string]bool{}
	for ns := range nss {
		complete[ns] = true
		for _, st := range []store.WorkerStatus{store.WorkerOnline, store.WorkerDraining} {
			const limit = 10000
			ws, err := r.st.WorkersList(ctx, store.WorkersListParams{Namespace: ns, Status: st, Limit: limit})
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
	oldest, err := r.st.WorkersOldestHeartbeat(ctx)
	if err != nil {
		return err
	}

	r.mu.Lock()
	for id, w := range r.workers {
		row, ok := live[id]
		switch {
		case w.regGen != gens[id]:
			// Registered while we looked: write that registration.
			w.db = dbStale
		case ok:
			w.db = dbLive
			if w.reg == nil {
				w.reg = paramsFromRow(row)
			}
			w.persistedDraining = row.Status == store.WorkerDraining
		case !complete[w.ns]:
			// Checked one by one by the registration pass.
		case now.Sub(w.lastBeat) > r.cfg.WorkerTimeout:
			// Silent here and not live there: the last leader buried it.
			delete(r.workers, id)
		default:
			w.db = dbStale
		}
	}
	for id, row := range live {
		if _, ok := r.workers[id]; ok {
			continue
		}
		draining := row.Status == store.WorkerDraining
		r.workers[id] = &wstate{id: id, ns: row.Namespace, queue: row.Queue, reg: paramsFromRow(row),
			draining: draining, db: dbLive, persistedDraining: draining}
	}
	n := len(r.workers)
	if oldest != nil {
		// Live rows in namespaces nobody here heard of get one timeout too.
		t.sweepAt = r.amnesty.Add(r.cfg.WorkerTimeout)
	}
	r.leaseChecks[r.bucket(now)] = struct{}{}
	r.mu.Unlock()
	t.leaseQueryAt, t.deadlineQueryAt = now, now
	r.purge(ctx, t, now)
	r.log.Info("reaper is leader", "workers", n)
	return nil
}

// step does whatever is due and returns when it must run next (zero:
// only when kicked).
func (r *Reaper) step(ctx context.Context, t *term) time.Time {
	now := time.Now()
	r.mu.Lock()
	if r.resync {
		r.resync = false
		t.leaseQueryAt, t.deadlineQueryAt = now, now
		r.leaseChecks[r.bucket(now)] = struct{}{}
	}
	r.mu.Unlock()
	r.writeDeregistrations(ctx, t)
	r.writeRegistrations(ctx)
	r.reapDead(ctx, t)
	r.recoverRuns(ctx, t)
	if now := time.Now(); !now.Before(t.lastFlush.Add(r.cfg.FlushInterval)) {
		if err := r.flush(ctx, t, false); err != nil {
			t.lastFlush = now
		}
	}
	r.leases(ctx, t)
	r.deadlines(ctx, t)
	return r.nextWake(t)
}

func (r *Reaper) failed(what string, err error) {
	r.c.errors.Add(1)
	r.log.Error(what, "err", err)
}

func (r *Reaper) writeDeregistrations(ctx context.Context, t *term) {
	now := time.Now()
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
		_, err := r.st.WorkersDeregister(ctx, d.ns, id)
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
	now := time.Now()
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
		update(func(w *wstate) { w.regRetryAt = time.Now().Add(retryAfter) })
	}
	p := j.reg
	if j.db == dbUnknown || p == nil {
		row, err := r.st.WorkersGet(ctx, j.ns, j.id)
		switch {
		case err == nil && row.Status != store.WorkerOffline:
			update(func(w *wstate) {
				w.db = dbLive
				if w.reg == nil {
					w.reg = paramsFromRow(row)
				}
				w.persistedDraining = row.Status == store.WorkerDraining
			})
			return
		case err == nil:
			if p == nil {
				p = paramsFromRow(row)
				p.Queue = j.queue
			}
		case errors.Is(err, store.ErrNotFound):
			if p == nil {
				// All a heartbeat tells; its next registration completes it.
				p = &store.WorkersRegisterParams{WorkerID: j.id, Namespace: j.ns, Queue: j.queue, MaxConcurrency: max(1, j.runs)}
			}
		default:
			retry("check worker", err)
			return
		}
	}
	_, err := r.st.WorkersRegister(ctx, *p)
	switch {
	case err == nil:
		r.c.registered.Add(1)
		now := time.Now()
		update(func(w *wstate) {
			w.db, w.persistedAt, w.persistedDraining = dbLive, now, false
			if w.reg == nil {
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
	now := time.Now()
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
	ids, err := r.st.WorkersMarkStaleOffline(ctx, now.Add(-r.cfg.WorkerTimeout))
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
	now := time.Now()
	if len(t.recover) == 0 || t.recoverAt.After(now) {
		return
	}
	for id, listed := range t.recover {
		if ctx.Err() != nil {
			return
		}
		runs, err := r.st.RunsRecoverWorker(ctx, id, listed...)
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
}

// flush writes the heartbeats heard since the last flush in one statement
// and the leases of the runs they list in another. Unless force, it writes
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
		snaps = append(snaps, snap{w.id, w.lastBeat, w.draining})
	}
	r.mu.Unlock()
	if len(beats) == 0 || !force && !due {
		return nil
	}
	n, err := r.st.WorkersHeartbeat(ctx, beats)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("persist heartbeats", err)
		}
		return err
	}
	ext, rel, err := r.st.RunsExtendLeases(ctx, leases, r.cfg.LeaseGrace)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("extend leases", err)
		}
		return err
	}
	now := time.Now()
	t.lastFlush = now
	r.mu.Lock()
	for _, s := range snaps {
		w := r.workers[s.id]
		if w == nil {
			continue
		}
		w.persistedAt, w.persistedDraining = s.at, s.draining
		if w.lastBeat.Equal(s.at) {
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
	n, err := r.st.WorkersDeleteOffline(ctx, now.Add(-r.cfg.WorkerRetention))
	if err != nil {
		if ctx.Err() == nil {
			r.failed("delete offline workers", err)
		}
		return
	}
	r.c.deleted.Add(n)
}

// leases serves the lease timer and re-reads the next expiry when asked.
func (r *Reaper) leases(ctx context.Context, t *term) {
	now := time.Now()
	r.mu.Lock()
	for b := range r.leaseChecks {
		if !r.bucketTime(b).After(now) {
			delete(r.leaseChecks, b)
			t.leaseQueryAt = now
		}
	}
	r.mu.Unlock()
	acted := false
	if !t.leaseAt.IsZero() && !t.leaseAt.After(now) {
		runs, err := r.st.RunsExpireLeases(ctx, now)
		if err != nil {
			if ctx.Err() == nil {
				r.failed("expire leases", err)
			}
			t.leaseAt = now.Add(retryAfter)
			return
		}
		acted = true
		t.leaseQueryAt = now
		if len(runs) > 0 {
			var failed, undelivered int64
			for _, rr := range runs {
				if rr.Status == store.StatusFailed {
					failed++
				}
				if rr.Undelivered {
					undelivered++
				}
				r.log.Debug("lease expired", "run_id", rr.RunID, "ns", rr.Namespace, "status", rr.Status, "undelivered", rr.Undelivered)
			}
			r.c.expired.Add(int64(len(runs)))
			r.c.undelivered.Add(undelivered)
			r.log.Warn("leases expired: runs recovered", "runs", len(runs), "failed", failed, "undelivered", undelivered)
		}
	}
	if t.leaseQueryAt.IsZero() || t.leaseQueryAt.After(now) {
		return
	}
	r.c.leaseQ.Add(1)
	next, err := r.st.RunsNextLeaseExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("next lease expiry", err)
		}
		t.leaseQueryAt = now.Add(retryAfter)
		return
	}
	t.leaseQueryAt = time.Time{}
	switch {
	case next == nil:
		t.leaseAt = time.Time{}
	case acted && !next.After(now):
		// Rows a report held were skipped: try again shortly.
		t.leaseAt = now.Add(recheck)
	default:
		t.leaseAt = *next
	}
}

// deadlines serves the deadline timer and re-reads the next deadline when
// asked (by wakeups, at most once a second).
func (r *Reaper) deadlines(ctx context.Context, t *term) {
	now := time.Now()
	r.mu.Lock()
	if !r.deadlineCheck.IsZero() && !r.deadlineCheck.After(now) {
		r.deadlineCheck = time.Time{}
		t.deadlineQueryAt = now
	}
	r.mu.Unlock()
	acted := false
	if !t.deadlineAt.IsZero() && !t.deadlineAt.After(now) {
		runs, err := r.st.RunsFailPastDeadline(ctx, now)
		if err != nil {
			if ctx.Err() == nil {
				r.failed("fail runs past their deadline", err)
			}
			t.deadlineAt = now.Add(retryAfter)
			return
		}
		acted = true
		t.deadlineQueryAt = now
		for _, run := range runs {
			r.log.Info("run missed its deadline", "run_id", run.ID, "ns", run.Namespace)
		}
		r.c.deadlines.Add(int64(len(runs)))
	}
	if t.deadlineQueryAt.IsZero() || t.deadlineQueryAt.After(now) {
		return
	}
	r.c.deadlineQ.Add(1)
	next, err := r.st.RunsNextDeadline(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("next deadline", err)
		}
		t.deadlineQueryAt = now.Add(retryAfter)
		return
	}
	r.mu.Lock()
	r.lastDeadlineQuery = now
	r.mu.Unlock()
	t.deadlineQueryAt = time.Time{}
	switch {
	case next == nil:
		t.deadlineAt = time.Time{}
	case acted && !next.After(now):
		t.deadlineAt = now.Add(recheck)
	default:
		t.deadlineAt = *next
	}
}

// nextWake is the earliest due time of anything the leader does.
func (r *Reaper) nextWake(t *term) time.Time {
	var next time.Time
	at := func(x time.Time) {
		if !x.IsZero() && (next.IsZero() || x.Before(next)) {
			next = x
		}
	}
	now := time.Now()
	at(t.leaseAt)
	at(t.deadlineAt)
	at(t.leaseQueryAt)
	at(t.deadlineQueryAt)
	if len(t.recover) > 0 {
		at(later(t.recoverAt, now))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.deregs) > 0 {
		at(later(t.deregAt, now))
	}
	if r.resync {
		at(now)
	}
	at(r.deadlineCheck)
	for b := range r.leaseChecks {
		at(r.bucketTime(b))
	}
	due := false
	for _, w := range r.workers {
		if w.rejected {
			continue
		}
		if r.needsRegLocked(w, now) {
			at(later(w.regRetryAt, now))
		}
		if r.natsUp {
			at(later(r.expiryLocked(w), t.staleRetryAt))
		}
		due = due || r.dueLocked(w)
	}
	if r.natsUp && !t.sweepAt.IsZero() {
		at(later(t.sweepAt, t.staleRetryAt))
	}
	r.flushPlanned = due
	if due {
		at(later(t.lastFlush.Add(r.cfg.FlushInterval), now))
	}
	return next
}
