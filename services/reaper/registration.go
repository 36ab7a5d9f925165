package reaper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Registration is complete whatever the start order (see
// protocol.RegistrationNotice). The leader, and only the leader (it is
// the one that writes, and it acts on nothing once deposed):
//
//   - acknowledges a registration once its row says what it says, so
//     that the worker stops repeating it;
//   - asks a worker it knows only from heartbeats, or whose row says no
//     more than they do, to register, again with a backoff while it does
//     not (a worker of an earlier version never hears the ask, and
//     repeats its registration on its own);
//   - announces itself (ReaperUp) on taking over and after a NATS
//     reconnect: registrations sent while no reaper wrote them (the
//     workers started first, the leader was replaced) are repeated at
//     once by the workers that hold no acknowledgement.
//
// Every replica hears every registration, so a standby that takes over
// writes those its predecessor did not, and acknowledges them then.

// registration is the registration sweep. It works on the liveness
// sweep's memory of the workers (workers.go): it writes the
// registrations and deregistrations heard, and publishes the leader's
// acknowledgements, asks and announcements.
type registration struct {
	*liveness
	faults
	// id names this replica in its ReaperUp.
	id   uuid.UUID
	tm   registrationTerm
	c    registrationCounters
	life lifecycle.Base
}

// registrationTerm is the registration sweep's state for one term.
type registrationTerm struct {
	// deregAt defers the deregistrations after a failed write.
	deregAt time.Time
}

type registrationCounters struct {
	registered, deregistered, acks, asks, announces atomic.Int64
}

func newRegistration(l *liveness, id uuid.UUID) *registration {
	return &registration{liveness: l, faults: faults{lg: l.log}, id: id}
}

// Start starts the sweep, which listens to nothing of its own: liveness
// hears the registrations.
func (g *registration) Start(ctx context.Context) error {
	if _, err := g.life.Begin(ctx); err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	return nil
}

// Stop stops the sweep; safe to call twice.
func (g *registration) Stop() { g.life.Stop(nil) }

// gain takes over: registrations are written anew by this term.
func (g *registration) gain(context.Context, time.Time) error {
	g.tm = registrationTerm{}
	return nil
}

// step writes the deregistrations and registrations heard, then
// publishes what is due.
func (g *registration) step(ctx context.Context) {
	g.writeDeregistrations(ctx)
	g.writeRegistrations(ctx)
	g.notify()
}

// next is when a write, a retry, an acknowledgement, an ask or the
// announcement is due.
func (g *registration) next() time.Time {
	var e earliest
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.deregs) > 0 {
		e.at(later(g.tm.deregAt, now))
	}
	if g.announce && g.natsUp {
		e.at(now)
	}
	for _, w := range g.workers {
		if w.rejected {
			continue
		}
		if g.needsRegLocked(w, now) {
			e.at(later(w.regRetryAt, now))
		}
		if ackDueLocked(w) {
			e.at(now)
		}
		if g.askNeededLocked(w, now) {
			e.at(later(w.askAt, now))
		}
	}
	return e.t
}

// The ask's backoff: the first ask goes out when the worker is first
// heard, the next askFirst later, doubling up to askMax.
const (
	askFirst = time.Second
	askMax   = 30 * time.Second
)

// incompleteLocked reports whether what the leader knows of w's
// registration is only what heartbeats say: no registration heard, and
// its row (if any) without types. A worker registers at least one type.
func incompleteLocked(w *wstate) bool {
	return w.reg == nil || len(w.reg.Types) == 0
}

// ackDueLocked reports whether w's registration is written and not yet
// acknowledged.
func ackDueLocked(w *wstate) bool {
	return w.ackDue && w.db == dbLive && !w.rejected && !incompleteLocked(w)
}

// askNeededLocked reports whether w should be asked to register, now or at
// w.askAt: it is incomplete, alive and not refused.
func (g *registration) askNeededLocked(w *wstate, now time.Time) bool {
	return g.natsUp && !w.rejected && incompleteLocked(w) && !w.lastBeat.IsZero() && g.expiryLocked(w).After(now)
}

// askDueLocked reports whether w should be asked now.
func (g *registration) askDueLocked(w *wstate, now time.Time) bool {
	return g.askNeededLocked(w, now) && !w.askAt.After(now)
}

type notice struct {
	ns  string
	id  uuid.UUID
	ask bool
}

// notify publishes what is due of the leader's acknowledgements, asks and
// announcement.
func (g *registration) notify() {
	now := g.clock.Now()
	var out []notice
	g.mu.Lock()
	announce := g.announce && g.natsUp
	if announce {
		g.announce = false
	}
	for _, w := range g.workers {
		if ackDueLocked(w) {
			w.ackDue = false
			out = append(out, notice{ns: w.ns, id: w.id})
		}
		if g.askDueLocked(w, now) {
			w.askWait = min(max(2*w.askWait, askFirst), askMax)
			w.askAt = now.Add(w.askWait)
			out = append(out, notice{ns: w.ns, id: w.id, ask: true})
		}
	}
	g.mu.Unlock()
	if announce {
		if g.publish(protocol.SubjectReaperUp, &protocol.ReaperUp{ReaperID: g.id}) {
			g.c.announces.Add(1)
		}
	}
	for _, n := range out {
		if !g.publish(protocol.SubjectRegistration(n.ns, n.id), &protocol.RegistrationNotice{Namespace: n.ns, WorkerID: n.id, Ask: n.ask}) {
			continue
		}
		if n.ask {
			g.c.asks.Add(1)
			g.log.Debug("worker asked to register", "worker_id", n.id, "ns", n.ns)
		} else {
			g.c.acks.Add(1)
		}
	}
}

// publish sends m on subject, and reports whether it went out.
func (g *registration) publish(subject string, m protocol.Message) bool {
	data, err := protocol.Encode(m)
	if err == nil {
		err = g.nc.Publish(subject, data)
	}
	if err != nil {
		g.log.Warn("not sent", "subject", subject, "err", err)
		return false
	}
	return true
}

func (g *registration) writeDeregistrations(ctx context.Context) {
	now := g.clock.Now()
	t := &g.tm
	if t.deregAt.After(now) {
		return
	}
	g.mu.Lock()
	todo := g.deregs
	if len(todo) == 0 {
		g.mu.Unlock()
		return
	}
	g.deregs = map[uuid.UUID]dereg{}
	g.mu.Unlock()
	// again puts a deregistration back unless a newer one arrived.
	again := func(id uuid.UUID, d dereg) {
		g.mu.Lock()
		if _, newer := g.deregs[id]; !newer {
			g.deregs[id] = d
		}
		g.mu.Unlock()
	}
	for id, d := range todo {
		if ctx.Err() != nil {
			again(id, d)
			continue
		}
		_, err := fenced(ctx, g.shared, func(st *store.Store) (store.Worker, error) { return st.WorkersDeregister(ctx, d.ns, id) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			if ctx.Err() == nil {
				g.failed("deregister worker", err)
			}
			again(id, d)
			t.deregAt = now.Add(retryAfter)
			continue
		}
		if err == nil {
			g.c.deregistered.Add(1)
			g.log.Info("worker deregistered", "worker_id", id, "ns", d.ns)
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
func (g *registration) writeRegistrations(ctx context.Context) {
	now := g.clock.Now()
	g.mu.Lock()
	var jobs []regJob
	for _, w := range g.workers {
		if !g.needsRegLocked(w, now) || w.regRetryAt.After(now) {
			continue
		}
		jobs = append(jobs, regJob{id: w.id, ns: w.ns, queue: w.queue, reg: w.reg, gen: w.regGen, db: w.db, runs: len(w.runs)})
	}
	g.mu.Unlock()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		g.register(ctx, j)
	}
}

func (g *registration) register(ctx context.Context, j regJob) {
	update := func(fn func(w *wstate)) {
		g.mu.Lock()
		if w := g.workers[j.id]; w != nil && w.regGen == j.gen {
			fn(w)
		}
		g.mu.Unlock()
	}
	retry := func(what string, err error) {
		if ctx.Err() != nil {
			return
		}
		g.failed(what, err)
		update(func(w *wstate) { w.regRetryAt = g.clock.Now().Add(retryAfter) })
	}
	p := j.reg
	if p != nil && len(p.Types) == 0 {
		// What heartbeats said (no worker registers without a type): the
		// row may know more, written by another leader.
		p = nil
	}
	if j.db == dbUnknown || p == nil {
		row, err := g.st.WorkersGet(ctx, j.ns, j.id)
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
	_, err := fenced(ctx, g.shared, func(st *store.Store) (store.Worker, error) { return st.WorkersRegister(ctx, *p) })
	switch {
	case err == nil:
		g.c.registered.Add(1)
		now := g.clock.Now()
		update(func(w *wstate) {
			w.db, w.persistedAt, w.persistedDraining = dbLive, now, false
			if incompleteLocked(w) {
				w.reg = p
			}
		})
		g.log.Info("worker registered", "worker_id", j.id, "ns", j.ns, "queue", p.Queue, "types", len(p.Types))
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalidArgument):
		g.faults.n.Add(1)
		g.log.Warn("worker registration refused; ignoring the worker until it registers again", "worker_id", j.id, "err", err)
		update(func(w *wstate) { w.rejected = true })
	default:
		retry("register worker", err)
	}
}
