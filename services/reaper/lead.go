package reaper

import (
	"context"
	"errors"
	"time"

	"github.com/kagzi/kagzi/internal/clock"
)

// Leadership decides when the sweeps act: every replica runs them, and
// only the leader's loop steps them.

// errStalled ends a term whose leader stalled (see lead).
var errStalled = errors.New("reaper stalled: stepping down")

// lead is the leader's loop: one timer armed at the earliest due time of
// the sweeps, and the kick channel for news from NATS.
func (r *Reaper) lead(ctx context.Context, termID int64) error {
	r.sh.term.Store(termID)
	r.terms.Add(1)
	r.watch.Lead()
	defer r.watch.Follow()
	r.sh.leader.Store(true)
	defer r.sh.leader.Store(false)
	defer r.retain.forgetExpiry()
	if err := r.gain(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.failures.n.Add(1)
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
		at := r.sh.clock.Now()
		next := r.step(ctx)
		if r.onStep != nil {
			r.onStep(at)
		}
		if ctx.Err() != nil {
			r.log.Info("reaper stepped down")
			return nil
		}
		disarm()
		if !next.IsZero() {
			timer = r.sh.clock.AfterFunc(next.Sub(r.sh.clock.Now()), r.wakeLeader)
		}
		select {
		case <-ctx.Done():
			r.log.Info("reaper stepped down")
			return nil
		case <-r.kick:
		}
	}
}

// gain takes over: each sweep starts its term (the workers the database
// holds as live, and every one this replica heard, are alive as of now;
// leases and deadlines are read at the first step).
func (r *Reaper) gain(ctx context.Context) error {
	now := r.sh.clock.Now()
	r.mu.Lock()
	r.resync = false
	r.mu.Unlock()
	// Deadlines first: a wakeup heard while liveness reads the database
	// keeps its re-read.
	for _, s := range []sweep{r.deadlines, r.live, r.reg, r.leases, r.retain, r.batches, r.fanOuts, r.starts, r.counts} {
		if err := s.gain(ctx, now); err != nil {
			return err
		}
	}
	r.log.Info("reaper is leader", "workers", r.live.tracked())
	// The leader deletes rows; only autovacuum gives their space back.
	if on, err := r.sh.st.ServerAutovacuum(ctx); err == nil && !on {
		r.log.Warn("autovacuum is off on the database server: the space of deleted and updated runs is never reclaimed, and the tables grow for ever")
	}
	return nil
}

// step steps every sweep and returns when the loop must run next (zero:
// only when kicked).
func (r *Reaper) step(ctx context.Context) time.Time {
	r.mu.Lock()
	resync := r.resync
	r.resync = false
	r.mu.Unlock()
	if resync {
		now := r.sh.clock.Now()
		r.leases.resync(now)
		r.deadlines.resync(now)
	}
	for _, s := range r.sweeps {
		s.step(ctx)
	}
	var e earliest
	for _, s := range r.sweeps {
		e.at(s.next())
	}
	r.mu.Lock()
	if r.resync {
		e.at(r.sh.clock.Now())
	}
	r.mu.Unlock()
	return e.t
}
