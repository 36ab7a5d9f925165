package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// A worker's work request is parked in one dispatcher, the one the worker
// addressed it to (route.go), or the one the NATS queue group chose when
// the worker knew of none; if that dispatcher dies, its parked requests
// die with it and nothing answers. So the worker watches the dispatchers:
// it renews its request at once when the dispatcher holding it (any, for
// a request the queue group placed) falls silent
// (protocol.BeaconSilence), says it leaves or says it lost requests, and
// when the relay changes and the request's dispatcher ran the old one or
// is no longer heard (beacons name the relay their dispatcher runs,
// relay.up the new one): the relay moves within milliseconds when the
// dispatcher that ran it dies. The renewal goes to a live dispatcher,
// which parks it without a query when it knows the queue is empty.
//
// A worker that starts, or reconnects, has not heard the dispatchers yet:
// one that took its first request and died before its next beacon would
// go unnoticed. So before that request, the worker probes: every
// dispatcher answers with its beacon.
//
// A worker that starts before every dispatcher (compose starts it once
// NATS is up; a whole cluster restarts) sends its first request to no
// one, and NATS does not answer "no responders", since the reaper
// listens to work requests too: the request would wait for its renewal
// time (30 s by default) while runs are due. Only dispatchers listen to
// probes, so the probe does get "no responders" then: the requests sent
// from then until the worker hears a dispatcher are blind, and the one
// outstanding is sent again when it first hears one (a dispatcher beacons
// only once it takes work requests). Only the probe's answer makes a
// request blind: when dispatchers are up their beacons answer instead,
// and renewing the request would only have its dispatcher refuse a
// delivery already on its way.
//
// A worker that reconnects, to another node of a NATS cluster say, sends
// its request to the queue group until it hears a dispatcher again, and
// the node it left may have frozen or been cut off from the others: they
// then still count the subscriptions it held as the queue group's members
// (those of a dispatcher that was connected to it, and has since moved)
// until its routes time out, minutes with nats-server's defaults, and
// pick one of them now and then. A request that went there waits, the
// dispatchers still beaconing, for its renewal time. So a request sent
// after a reconnect and before a dispatcher is heard is blind too, and
// sent again, addressed, when the first one is.
//
// A dispatcher that falls silent may be frozen rather than dead (SIGSTOP,
// a paused VM): its kernel keeps its NATS session, so it stays in the
// dispatchers' queue group until NATS closes it for unanswered PINGs
// (natsutil.StaleClientBound after it froze, on servers with Kagzi's
// pings; minutes with nats-server's defaults). A renewal the worker
// addresses goes elsewhere at once; one it had to leave to the queue
// group may land on the frozen dispatcher again, so if it is still silent
// after that bound, the worker renews once more.

// liveness is what the worker knows of the dispatchers.
type liveness struct {
	// inbox receives the answers to the worker's probes.
	inbox string
	mu    sync.Mutex
	heard map[uuid.UUID]heardDispatcher
	// suspects are the dispatchers that fell silent, with when to renew
	// again if they are still silent: NATS has evicted them by then, had
	// they frozen.
	suspects map[uuid.UUID]time.Time
	// relay is the last relay heard of ("": none yet).
	relay string
	// unanswered: the last probe reached no dispatcher, and none was
	// heard since.
	unanswered bool
	// rejoined: the connection came back (to another node of a cluster,
	// say) and no dispatcher was heard since.
	rejoined bool
	// avoid holds the dispatchers that let a round trip time out, until
	// when the worker sends them nothing it can send elsewhere (route.go).
	avoid map[uuid.UUID]time.Time
	// flights are the round trips in flight to each addressed dispatcher,
	// cancelled when it falls silent (route.go).
	flights map[uuid.UUID]map[*flight]struct{}
}

type heardDispatcher struct {
	at       time.Time
	interval time.Duration
	// binary: its beacon said it reads binary messages.
	binary bool
	// direct: it takes messages addressed to it (route.go).
	direct bool
	// relay is the relay it said it runs, if any.
	relay string
}

// encoding is the encoding of the worker's work requests and reports:
// binary once every dispatcher heard reads it, JSON while one does not
// (an older version, during an upgrade) or none was heard.
func (l *liveness) encoding() protocol.Encoding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.encodingLocked()
}

func (l *liveness) encodingLocked() protocol.Encoding {
	if len(l.heard) == 0 {
		return protocol.JSON
	}
	for _, h := range l.heard {
		if !h.binary {
			return protocol.JSON
		}
	}
	return protocol.Binary
}

// subscribeLiveness subscribes to dispatcher beacons, the answers to its
// probes and relay announcements, and probes; it precedes the first work
// request on the connection.
func (w *Worker) subscribeLiveness() (chan *nats.Msg, []*nats.Subscription, error) {
	ch := make(chan *nats.Msg, 1024)
	var subs []*nats.Subscription
	w.live.inbox = w.nc.NewInbox()
	for _, subj := range []string{protocol.SubjectDispatcherBeacon, protocol.SubjectRelayUp, w.live.inbox} {
		sub, err := w.nc.ChanSubscribe(subj, ch)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, nil, err
		}
		subs = append(subs, sub)
	}
	w.relisten(false)
	w.probe()
	return ch, subs, nil
}

// relisten forgets the dispatchers heard: after a reconnect, beacons were
// missed, not absent; the probe that follows hears the live ones again.
// Suspects stay: a frozen dispatcher stays in the queue group whatever
// this worker's connection did. rejoined says the connection came back
// (see liveness.rejoined).
func (w *Worker) relisten(rejoined bool) {
	l := &w.live
	l.mu.Lock()
	l.initRoutesLocked()
	// What was in flight on the old connection may have been lost with it:
	// send it again now rather than at its time-out.
	for id := range l.flights {
		l.groundedLocked(id)
	}
	l.heard = map[uuid.UUID]heardDispatcher{}
	l.rejoined = rejoined
	if l.suspects == nil {
		l.suspects = map[uuid.UUID]time.Time{}
	}
	l.mu.Unlock()
}

// probe asks every dispatcher for its beacon. It goes out on the
// connection before the work request that follows, so a dispatcher
// receives it before it can receive that request.
func (w *Worker) probe() {
	data, err := protocol.Encode(&protocol.DispatcherProbe{WorkerID: w.cfg.WorkerID})
	if err == nil {
		err = w.nc.PublishRequest(protocol.SubjectDispatcherProbe, w.live.inbox, data)
	}
	if err != nil {
		w.log.Warn("dispatcher probe not sent", "err", err)
	}
}

// livenessLoop follows beacons and relay announcements and renews the
// outstanding request when the dispatcher holding it may be gone.
func (w *Worker) livenessLoop(ctx context.Context, ch chan *nats.Msg) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if next := w.nextCheck(); next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			w.onLiveness(m)
		case <-timer.C:
			// One renewal for both: a second would only supersede the first.
			now := time.Now()
			silent, still := w.forgetSilent(now), w.stillSilent(now)
			switch {
			case len(silent) > 0:
				// A request addressed to another dispatcher is where it
				// was; one given to the queue group may be in any.
				w.renewRequestIf(func(o *outstanding) bool { return o.target == uuid.Nil || slices.Contains(silent, o.target) },
					"dispatcher fell silent", "dispatchers", len(silent))
			case still > 0:
				w.renewRequestIf(func(o *outstanding) bool { return o.target == uuid.Nil },
					"dispatcher still silent after NATS would have evicted it", "dispatchers", still)
			}
			if len(silent) > 0 || still > 0 {
				w.checkServer()
			}
		}
	}
}

// checkServer asks the NATS server for a round trip when every dispatcher
// the worker heard fell silent: either they all went away, or the server
// this worker is connected to did (frozen, or cut off), and its
// connection would notice only at its own pings — every 2 minutes with
// nats.go's defaults, which a user's connection may well have. A server
// that does not answer within a beacon interval is left: the connection
// reconnects, to another node of a cluster where it has one, and the
// worker registers, probes and asks for work again there (onReconnect).
func (w *Worker) checkServer() {
	l := &w.live
	l.mu.Lock()
	alone := len(l.heard) == 0
	l.mu.Unlock()
	if !alone || !w.nc.IsConnected() {
		return
	}
	if err := w.nc.FlushTimeout(protocol.DefaultBeaconInterval); err == nil || errors.Is(err, nats.ErrConnectionClosed) {
		return
	}
	w.stats.serverSilent.Add(1)
	w.log.Warn("NATS server silent: reconnecting", "server", w.nc.ConnectedUrlRedacted())
	if err := w.nc.ForceReconnect(); err != nil {
		w.log.Warn("reconnect", "err", err)
	}
}

func (w *Worker) onLiveness(m *nats.Msg) {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// The probe reached no dispatcher: nor did the request sent
		// with it, unless a dispatcher came up in between.
		l := &w.live
		l.mu.Lock()
		none := len(l.heard) == 0
		l.unanswered = none
		l.mu.Unlock()
		if none {
			w.markBlind()
		} else {
			w.renewRequest("probe reached no dispatcher before one came up")
		}
		return
	}
	if m.Subject == protocol.SubjectRelayUp {
		var up protocol.RelayUp
		if err := protocol.Decode(m.Data, &up); err != nil {
			w.malformed("relay up", m.Subject, err)
			return
		}
		w.sawRelay(up.RelayID)
		return
	}
	var b protocol.DispatcherBeacon
	if err := protocol.Decode(m.Data, &b); err != nil {
		w.malformed("dispatcher beacon", m.Subject, err)
		return
	}
	l := &w.live
	l.mu.Lock()
	// The first dispatcher heard since a probe reached none.
	firstSinceUnanswered := false
	wasBinary := l.encodingLocked() == protocol.Binary
	if b.Leaving {
		delete(l.heard, b.DispatcherID)
		l.groundedLocked(b.DispatcherID)
	} else {
		l.heard[b.DispatcherID] = heardDispatcher{at: time.Now(), interval: b.Interval(),
			binary: m.Header.Get(protocol.HeaderEncodings) == protocol.EncodingsBinary, direct: m.Header.Get(protocol.HeaderDirect) == "1", relay: b.RelayID}
		firstSinceUnanswered, l.unanswered, l.rejoined = l.unanswered || l.rejoined, false, false
	}
	// Alive after all (it was slow, or resumed), or gone for good after
	// leaving its queue group: either way no request is stuck in it.
	delete(l.suspects, b.DispatcherID)
	// A dispatcher that reads JSON only joined: the binary request may
	// have reached it, and been dropped there, before its beacon came.
	toJSON := wasBinary && l.encodingLocked() == protocol.JSON
	l.mu.Unlock()
	heldThere := func(o *outstanding) bool { return o.target == uuid.Nil || o.target == b.DispatcherID }
	switch {
	case b.Leaving:
		w.renewRequestIf(heldThere, "dispatcher left", "dispatcher_id", b.DispatcherID)
	case b.Renew:
		w.renewRequestIf(heldThere, "dispatcher lost work requests", "dispatcher_id", b.DispatcherID)
	case firstSinceUnanswered:
		w.renewRequestIf(func(o *outstanding) bool { return o.blind }, "first dispatcher heard", "dispatcher_id", b.DispatcherID)
	case toJSON:
		w.renewRequest("dispatcher reads JSON only", "dispatcher_id", b.DispatcherID)
	}
	w.sawRelay(b.RelayID)
}

// blind reports whether a request sent now may reach no dispatcher
// without the worker learning of it: the last probe reached none, or the
// connection came back, and none was heard since.
func (l *liveness) blind() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unanswered || l.rejoined
}

// markBlind marks the outstanding request blind.
func (w *Worker) markBlind() {
	w.mu.Lock()
	if w.out != nil {
		w.out.blind = true
	}
	w.mu.Unlock()
}

// sawRelay notes the relay id a beacon or relay.up named, and renews the
// request if it differs from the last one: the relay moves when the
// dispatcher running it dies (its session's lock goes with it), and that
// dispatcher may have held the request. The first relay heard of, or the
// same one announcing itself again, changes nothing.
func (w *Worker) sawRelay(id string) {
	if id == "" {
		return
	}
	l := &w.live
	l.mu.Lock()
	last := l.relay
	l.relay = id
	// The dispatchers that ran the old relay, as far as their last beacons
	// said; one that died said so no more.
	ranOld := map[uuid.UUID]bool{}
	for d, h := range l.heard {
		if h.relay == last {
			ranOld[d] = true
		}
	}
	l.mu.Unlock()
	if last != "" && last != id {
		w.renewRequestIf(func(o *outstanding) bool {
			_, alive := w.heardNow(o.target)
			return o.target == uuid.Nil || ranOld[o.target] || !alive
		}, "relay changed", "relay_id", id)
	}
}

// nextCheck is when the first dispatcher heard would count as silent, or
// the first suspect is due, whichever comes first (zero: none).
func (w *Worker) nextCheck() time.Time {
	l := &w.live
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	for _, h := range l.heard {
		if at := h.at.Add(protocol.BeaconSilence(h.interval)); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for _, at := range l.suspects {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// forgetSilent forgets the dispatchers silent at now, cancels the round
// trips in flight to them, suspects them, and returns them. A dispatcher
// is suspected until NATS has evicted it, had it frozen and had the
// server Kagzi's pings: StaleClientBound after its next beacon was due, by
// which time it had frozen; a suspect due already (long beacon intervals)
// was evicted before this renewal.
func (w *Worker) forgetSilent(now time.Time) []uuid.UUID {
	l := &w.live
	l.mu.Lock()
	defer l.mu.Unlock()
	var silent []uuid.UUID
	for id, h := range l.heard {
		if !now.Before(h.at.Add(protocol.BeaconSilence(h.interval))) {
			if w.stalled(h.at, h.interval) {
				// The worker itself stalled (frozen, paused) since it
				// heard this dispatcher: the beacons it missed wait unread
				// in its socket. It listens for a whole silence again.
				h.at = now
				l.heard[id] = h
				continue
			}
			delete(l.heard, id)
			if again := h.at.Add(h.interval + natsutil.StaleClientBound); again.After(now) {
				l.suspects[id] = again
			}
			silent = append(silent, id)
		}
	}
	l.groundedLocked(silent...)
	return silent
}

// heardNow returns what the worker heard of dispatcher, if it is live.
func (w *Worker) heardNow(dispatcher uuid.UUID) (heardDispatcher, bool) {
	l := &w.live
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.heard[dispatcher]
	return h, ok
}

// stillSilent forgets the suspects due at now and returns how many.
func (w *Worker) stillSilent(now time.Time) int {
	l := &w.live
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, at := range l.suspects {
		if !now.Before(at) {
			delete(l.suspects, id)
			n++
		}
	}
	return n
}

// renewRequest drops the outstanding work request, which a dispatcher that
// went away may have held, so the request loop sends a new one now. A
// delivery still on its way for the old one is refused and released.
func (w *Worker) renewRequest(why string, args ...any) { w.renewRequestIf(nil, why, args...) }

// renewRequestIf is renewRequest for an outstanding request that stale
// (nil: any) says must go: a request sent since is left alone.
func (w *Worker) renewRequestIf(stale func(*outstanding) bool, why string, args ...any) {
	w.mu.Lock()
	renew := w.out != nil && !w.draining && (stale == nil || stale(w.out))
	if renew {
		w.out = nil
	}
	w.mu.Unlock()
	if !renew {
		return
	}
	w.stats.renewals.Add(1)
	w.log.Info("renewing work request", append([]any{"reason", why}, args...)...)
	w.poke()
}
