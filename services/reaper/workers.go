package reaper

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// The liveness sweep's memory of the workers, which the registration
// sweep writes from; guarded by liveness.mu.

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

func paramsFromRow(w store.Worker) *store.WorkersRegisterParams {
	return &store.WorkersRegisterParams{
		WorkerID: w.ID, Namespace: w.Namespace, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID, Version: w.Version,
		Types: w.Types, MaxConcurrency: w.MaxConcurrency, Labels: w.Labels,
	}
}

// pruneLocked forgets, on a standby, workers silent for two timeouts (the
// leader has marked them OFFLINE), those it only knew from the database in
// an earlier term, and deregistrations the leader has long written. At
// most once per timeout.
func (l *liveness) pruneLocked(now time.Time) {
	if l.leader.Load() || now.Sub(l.lastPrune) < l.cfg.WorkerTimeout {
		return
	}
	l.lastPrune = now
	old := 2 * l.cfg.WorkerTimeout
	for id, w := range l.workers {
		if w.lastBeat.IsZero() || now.Sub(w.lastBeat) > old {
			delete(l.workers, id)
		}
	}
	for id, d := range l.deregs {
		if now.Sub(d.at) > old {
			delete(l.deregs, id)
		}
	}
}

// dueLocked reports whether w's liveness should be written at the next
// flush tick.
func (l *liveness) dueLocked(w *wstate) bool {
	if w.db != dbLive || !w.heard {
		return false
	}
	return len(w.runs) > 0 || w.draining != w.persistedDraining || w.lastBeat.Sub(w.persistedAt) >= l.refresh()
}

// needsRegLocked reports whether w, heard and alive, is not known live in
// the database. A dead one is left to the death pass.
func (l *liveness) needsRegLocked(w *wstate, now time.Time) bool {
	if w.db == dbLive || w.rejected || w.lastBeat.IsZero() {
		return false
	}
	return !l.natsUp || l.expiryLocked(w).After(now)
}

// expiryLocked is when w is dead unless heard again.
func (l *liveness) expiryLocked(w *wstate) time.Time {
	base := w.lastBeat
	if base.Before(l.amnesty) {
		base = l.amnesty
	}
	exp := base.Add(l.cfg.WorkerTimeout)
	if w.checkAt.After(exp) {
		exp = w.checkAt
	}
	return exp
}
