package reaper

import (
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
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
func (r *Reaper) askNeededLocked(w *wstate, now time.Time) bool {
	return r.natsUp && !w.rejected && incompleteLocked(w) && !w.lastBeat.IsZero() && r.expiryLocked(w).After(now)
}

// askDueLocked reports whether w should be asked now.
func (r *Reaper) askDueLocked(w *wstate, now time.Time) bool {
	return r.askNeededLocked(w, now) && !w.askAt.After(now)
}

type notice struct {
	ns  string
	id  uuid.UUID
	ask bool
}

// notify publishes what is due of the leader's acknowledgements, asks and
// announcement.
func (r *Reaper) notify() {
	now := r.cfg.Clock.Now()
	var out []notice
	r.mu.Lock()
	announce := r.announce && r.natsUp
	if announce {
		r.announce = false
	}
	for _, w := range r.workers {
		if ackDueLocked(w) {
			w.ackDue = false
			out = append(out, notice{ns: w.ns, id: w.id})
		}
		if r.askDueLocked(w, now) {
			w.askWait = min(max(2*w.askWait, askFirst), askMax)
			w.askAt = now.Add(w.askWait)
			out = append(out, notice{ns: w.ns, id: w.id, ask: true})
		}
	}
	r.mu.Unlock()
	if announce {
		if r.publish(protocol.SubjectReaperUp, &protocol.ReaperUp{ReaperID: r.id}) {
			r.c.announces.Add(1)
		}
	}
	for _, n := range out {
		if !r.publish(protocol.SubjectRegistration(n.ns, n.id), &protocol.RegistrationNotice{Namespace: n.ns, WorkerID: n.id, Ask: n.ask}) {
			continue
		}
		if n.ask {
			r.c.asks.Add(1)
			r.log.Debug("worker asked to register", "worker_id", n.id, "ns", n.ns)
		} else {
			r.c.acks.Add(1)
		}
	}
}

// publish sends m on subject, and reports whether it went out.
func (r *Reaper) publish(subject string, m protocol.Message) bool {
	data, err := protocol.Encode(m)
	if err == nil {
		err = r.nc.Publish(subject, data)
	}
	if err != nil {
		r.log.Warn("not sent", "subject", subject, "err", err)
		return false
	}
	return true
}
