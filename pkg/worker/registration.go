package worker

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// A worker's registration (its types, slots, host and pid) reaches the
// reapers once, when it starts or reconnects; its heartbeats do not carry
// it. A registration no reaper wrote (none ran yet: compose starts
// workers as soon as NATS is up; the leader was being replaced; the
// message was lost) would leave the worker's row without its types, and a
// start that requires a worker of one of them would be refused. So the
// worker repeats its registration until the acting reaper acknowledges
// it (protocol.RegistrationNotice), at once when a reaper announces that
// it took over (protocol.ReaperUp) or asks for it, and otherwise on
// heartbeat ticks with a backoff of 1, 2, 4 and then reregisterEvery
// heartbeats. An acknowledged worker repeats nothing: a reaper that
// hears its heartbeats without knowing its registration asks for it.
// Beside a reaper of an earlier version, which acknowledges nothing, the
// worker repeats its registration every reregisterEvery heartbeats, as
// workers did before acknowledgements.

// reregisterEvery bounds the backoff of an unacknowledged registration,
// in heartbeats: at the default interval (2 s), every 10 s.
const reregisterEvery = 5

// regState is what the worker knows of its registration; guarded by
// Worker.mu.
type regState struct {
	// acked: the acting reaper acknowledged the registration sent last
	// (or one sent since the last reconnect).
	acked bool
	// left is the heartbeats until the next repetition, and gap the
	// heartbeats between that one and the one after.
	left, gap int
}

// subscribeRegistration subscribes to the worker's registration notices
// and to reaper announcements; it precedes the registration.
func (w *Worker) subscribeRegistration() (chan *nats.Msg, []*nats.Subscription, error) {
	ch := make(chan *nats.Msg, 64)
	var subs []*nats.Subscription
	for _, subj := range []string{protocol.SubjectRegistration(w.cfg.Namespace, w.cfg.WorkerID), protocol.SubjectReaperUp} {
		sub, err := w.nc.ChanSubscribe(subj, ch)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, nil, err
		}
		subs = append(subs, sub)
	}
	return ch, subs, nil
}

// sendRegistration sends the registration and waits for its acknowledgement
// again; fresh (on start, after a reconnect) restarts the backoff.
func (w *Worker) sendRegistration(fresh bool) error {
	w.mu.Lock()
	if fresh || w.regs.gap == 0 {
		w.regs.gap = 1
	}
	w.regs.acked = false
	w.regs.left = w.regs.gap
	w.regs.gap = min(2*w.regs.gap, reregisterEvery)
	w.mu.Unlock()
	w.stats.registrations.Add(1)
	return w.publishRegister()
}

// registerAgain repeats the registration unless it was acknowledged or
// the worker drains (its deregistration follows: a registration must not
// bring it back). A repetition the backoff times is logged at debug level
// only: beside a reaper of an earlier version it comes every
// reregisterEvery heartbeats.
func (w *Worker) registerAgain(why string, news bool) {
	w.mu.Lock()
	skip := w.regs.acked || w.draining
	w.mu.Unlock()
	if skip {
		return
	}
	if news {
		w.log.Info("registering again", "reason", why)
	} else {
		w.log.Debug("registering again", "reason", why)
	}
	if err := w.sendRegistration(false); err != nil {
		w.log.Warn("register not sent", "err", err)
	}
}

// registrationTick counts a heartbeat down to the next repetition of an
// unacknowledged registration.
func (w *Worker) registrationTick() {
	w.mu.Lock()
	due := false
	if !w.regs.acked && !w.draining {
		w.regs.left--
		due = w.regs.left <= 0
	}
	w.mu.Unlock()
	if due {
		w.registerAgain("not acknowledged", false)
	}
}

// registrationLoop follows registration notices and reaper announcements.
func (w *Worker) registrationLoop(ctx context.Context, ch chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			w.onRegistrationNews(m)
		}
	}
}

func (w *Worker) onRegistrationNews(m *nats.Msg) {
	if m.Subject == protocol.SubjectReaperUp {
		var up protocol.ReaperUp
		if err := protocol.Decode(m.Data, &up); err != nil {
			w.malformed("reaper up", m.Subject, err)
			return
		}
		w.registerAgain("a reaper took over", true)
		return
	}
	var n protocol.RegistrationNotice
	if err := protocol.Decode(m.Data, &n); err != nil {
		w.malformed("registration notice", m.Subject, err)
		return
	}
	if n.WorkerID != w.cfg.WorkerID || n.Namespace != w.cfg.Namespace {
		w.log.Warn("registration notice for another worker ignored", "for", n.WorkerID, "ns", n.Namespace)
		return
	}
	if !n.Ask {
		w.mu.Lock()
		w.regs.acked = true
		w.mu.Unlock()
		return
	}
	// Asked: the reaper does not know the registration, whatever an
	// earlier acknowledgement said (its row was deleted, or written from
	// heartbeats by a leader that never heard the registration).
	w.mu.Lock()
	w.regs.acked = false
	w.mu.Unlock()
	w.registerAgain("a reaper asked", true)
}
