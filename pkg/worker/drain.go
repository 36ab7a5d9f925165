package worker

import (
	"context"
	"errors"
	"github.com/kagzi/kagzi/internal/wfexec"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// drainGrace is how long a drain waits for runs it cancelled to return
// before it releases them anyway.
const drainGrace = 2 * time.Second

// drain is Stop's graceful part, run while the loops go on: it stops
// asking for work and waits for in-flight runs up to the drain timeout,
// then releases those still held. Start's ctx may be gone: every wait
// here is bounded by a context derived from base (Start's ctx without its
// cancellation).
func (w *Worker) drain() {
	w.mu.Lock()
	s, base := w.sess, w.base
	w.draining = true
	w.out = nil
	idle := make(chan struct{})
	if w.active == 0 && w.ending == 0 {
		close(idle)
	} else {
		w.idle = idle
	}
	held, ending := w.active, w.ending
	w.mu.Unlock()
	// Stopping already: a later cancellation of Start's ctx or drain
	// request has nothing left to trigger.
	s.unwatch()
	s.forget()
	s.stopRequests()
	w.log.Info("draining", "runs", held, "end_reports", ending, "timeout", w.cfg.DrainTimeout)
	w.sendHeartbeat()

	waitCtx, cancelWait := context.WithTimeout(base, w.cfg.DrainTimeout)
	select {
	case <-idle:
	case <-waitCtx.Done():
		w.releaseHeld(base)
	}
	cancelWait()
}

// leave follows the hard stop: with the loops over, nothing can speak for
// the worker after its deregistration (a heartbeat or a register after a
// reconnect would bring it back). It unsubscribes, deregisters and closes
// done.
func (w *Worker) leave() {
	w.mu.Lock()
	s, base := w.sess, w.base
	w.mu.Unlock()
	s.unsubscribe()
	w.nc.RemoveStatusListener(s.status)
	w.pulse.Stop()

	ctx, cancel := context.WithTimeout(base, w.cfg.ReportTimeout)
	defer cancel()
	err := w.publish(protocol.SubjectWorkerDeregister(w.cfg.Namespace), &protocol.WorkerDeregister{
		WorkerID:  w.cfg.WorkerID,
		Namespace: w.cfg.Namespace,
	})
	if err == nil {
		err = w.nc.FlushWithContext(ctx)
	}
	if err != nil {
		w.log.Warn("deregister not sent", "err", err)
	}
	w.mu.Lock()
	w.state = stateStopped
	w.mu.Unlock()
	w.log.Info("worker stopped")
	close(w.done)
}

// releaseHeld cancels the runs still held after the drain timeout and
// gives them back to the engine with one run_release report.
func (w *Worker) releaseHeld(base context.Context) {
	w.mu.Lock()
	held := make([]*runState, 0, len(w.runs))
	for _, rs := range w.runs {
		if !rs.abandoned {
			held = append(held, rs)
		}
	}
	w.mu.Unlock()
	for _, rs := range held {
		rs.cancel(workflow.ErrDraining)
	}

	grace, cancelGrace := context.WithTimeout(base, drainGrace)
	defer cancelGrace()
	var items []protocol.ReportItem
	for _, rs := range held {
		select {
		case <-rs.done:
			// Release only what ended because of the drain: a run that
			// completed, failed or suspended in the meantime is recorded.
			if rs.outcome.Status != wfexec.OutcomeAbandoned || !errors.Is(rs.outcome.Err, workflow.ErrDraining) {
				continue
			}
		case <-grace.Done():
			// The workflow ignores its context: release it anyway; its
			// goroutine may not report any more (its context is done).
			w.mu.Lock()
			rs.abandoned = true
			w.mu.Unlock()
			rs.log.Warn("run did not return after cancellation: released, goroutine left behind")
		}
		items = append(items, protocol.ReportItem{
			Kind:       protocol.ReportRunRelease,
			RunID:      rs.run.RunID,
			LeaseToken: rs.run.LeaseToken,
		})
	}
	for len(items) > 0 {
		batch := items[:min(len(items), protocol.MaxReportItems)]
		items = items[len(batch):]
		ctx, cancel := context.WithTimeout(base, w.cfg.ReportTimeout)
		results, err := w.sendReport(ctx, batch)
		cancel()
		if err != nil {
			w.log.Warn("release not recorded: the reaper will recover the runs", "runs", len(batch), "err", err)
			continue
		}
		for i, r := range results {
			if r.Code == protocol.ResultOK {
				w.stats.released.Add(1)
			} else {
				w.log.Info("release not applied", "run_id", batch[i].RunID, "code", r.Code, "message", r.Message)
			}
		}
	}
}
