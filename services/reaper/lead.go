package reaper

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// retryAfter is the wait before a failed statement is tried again, and
// recheck the wait before re-reading a due time that did not move (rows
// skipped because another transaction held them).
const (
	retryAfter = time.Second
	recheck    = 250 * time.Millisecond
)

// fenced runs fn, a write of the leader, in a transaction in which this
// replica's term is current (store.Fenced): a leader replaced while it
// stalled writes nothing, even a statement it prepared before the stall.
func fenced[T any](ctx context.Context, r *Reaper, fn func(st *store.Store) (T, error)) (T, error) {
	var out T
	err := r.st.Fenced(ctx, protocol.LeaderReaper, r.term.Load(), func(tx *store.Store) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// errStalled ends a term whose leader stalled (see lead).
var errStalled = errors.New("reaper stalled: stepping down")

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
	// retainAt is when retention acts next (zero: at the first step):
	// deletes a batch if retainDue, else reads the next expiry.
	retainAt  time.Time
	retainDue bool
	// retainReadAt is when the next expiry was last read; retainBusy the
	// backoff after batches that left due runs others held; retainPass the
	// runs deleted since the last pass ended.
	retainReadAt time.Time
	retainBusy   time.Duration
	retainPass   int64
}

// lead is the leader's loop: one timer armed at the earliest due time, and
// the kick channel for news from NATS.
func (r *Reaper) lead(ctx context.Context, termID int64) error {
	r.term.Store(termID)
	t := &term{recover: map[uuid.UUID][]uuid.UUID{}}
	r.c.terms.Add(1)
	r.watch.Lead()
	defer r.watch.Follow()
	r.leader.Store(true)
	defer r.leader.Store(false)
	defer r.forgetExpiry()
	if err := r.gain(ctx, t); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.c.errors.Add(1)
		return err
	}
	// The timer kicks the loop as news from NATS does.
	var timer clock.Timer
	disarm := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
	defer disarm()
	for {
		// A leader that stalled long enough for a standby to have ended
		// its session acts on nothing more: what it knows (when each
		// worker was last heard, the timers it armed) is as old as the
		// stall. It steps down; whoever leads next, itself included,
		// takes over afresh (gain).
		if r.watch.Deposed() {
			r.log.Warn("reaper stepped down", "reason", "stalled past its leader silence")
			return errStalled
		}
		at := r.cfg.Clock.Now()
		next := r.step(ctx, t)
		if r.onStep != nil {
			r.onStep(at)
		}
		if ctx.Err() != nil {
			r.log.Info("reaper stepped down")
			return nil
		}
		disarm()
		if !next.IsZero() {
			timer = r.cfg.Clock.AfterFunc(next.Sub(r.cfg.Clock.Now()), r.wakeLeader)
		}
		select {
		case <-ctx.Done():
			r.log.Info("reaper stepped down")
			return nil
		case <-r.kick:
		}
	}
}

// gain takes over: every worker the database holds as live, and every one
// this replica heard, is alive as of now; leases and deadlines are read.
func (r *Reaper) gain(ctx context.Context, t *term) error {
	now := r.cfg.Clock.Now()
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
		w.askAt, w.askWait = time.Time{}, 0
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
	// Registrations sent while no reaper led were heard by no writer.
	r.announce = true
	if oldest != nil {
		// Live rows in namespaces nobody here heard of get one timeout too.
		t.sweepAt = r.amnesty.Add(r.cfg.WorkerTimeout)
	}
	r.leaseChecks[r.bucket(now)] = struct{}{}
	r.mu.Unlock()
	t.leaseQueryAt, t.deadlineQueryAt = now, now
	r.purge(ctx, t, now)
	r.log.Info("reaper is leader", "workers", n)
	// The leader deletes rows; only autovacuum gives their space back.
	if on, err := r.st.ServerAutovacuum(ctx); err == nil && !on {
		r.log.Warn("autovacuum is off on the database server: the space of deleted and updated runs is never reclaimed, and the tables grow for ever")
	}
	return nil
}

// step does whatever is due and returns when it must run next (zero:
// only when kicked).
func (r *Reaper) step(ctx context.Context, t *term) time.Time {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if r.resync {
		r.resync = false
		t.leaseQueryAt, t.deadlineQueryAt = now, now
		r.leaseChecks[r.bucket(now)] = struct{}{}
	}
	r.mu.Unlock()
	r.writeDeregistrations(ctx, t)
	r.writeRegistrations(ctx)
	r.notify()
	r.reapDead(ctx, t)
	r.recoverRuns(ctx, t)
	if now := r.cfg.Clock.Now(); !now.Before(t.lastFlush.Add(r.cfg.FlushInterval)) {
		if err := r.flush(ctx, t, false); err != nil {
			t.lastFlush = now
		}
	}
	r.leases(ctx, t)
	r.deadlines(ctx, t)
	r.retention(ctx, t)
	return r.nextWake(t)
}

func (r *Reaper) failed(what string, err error) {
	r.c.errors.Add(1)
	r.log.Error(what, "err", err)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// nextWake is the earliest due time of anything the leader does.
func (r *Reaper) nextWake(t *term) time.Time {
	var next time.Time
	at := func(x time.Time) {
		if !x.IsZero() && (next.IsZero() || x.Before(next)) {
			next = x
		}
	}
	now := r.cfg.Clock.Now()
	at(t.leaseAt)
	at(t.deadlineAt)
	at(t.leaseQueryAt)
	at(t.deadlineQueryAt)
	at(t.retainAt)
	if len(t.recover) > 0 {
		at(later(t.recoverAt, now))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.deregs) > 0 {
		at(later(t.deregAt, now))
	}
	if r.resync || r.announce && r.natsUp {
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
		if ackDueLocked(w) {
			at(now)
		}
		if r.askNeededLocked(w, now) {
			at(later(w.askAt, now))
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
