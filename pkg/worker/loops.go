package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// publishRetry is how soon a work request that could not be published is
// tried again.
const publishRetry = time.Second

// stallLimit is the longest the worker may have stalled (frozen by
// SIGSTOP, a paused VM, a long pause) since it sent a work request and
// still accept a delivery for it. A dispatcher waits for the ack
// (KAGZI_DELIVERY_TIMEOUT, 5 s by default) and then releases the runs,
// which another worker may be running already; a worker that resumes
// finds such deliveries in its socket and would run their steps a second
// time. A delivery does not say how long it waited, so the worker refuses
// every delivery for a request older than such a stall: one that was
// still valid is released at once and claimed again, which costs a round
// trip. A second is well under the delivery timeout and well above the
// scheduling noise of a loaded machine.
const stallLimit = time.Second

// whyStalled is the reason of a delivery refused for a stall.
const whyStalled = "the worker stalled since it asked for work: the dispatcher may have released the runs"

// requestLoop keeps at most one work request outstanding while the worker
// has free slots, renewing it when it was not answered in time.
func (w *Worker) requestLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if wait := w.maybeRequest(); wait > 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
	}
}

// maybeRequest sends a work request if none is outstanding (or the
// outstanding one expired) and slots are free. It returns when to look
// again, or 0 to wait for a poke.
func (w *Worker) maybeRequest() time.Duration {
	now := time.Now()
	blind := w.live.blind()
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		return 0
	}
	free := w.cfg.MaxConcurrency - w.active
	if w.out != nil && now.Before(w.out.deadline) && !topUp(w.out.credits, free) {
		d := w.out.deadline.Sub(now)
		w.mu.Unlock()
		return d
	}
	w.out = nil
	if free <= 0 {
		w.mu.Unlock()
		return 0
	}
	w.seq++
	req := protocol.WorkRequest{
		WorkerID:  w.cfg.WorkerID,
		Namespace: w.cfg.Namespace,
		Queue:     w.cfg.Queue,
		Credits:   free,
		Types:     w.typeList,
		Seq:       w.seq,
		WaitMS:    w.cfg.WaitTimeout.Milliseconds(),
	}
	subject, target := w.live.route(protocol.SubjectWork(w.cfg.Namespace, w.cfg.Queue))
	out := &outstanding{seq: w.seq, credits: free, sent: now, deadline: now.Add(w.cfg.WaitTimeout + w.margin), blind: blind, target: target}
	w.out = out
	w.mu.Unlock()

	data, err := protocol.EncodeAs(&req, w.live.encoding())
	if err == nil {
		err = w.nc.PublishRequest(subject, w.inbox, data)
	}
	if err != nil {
		w.log.Warn("work request not sent", "seq", req.Seq, "err", err)
		w.mu.Lock()
		if w.out == out {
			out.deadline = now.Add(publishRetry)
		}
		w.mu.Unlock()
		return publishRetry
	}
	w.stats.requests.Add(1)
	// out.deadline may be moved by requestSoon; read it under the lock.
	w.mu.Lock()
	wait := out.deadline.Sub(now)
	w.mu.Unlock()
	return wait
}

// topUp reports whether a worker with free slots should replace its
// outstanding request for credits with a larger one. Slots free up one by
// one as runs end; without a top-up, a request sent when one slot was free
// keeps the worker at one run per round trip while many slots stand empty.
// The new request supersedes the old at the dispatcher; a delivery already
// on its way for the old one is refused and its runs released, so top-ups
// are kept to doublings (a few per refill).
func topUp(credits, free int) bool {
	return free >= 2*credits && free-credits >= 4
}

// nextMsg waits for the next message of sub; ok is false when the loop
// must end.
func (w *Worker) nextMsg(ctx context.Context, sub *nats.Subscription) (*nats.Msg, bool) {
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err == nil {
			return msg, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			w.log.Error("subscription ended", "subject", sub.Subject, "err", err)
			return nil, false
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// The work request reached no dispatcher (none is up yet, or all
			// restarted): ask again soon instead of at the renewal time.
			w.requestSoon()
			continue
		}
		if errors.Is(err, nats.ErrSlowConsumer) {
			w.drops.Check(sub)
			continue
		}
		w.log.Warn("subscription error", "subject", sub.Subject, "err", err)
	}
}

// noDispatcherRetry is how soon a work request that reached no dispatcher
// is sent again.
const noDispatcherRetry = 250 * time.Millisecond

// requestSoon makes the outstanding request expire after noDispatcherRetry,
// so the request loop sends a new one then.
func (w *Worker) requestSoon() {
	w.mu.Lock()
	if w.out != nil {
		if d := time.Now().Add(noDispatcherRetry); d.Before(w.out.deadline) {
			w.out.deadline = d
		}
	}
	w.mu.Unlock()
	w.poke()
}

// deliveryLoop answers deliveries on the worker's inbox. After accepting
// runs it publishes a heartbeat listing them before it starts them: the
// reaper counts a lost attempt of a run only once a heartbeat listed it (a
// run claimed for a worker that never got it is retried without counting
// one), so a run that crashes its worker at once must be announced at
// once, not at the next tick. Deliveries that arrived together share one
// heartbeat.
func (w *Worker) deliveryLoop(ctx context.Context, sub *nats.Subscription) {
	var started []*runState
	for {
		msg, ok := w.nextMsg(ctx, sub)
		if !ok {
			w.startRuns(started)
			return
		}
		var received int64
		if w.cfg.DispatchHops != nil {
			received = time.Now().UnixNano()
		}
		runs := w.handleDelivery(msg)
		if received != 0 {
			for _, rs := range runs {
				w.cfg.DispatchHops(rs.run.RunID, hops.Received, received)
			}
		}
		started = append(started, runs...)
		if n, _, err := sub.Pending(); err == nil && n > 0 {
			continue
		}
		if len(started) > 0 {
			w.sendHeartbeat()
			w.startRuns(started)
			started = started[:0]
		}
	}
}

// startRuns starts the executions of accepted runs. A run's goroutine is
// the run's own (rs.done), not the Base's: the drain waits for it only up
// to its timeout and grace, and Stop must not wait for a workflow that
// ignores its cancellation.
func (w *Worker) startRuns(runs []*runState) {
	if len(runs) == 0 {
		return
	}
	// The request loop first: the goroutine made runnable last runs
	// first once this one waits, and that should be a run, not the next
	// work request.
	w.poke()
	for _, rs := range runs {
		go w.execute(rs)
	}
}

// handleDelivery acknowledges a delivery and returns the runs it accepted
// (holding their slots), for the caller to start.
func (w *Worker) handleDelivery(msg *nats.Msg) []*runState {
	var d protocol.Delivery
	err := protocol.Decode(msg.Data, &d)
	if err == nil && msg.Reply == "" {
		err = fmt.Errorf("%w: delivery without a reply subject", protocol.ErrInvalid)
	}
	if err != nil {
		w.malformed("delivery", msg.Subject, err)
		w.ack(msg, false)
		return nil
	}
	started, why := w.accept(&d)
	if why != "" {
		w.stats.refused.Add(1)
		w.ack(msg, false)
		w.log.Info("delivery refused", "seq", d.Seq, "runs", len(d.Runs), "reason", why)
		if why == whyStalled {
			w.stats.refusedStalled.Add(1)
			// The delivery consumed the request at its dispatcher.
			w.renewRequestIf(w.stalledSinceSent, "worker stalled")
		}
		return nil
	}
	w.stats.accepted.Add(1)
	w.ack(msg, true)
	return started
}

// accept decides on a delivery. If it is accepted (why == ""), the
// outstanding request is consumed and the returned runs hold their slots;
// the caller starts them.
func (w *Worker) accept(d *protocol.Delivery) (runs []*runState, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case d.WorkerID != w.cfg.WorkerID:
		return nil, fmt.Sprintf("addressed to worker %s", d.WorkerID)
	case w.draining:
		return nil, "draining"
	case w.out == nil:
		return nil, "no work request outstanding"
	case d.Seq != w.out.seq:
		return nil, fmt.Sprintf("seq %d is not the outstanding request's %d", d.Seq, w.out.seq)
	case len(d.Runs) > w.out.credits:
		return nil, fmt.Sprintf("%d runs exceed the request's %d credits", len(d.Runs), w.out.credits)
	}
	seen := make(map[uuid.UUID]bool, len(d.Runs))
	for i := range d.Runs {
		r := &d.Runs[i]
		if r.Namespace != w.cfg.Namespace || r.Queue != w.cfg.Queue {
			return nil, fmt.Sprintf("run %s is in %s/%s", r.RunID, r.Namespace, r.Queue)
		}
		if seen[r.RunID] {
			return nil, fmt.Sprintf("run %s delivered twice", r.RunID)
		}
		seen[r.RunID] = true
	}
	// Last, so that only a delivery the worker would have run counts as
	// refused for a stall.
	if w.stalledSinceSent(w.out) {
		return nil, whyStalled
	}
	sent := w.out.sent
	w.out = nil
	runs = make([]*runState, len(d.Runs))
	for i := range d.Runs {
		rs := w.newRunState(&d.Runs[i])
		rs.limits = d.Limits
		rs.held(sent)
		if old := w.runs[rs.run.RunID]; old != nil {
			// Claimed again under a newer lease: the old execution's
			// lease is gone.
			old.abandoned = true
			old.cancel(workflow.ErrLeaseLost)
		}
		w.runs[rs.run.RunID] = rs
		w.active++
		runs[i] = rs
	}
	w.stats.started.Add(uint64(len(runs)))
	return runs, ""
}

func (w *Worker) ack(msg *nats.Msg, accepted bool) {
	if msg.Reply == "" {
		return
	}
	// In the delivery's encoding: the dispatcher reads what it writes.
	data, err := protocol.EncodeAs(&protocol.DeliveryAck{Accepted: accepted}, protocol.EncodingOf(msg.Data))
	if err == nil {
		err = msg.Respond(data)
	}
	if err != nil {
		w.log.Warn("delivery ack not sent", "accepted", accepted, "err", err)
	}
}

// cancelLoop cancels held runs on request; requestDrain stops the worker
// as Stop does (which waits for this loop, so it cannot call Stop).
func (w *Worker) cancelLoop(ctx context.Context, sub *nats.Subscription, requestDrain func()) {
	for {
		msg, ok := w.nextMsg(ctx, sub)
		if !ok {
			return
		}
		var c protocol.Cancel
		if err := protocol.Decode(msg.Data, &c); err != nil {
			w.malformed("cancel", msg.Subject, err)
			continue
		}
		if c.WorkerID != w.cfg.WorkerID {
			w.log.Warn("cancel for another worker ignored", "run_id", c.RunID, "for", c.WorkerID)
			continue
		}
		if c.Drain {
			// The engine's Stop (client.DrainWorker): the same drain as
			// the worker's own. Asked again, it is under way already.
			w.log.Info("drain requested")
			requestDrain()
			continue
		}
		if c.Terminate {
			if rs := w.abandonRun(c.RunID, workflow.ErrTerminated); rs != nil {
				rs.log.Info("run terminated")
			} else {
				w.log.Debug("termination of a run not held", "run_id", c.RunID)
			}
			continue
		}
		w.mu.Lock()
		rs := w.runs[c.RunID]
		w.mu.Unlock()
		if rs == nil {
			w.log.Debug("cancel request for a run not held", "run_id", c.RunID)
			continue
		}
		// The lease holds: the workflow sees its context cancelled and may
		// clean up before it reports its end.
		rs.softCancel(workflow.ErrCancelled)
		rs.log.Info("run asked to cancel")
	}
}

// abandonRun cancels a held run's context with cause and stops it from
// reporting or being listed in heartbeats. It returns the run, if held.
func (w *Worker) abandonRun(id uuid.UUID, cause error) *runState {
	w.mu.Lock()
	rs := w.runs[id]
	if rs != nil {
		rs.abandoned = true
	}
	w.mu.Unlock()
	if rs != nil {
		rs.cancel(cause)
	}
	return rs
}

// stalledSinceSent reports whether the worker stalled for longer than
// stallLimit since it sent the request o.
func (w *Worker) stalledSinceSent(o *outstanding) bool { return w.stalled(o.sent, stallLimit) }

// heartbeatLoop publishes liveness and held runs. Its ticks also notice
// that the worker stalled (the first tick after a resume comes at once):
// a request sent before the stall may be gone, consumed by a delivery that
// its dispatcher released for want of an ack, so it is renewed rather
// than waited on until its renewal time.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.renewRequestIf(w.stalledSinceSent, "worker stalled")
			// Until a reaper acknowledges the registration (see
			// registration.go).
			w.registrationTick()
			w.sendHeartbeat()
		}
	}
}

func (w *Worker) sendHeartbeat() {
	w.mu.Lock()
	ids := make([]uuid.UUID, 0, len(w.runs))
	for id, rs := range w.runs {
		if !rs.abandoned {
			ids = append(ids, id)
		}
	}
	draining := w.draining
	w.mu.Unlock()
	err := w.publish(protocol.SubjectWorkerHeartbeat(w.cfg.Namespace), &protocol.Heartbeat{
		WorkerID:  w.cfg.WorkerID,
		Namespace: w.cfg.Namespace,
		Queue:     w.cfg.Queue,
		Runs:      ids,
		Draining:  draining,
		SentAt:    time.Now().UTC(),
	})
	if err != nil {
		w.log.Warn("heartbeat not sent", "err", err)
	}
}

// statusLoop re-registers and renews the work request after a reconnect.
func (w *Worker) statusLoop(ctx context.Context, ch chan nats.Status) {
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-ch:
			if !ok {
				return
			}
			if st == nats.CONNECTED {
				w.onReconnect()
			}
		}
	}
}

func (w *Worker) onReconnect() {
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		return
	}
	// The outstanding request may have been lost with the connection.
	w.out = nil
	w.mu.Unlock()
	w.relisten(true)
	w.probe()
	if err := natsutil.CheckServer(w.nc); err != nil {
		w.log.Error("nats server not supported", "server", w.nc.ConnectedUrlRedacted(), "err", err)
	}
	w.log.Info("reconnected to NATS: registering again")
	if err := w.sendRegistration(true); err != nil {
		w.log.Warn("register not sent", "err", err)
	}
	w.sendHeartbeat()
	w.poke()
}
