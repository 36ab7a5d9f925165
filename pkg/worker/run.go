package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/internal/wfexec"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// errRunEnded is the cause a run's context carries once its execution
// returned.
var errRunEnded = errors.New("worker: execution ended")

// reportBackoff spaces the attempts of a report.
var reportBackoff = retry.Policy{
	MaxAttempts:        -1,
	InitialInterval:    50 * time.Millisecond,
	BackoffCoefficient: 2,
	MaxInterval:        5 * time.Second,
	Jitter:             0.2,
}

// runState is one held run.
type runState struct {
	run *protocol.DeliveredRun
	// limits are the payload limits of the delivery that brought the run.
	limits protocol.PayloadLimits
	reg    *registration // nil: type@version not registered here
	// ctx ends when the execution must be abandoned (lease lost,
	// terminated, drained, deadline); soft, derived from it, also when the
	// run is asked to cancel (the workflow handles that and reports).
	ctx        context.Context
	cancel     context.CancelCauseFunc
	soft       context.Context
	softCancel context.CancelCauseFunc
	// stopDeadline releases the run deadline's timer.
	stopDeadline context.CancelFunc
	log          *slog.Logger
	// done is closed when the execution goroutine ends; outcome is set
	// before.
	done    chan struct{}
	outcome wfexec.Outcome
	// abandoned: cancelled or lease lost; not listed in heartbeats, not
	// released by a drain. Guarded by Worker.mu.
	abandoned bool
	// endPending: the execution handed its end report to sendEnd (see
	// ReportEnd), which ends the run once it is acknowledged. Written by
	// the execution goroutine before it ends (done).
	endPending bool
	// span is the attempt's span (nil for a run not executed here); it
	// ends with the run.
	span trace.Span
	// heldAt is when the worker last sent a round trip under the run's
	// lease that found the lease held (the work request, a report, a
	// payload read): a stall since then may have cost the lease (see
	// ConfirmLease).
	heldAt atomic.Pointer[time.Time]
}

// held records that the lease held for a round trip sent at sent.
func (rs *runState) held(sent time.Time) {
	for {
		old := rs.heldAt.Load()
		if old != nil && !old.Before(sent) {
			return
		}
		if rs.heldAt.CompareAndSwap(old, &sent) {
			return
		}
	}
}

// newRunState prepares a delivered run; w.mu is held.
func (w *Worker) newRunState(r *protocol.DeliveredRun) *runState {
	ctx, cancel := context.WithCancelCause(w.base)
	stopDeadline := context.CancelFunc(func() {})
	if r.DeadlineAt != nil {
		ctx, stopDeadline = context.WithDeadline(ctx, *r.DeadlineAt)
	}
	reg := w.types[typeKey(r.Type, r.Version)]
	if reg == nil && r.Version == "" {
		// Unpinned (the engine pins runs as it claims them, but a run
		// delivered unpinned runs as the version it would be pinned to:
		// the type's first listed).
		for _, tv := range w.typeList {
			if tv.Type == r.Type {
				reg = w.types[typeKey(tv.Type, tv.Version)]
				break
			}
		}
	}
	soft, softCancel := context.WithCancelCause(ctx)
	if r.CancelRequestedAt != nil {
		softCancel(workflow.ErrCancelled)
	}
	return &runState{
		run:          r,
		reg:          reg,
		ctx:          ctx,
		cancel:       cancel,
		soft:         soft,
		softCancel:   softCancel,
		stopDeadline: stopDeadline,
		log: w.log.With("run_id", r.RunID.String(), "workflow_type", r.Type,
			"attempt", r.Attempt),
		done: make(chan struct{}),
	}
}

// execute runs one delivered run in its own goroutine.
func (w *Worker) execute(rs *runState) {
	if w.cfg.DispatchHops != nil {
		w.cfg.DispatchHops(rs.run.RunID, hops.Executing, time.Now().UnixNano())
	}
	defer w.finish(rs)
	rep := &runReporter{w: w, rs: rs}
	if rs.reg == nil {
		rs.outcome = w.failUnregistered(rs, rep)
		return
	}
	rs.log.Debug("run started", "replayed_steps", len(rs.run.Steps))
	// The attempt joins the run's trace as a child of the dispatch span
	// that delivered it (of the run's root when the dispatcher traces
	// nothing); the workflow's steps are children of the attempt.
	// kagzi.execution counts the run's deliveries (the lease token), so a
	// run resumed after a sleep is execution 2; kagzi.retry_epoch counts
	// the workflow's retries. The span and kagzi.executions are recorded
	// when the run ends (see ended).
	ctx, span := w.tracer.Start(tracectx.WithTraceParent(rs.ctx, rs.run.TraceParent), "kagzi.attempt "+rs.run.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("kagzi.run_id", rs.run.RunID.String()),
			attribute.String("kagzi.workflow_type", rs.run.Type),
			attribute.Int64("kagzi.execution", rs.run.LeaseToken),
			attribute.Int("kagzi.retry_epoch", rs.run.Attempt),
			attribute.String("kagzi.worker_id", w.cfg.WorkerID.String()),
		))
	rs.span = span
	rs.outcome = rs.reg.fn.Execute(ctx, wfexec.Execution{
		Cancel:         trace.ContextWithSpan(rs.soft, span),
		Run:            rs.run,
		Reporter:       rep,
		Payloads:       rep,
		Limits:         rs.limits,
		Logger:         rs.log,
		MaxInlineRetry: w.cfg.MaxInlineRetry,
		Tracer:         w.tracer,
		StepDuration:   w.stepMS,
	})
}

// failUnregistered fails a run this worker cannot execute (a dispatcher
// should not have delivered it); the run is retried under its policy,
// perhaps on another worker.
func (w *Worker) failUnregistered(rs *runState, rep *runReporter) wfexec.Outcome {
	err := fmt.Errorf("workflow type %s@%s is not registered on worker %s", rs.run.Type, rs.run.Version, w.cfg.WorkerID)
	rs.log.Error("delivered a run of an unregistered workflow type", "version", rs.run.Version)
	now := time.Now()
	item := protocol.ReportItem{
		Kind:       protocol.ReportRunFailed,
		RunID:      rs.run.RunID,
		LeaseToken: rs.run.LeaseToken,
		Error:      err.Error(),
		ErrorType:  "UnregisteredType",
		FinishedAt: &now,
	}
	if _, rerr := rep.Report(rs.ctx, item); rerr != nil {
		return wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: rerr}
	}
	return wfexec.Outcome{Status: wfexec.OutcomeFailed, Err: err}
}

// finish frees the run's slot as its execution ends. A run whose end
// report is pending (see ReportEnd) stays held until sendEnd has its
// acknowledgement: listed in heartbeats, so the engine keeps its lease,
// and waited for by a drain.
func (w *Worker) finish(rs *runState) {
	if !rs.endPending {
		w.ended(rs, rs.outcome)
	}
	close(rs.done)
	w.mu.Lock()
	w.active--
	if !rs.endPending && w.runs[rs.run.RunID] == rs {
		delete(w.runs, rs.run.RunID)
	}
	w.idleCheck()
	w.mu.Unlock()
	w.poke()
}

// idleCheck tells a waiting drain that no run is held any more: none
// executing, no end report pending. w.mu is held.
func (w *Worker) idleCheck() {
	if w.draining && w.active == 0 && w.ending == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

// ended records how the run ended (counters, log, kagzi.executions, the
// attempt span) and ends its context.
func (w *Worker) ended(rs *runState, out wfexec.Outcome) {
	switch out.Status {
	case wfexec.OutcomeCompleted:
		w.stats.completed.Add(1)
		rs.log.Debug("run completed")
	case wfexec.OutcomeFailed:
		w.stats.failed.Add(1)
		rs.log.Info("run failed", "err", out.Err)
	case wfexec.OutcomeSuspended:
		w.stats.suspended.Add(1)
		rs.log.Debug("run suspended")
	default:
		w.stats.abandoned.Add(1)
		if errors.Is(out.Err, workflow.ErrEventsArrived) {
			rs.log.Debug("run executes again: events arrived during the execution")
		} else if errors.Is(out.Err, context.DeadlineExceeded) {
			// The engine fails a run past its deadline (the reaper does):
			// nothing to report from here.
			rs.log.Info("run passed its deadline: abandoned, the engine fails it", "deadline", rs.run.DeadlineAt)
		} else {
			rs.log.Info("run abandoned", "cause", out.Err)
		}
	}
	if span := rs.span; span != nil {
		outcome := out.Status.String()
		if errors.Is(out.Err, workflow.ErrEventsArrived) {
			outcome = "rerun"
		}
		w.executions.Add(context.WithoutCancel(rs.ctx), 1, w.execAttrs.Get(execKey{rs.run.Namespace, rs.run.Queue, rs.run.Type,
			outcome}, execAttrs))
		span.SetAttributes(attribute.String("kagzi.outcome", outcome))
		if out.Err != nil {
			span.RecordError(out.Err)
		}
		if out.Status == wfexec.OutcomeFailed {
			span.SetStatus(codes.Error, out.Err.Error())
		}
		span.End()
	}
	rs.cancel(errRunEnded)
	rs.stopDeadline()
}

// ReportEnd implements wfexec.EndReporter: it hands the run's end report
// to sendEnd and returns, so the run's slot is free while the dispatcher
// records it. The reports pending so are at most Config.MaxConcurrency
// (w.ends): beyond that the execution waits here, holding its slot, so a
// slow or unreachable dispatcher leaves the worker at most twice its
// concurrency in runs and asks for no new work.
func (r *runReporter) ReportEnd(ctx context.Context, items ...protocol.ReportItem) error {
	w := r.w
	select {
	case w.ends <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	w.mu.Lock()
	w.ending++
	w.mu.Unlock()
	r.rs.endPending = true
	go w.sendEnd(ctx, r, items)
	return nil
}

// sendEnd owns a run's end report from ReportEnd on: it sends it until it
// is acknowledged, lost or refused (Report: a refusal abandons the run,
// one too large fails it), then ends the run as finish would have. ctx is
// the execution's, which lives until then: the run's lease, termination,
// deadline and a drain's hard stop still end it.
func (w *Worker) sendEnd(ctx context.Context, r *runReporter, items []protocol.ReportItem) {
	rs := r.rs
	_, err := r.Report(ctx, items...)
	<-rs.done
	out := rs.outcome
	if err != nil {
		if ctx.Err() != nil {
			rs.log.Warn("end report abandoned before its acknowledgement: the run's lease gives it back", "err", err)
		}
		out = wfexec.Outcome{Status: wfexec.OutcomeAbandoned, Err: err}
	}
	w.ended(rs, out)
	<-w.ends
	w.mu.Lock()
	w.ending--
	if w.runs[rs.run.RunID] == rs {
		delete(w.runs, rs.run.RunID)
	}
	w.idleCheck()
	w.mu.Unlock()
}

// runReporter is the wfexec.Reporter of one run.
type runReporter struct {
	w  *Worker
	rs *runState
}

// Report implements wfexec.Reporter: it sends items until acknowledged,
// and abandons the run on a lost lease or a refused item.
func (r *runReporter) Report(ctx context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	sent := time.Now()
	results, err := r.w.sendReport(ctx, items)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		if errors.Is(err, errTooLarge) {
			// Sending it again would fail again: end the run with the reason
			// (a small report) instead of leaving it to be retried.
			r.failRun(ctx, err)
		}
		r.rs.log.Error("report failed: abandoning the run", "err", err)
		r.w.abandon(r.rs, err)
		return nil, err
	}
	for i, res := range results {
		if res.CancelRequested {
			// The pushed notice may have been lost: the reply says it too.
			r.rs.softCancel(workflow.ErrCancelled)
		}
		switch res.Code {
		case protocol.ResultLeaseLost:
			r.rs.log.Info("lease lost: abandoning the run", "kind", items[i].Kind, "step_id", items[i].StepID)
			r.w.abandon(r.rs, workflow.ErrLeaseLost)
			return nil, workflow.ErrLeaseLost
		case protocol.ResultInvalid:
			r.rs.log.Error("report refused as invalid: abandoning the run",
				"kind", items[i].Kind, "step_id", items[i].StepID, "message", res.Message)
			err := fmt.Errorf("%w: %s", workflow.ErrReportRefused, res.Message)
			r.w.abandon(r.rs, err)
			return nil, err
		case protocol.ResultRerun:
			// Not a fault: the run's end met events this execution did
			// not see, and the engine executes the run again with them.
			r.rs.log.Debug("run end refused: events arrived during the execution; the run executes again",
				"kind", items[i].Kind)
			r.w.abandon(r.rs, workflow.ErrEventsArrived)
			return nil, workflow.ErrEventsArrived
		}
	}
	r.rs.held(sent)
	return results, nil
}

// ConfirmLease implements wfexec.LeaseConfirmer. A worker that stalled
// (SIGSTOP, a paused VM) for longer than stallLimit since its last round
// trip under the lease sent no heartbeats meanwhile, so the reaper may
// have given the run to another worker, which may have finished it; the
// reply it read on resuming said nothing of that. It then reads one byte
// of the run's input under the lease, which a dispatcher answers only
// while the lease is this execution's (any dispatcher version serves it),
// and asks again if the worker stalled during that read too.
func (r *runReporter) ConfirmLease(ctx context.Context) error {
	for {
		last := r.rs.heldAt.Load()
		if last != nil && !r.w.stalled(*last, stallLimit) {
			return nil
		}
		sent := time.Now()
		req := r.payloadRequest("", 0, 1)
		r.w.stats.leaseChecks.Add(1)
		if _, err := r.chunk(ctx, &req); err != nil {
			return err
		}
		r.rs.held(sent)
	}
}

// abandon stops rs from reporting or being listed in heartbeats and
// cancels its context with cause. A report's refusal concerns the lease it
// was sent under: rs, not a newer execution of the run that took its
// place in w.runs (its end report may still be in flight when the run is
// delivered again).
func (w *Worker) abandon(rs *runState, cause error) {
	w.mu.Lock()
	rs.abandoned = true
	w.mu.Unlock()
	rs.cancel(cause)
}

// failRun reports the run failed, not to be retried, with err's message.
func (r *runReporter) failRun(ctx context.Context, err error) {
	now := time.Now()
	it := protocol.ReportItem{Kind: protocol.ReportRunFailed, RunID: r.rs.run.RunID, LeaseToken: r.rs.run.LeaseToken,
		Error: protocol.ClipText(err.Error(), protocol.MaxErrorLen), ErrorType: "ReportTooLarge", NonRetryable: true, FinishedAt: &now}
	if _, ferr := r.w.sendReport(ctx, []protocol.ReportItem{it}); ferr != nil {
		r.rs.log.Error("could not report the run failed", "err", ferr)
	}
}

// FetchPayload implements wfexec.PayloadFetcher: it reads the payload
// from a dispatcher in chunks that fit a NATS message, retrying transient
// failures until ctx ends, and abandons the run on a lost lease.
func (r *runReporter) FetchPayload(ctx context.Context, stepID string, attempt int) (json.RawMessage, error) {
	req := r.payloadRequest(stepID, attempt, protocol.MessagePayloadLimit(r.w.nc.MaxPayload())*3/4)
	var out []byte
	sent := time.Now()
	for {
		req.Offset = len(out)
		chunk, err := r.chunk(ctx, &req)
		if err != nil {
			return nil, err
		}
		out = append(out, chunk.Data...)
		if len(out) >= chunk.Total || len(chunk.Data) == 0 {
			if len(out) != chunk.Total {
				return nil, fmt.Errorf("%w: payload of %d bytes ended after %d", workflow.ErrReportRefused, chunk.Total, len(out))
			}
			r.rs.held(sent)
			return out, nil
		}
	}
}

// payloadRequest asks for length bytes of the output of attempt attempt
// of step stepID (the run's input if stepID is empty), under the lease.
func (r *runReporter) payloadRequest(stepID string, attempt, length int) protocol.PayloadRequest {
	return protocol.PayloadRequest{Namespace: r.rs.run.Namespace, RunID: r.rs.run.RunID, LeaseToken: r.rs.run.LeaseToken,
		StepID: stepID, Attempt: attempt, Length: length}
}

// chunk reads one chunk of a payload, retrying transient failures until
// ctx ends, and abandons the run on a lost lease or a refusal.
func (r *runReporter) chunk(ctx context.Context, req *protocol.PayloadRequest) (*protocol.PayloadChunk, error) {
	for tries := 1; ; tries++ {
		chunk, err := r.w.fetchChunk(ctx, req)
		if err == nil {
			switch chunk.Code {
			case protocol.ResultOK:
				return chunk, nil
			case protocol.ResultLeaseLost:
				r.rs.log.Info("lease lost: abandoning the run", "payload_step_id", req.StepID)
				r.w.abandon(r.rs, workflow.ErrLeaseLost)
				return nil, workflow.ErrLeaseLost
			case protocol.ResultInvalid:
				err := fmt.Errorf("%w: payload %q#%d: %s", workflow.ErrReportRefused, req.StepID, req.Attempt, chunk.Message)
				r.w.abandon(r.rs, err)
				return nil, err
			}
			err = fmt.Errorf("dispatcher error: %s", chunk.Message)
		}
		r.rs.log.Debug("payload read will be retried", "attempt", tries, "err", err)
		if err := r.w.backOff(ctx, tries); err != nil {
			return nil, err
		}
	}
}

// fetchChunk makes one payload request round trip.
func (w *Worker) fetchChunk(ctx context.Context, req *protocol.PayloadRequest) (*protocol.PayloadChunk, error) {
	data, err := protocol.Encode(req)
	if err != nil {
		return nil, err
	}
	subject, target := w.live.route(protocol.SubjectPayload(req.Namespace))
	fctx, landed := w.live.fly(ctx, target)
	defer landed()
	rctx, cancel := context.WithTimeout(fctx, w.cfg.ReportTimeout)
	defer cancel()
	msg, err := w.nc.RequestWithContext(rctx, subject, data)
	if err != nil {
		return nil, w.tripFailed(fctx, target, err)
	}
	var chunk protocol.PayloadChunk
	if err := protocol.Decode(msg.Data, &chunk); err != nil {
		w.malformed("payload chunk", msg.Subject, err)
		return nil, err
	}
	return &chunk, nil
}

// sendReport sends items (combined with other runs' reports, see
// combine.go) and waits for their results, retrying with backoff on
// timeouts, missing dispatchers, malformed replies and transient results,
// until ctx ends (then it returns context.Cause(ctx)). It returns the
// results once none is transient.
func (w *Worker) sendReport(ctx context.Context, items []protocol.ReportItem) ([]protocol.ReportResult, error) {
	if err := (&protocol.Report{WorkerID: w.cfg.WorkerID, Namespace: w.cfg.Namespace, Items: items}).Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", workflow.ErrReportRefused, err)
	}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		results, err := w.report(ctx, items)
		if errors.Is(err, errTooLarge) {
			if len(items) == 1 {
				return nil, err
			}
			return w.sendInParts(ctx, items)
		}
		if err == nil {
			err = transientResult(results)
			if err == nil {
				return results, nil
			}
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if w.nc.IsClosed() {
			return nil, nats.ErrConnectionClosed
		}
		w.log.Debug("report will be retried", "attempt", attempt, "err", err)
		if err := w.backOff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// backOff waits before the next try of a round trip to a dispatcher
// (reportBackoff; attempt counts from 1) and counts the retry; it returns
// ctx's cause if ctx ends first.
func (w *Worker) backOff(ctx context.Context, attempt int) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	w.stats.retries.Add(1)
	t := time.NewTimer(reportBackoff.Delay(attempt, rand.Float64()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// sendInParts sends the items of one run that do not fit in one message
// (e.g. the starts of many children with large inputs) as two reports, one
// after the other, so the engine applies them in order. If the first part
// meets a result that is final for the run, the second is not sent and
// gets that result.
func (w *Worker) sendInParts(ctx context.Context, items []protocol.ReportItem) ([]protocol.ReportResult, error) {
	half := len(items) / 2
	first, err := w.sendReport(ctx, items[:half])
	if err != nil {
		return nil, err
	}
	for _, r := range first {
		if r.Code == protocol.ResultLeaseLost || r.Code == protocol.ResultInvalid || r.Code == protocol.ResultRerun {
			rest := make([]protocol.ReportResult, len(items)-half)
			for i := range rest {
				rest[i] = protocol.ReportResult{Code: r.Code, Message: "not sent: " + r.Message}
			}
			return append(first, rest...), nil
		}
	}
	second, err := w.sendReport(ctx, items[half:])
	if err != nil {
		return nil, err
	}
	return append(first, second...), nil
}

// transientResult returns an error if the results must be retried: some
// item met a transient dispatcher error and none is final for the run.
func transientResult(results []protocol.ReportResult) error {
	var transient error
	for i, r := range results {
		switch r.Code {
		case protocol.ResultLeaseLost, protocol.ResultInvalid, protocol.ResultRerun:
			// Final for the run whatever the other items say.
			return nil
		case protocol.ResultError:
			if transient == nil {
				transient = fmt.Errorf("dispatcher error on item %d: %s", i, r.Message)
			}
		}
	}
	return transient
}

// execKey names the attribute set of an execution's end.
type execKey struct{ ns, queue, typ, outcome string }

func execAttrs(k execKey) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("namespace", k.ns), attribute.String("queue", k.queue),
		attribute.String("workflow_type", k.typ), attribute.String("outcome", k.outcome)}
}
