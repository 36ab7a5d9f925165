package worker

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"
	"github.com/kagzi/kagzi/internal/tracectx"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

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
	run    *protocol.DeliveredRun
	reg    *registration // nil: type@version not registered here
	ctx    context.Context
	cancel context.CancelCauseFunc
	// stopDeadline releases the run deadline's timer.
	stopDeadline context.CancelFunc
	log          *slog.Logger
	// done is closed when the execution goroutine ends; outcome is set
	// before.
	done    chan struct{}
	outcome workflow.Outcome
	// abandoned: cancelled or lease lost; not listed in heartbeats, not
	// released by a drain. Guarded by Worker.mu.
	abandoned bool
}

// newRunState prepares a delivered run; w.mu is held.
func (w *Worker) newRunState(r *protocol.DeliveredRun) *runState {
	ctx, cancel := context.WithCancelCause(w.base)
	stopDeadline := context.CancelFunc(func() {})
	if r.DeadlineAt != nil {
		ctx, stopDeadline = context.WithDeadline(ctx, *r.DeadlineAt)
	}
	reg := w.types[r.Type]
	if reg != nil && r.Version != "" && r.Version != reg.version {
		reg = nil
	}
	return &runState{
		run:          r,
		reg:          reg,
		ctx:          ctx,
		cancel:       cancel,
		stopDeadline: stopDeadline,
		log: w.log.With("run_id", r.RunID.String(), "workflow_type", r.Type,
			"attempt", r.Attempt),
		done: make(chan struct{}),
	}
}

// execute runs one delivered run in its own goroutine.
func (w *Worker) execute(rs *runState) {
	defer w.runWG.Done()
	defer w.finish(rs)
	rep := &runReporter{w: w, rs: rs}
	if rs.reg == nil {
		rs.outcome = w.failUnregistered(rs, rep)
		return
	}
	rs.log.Debug("run started", "replayed_steps", len(rs.run.Steps))
	// The attempt joins the run's trace (started by the client) as a child
	// of the start span; the workflow's steps are children of the attempt.
	ctx, span := w.tracer.Start(tracectx.WithTraceParent(rs.ctx, rs.run.TraceParent), "kagzi.attempt "+rs.run.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("kagzi.run_id", rs.run.RunID.String()),
			attribute.String("kagzi.workflow_type", rs.run.Type),
			attribute.Int("kagzi.attempt", rs.run.Attempt),
			attribute.String("kagzi.worker_id", w.cfg.WorkerID.String()),
		))
	defer func() {
		span.SetAttributes(attribute.String("kagzi.outcome", rs.outcome.Status.String()))
		if rs.outcome.Err != nil {
			span.RecordError(rs.outcome.Err)
		}
		if rs.outcome.Status == workflow.OutcomeFailed {
			span.SetStatus(codes.Error, rs.outcome.Err.Error())
		}
		span.End()
	}()
	rs.outcome = workflow.Execute(ctx, workflow.Execution{
		Run:            rs.run,
		Func:           rs.reg.fn,
		Reporter:       rep,
		Logger:         rs.log,
		MaxInlineRetry: w.cfg.MaxInlineRetry,
		Tracer:         w.tracer,
		StepDuration:   w.stepMS,
	})
}

// failUnregistered fails a run this worker cannot execute (a dispatcher
// should not have delivered it); the run is retried under its policy,
// perhaps on another worker.
func (w *Worker) failUnregistered(rs *runState, rep *runReporter) workflow.Outcome {
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
		return workflow.Outcome{Status: workflow.OutcomeAbandoned, Err: rerr}
	}
	return workflow.Outcome{Status: workflow.OutcomeFailed, Err: err}
}

// finish frees the run's slot.
func (w *Worker) finish(rs *runState) {
	out := rs.outcome
	switch out.Status {
	case workflow.OutcomeCompleted:
		w.stats.completed.Add(1)
		rs.log.Debug("run completed")
	case workflow.OutcomeFailed:
		w.stats.failed.Add(1)
		rs.log.Info("run failed", "err", out.Err)
	case workflow.OutcomeSuspended:
		w.stats.suspended.Add(1)
		rs.log.Debug("run suspended")
	default:
		w.stats.abandoned.Add(1)
		if errors.Is(out.Err, context.DeadlineExceeded) {
			// The engine fails a run past its deadline (the reaper does):
			// nothing to report from here.
			rs.log.Info("run passed its deadline: abandoned, the engine fails it", "deadline", rs.run.DeadlineAt)
		} else {
			rs.log.Info("run abandoned", "cause", out.Err)
		}
	}
	rs.cancel(errRunEnded)
	rs.stopDeadline()
	close(rs.done)

	w.mu.Lock()
	w.active--
	if w.runs[rs.run.RunID] == rs {
		delete(w.runs, rs.run.RunID)
	}
	if w.draining && w.active == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
	w.mu.Unlock()
	w.poke()
}

// runReporter is the workflow.Reporter of one run.
type runReporter struct {
	w  *Worker
	rs *runState
}

// Report implements workflow.Reporter: it sends items until acknowledged,
// and abandons the run on a lost lease or a refused item.
func (r *runReporter) Report(ctx context.Context, items ...protocol.ReportItem) ([]protocol.ReportResult, error) {
	results, err := r.w.sendReport(ctx, items)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		r.rs.log.Error("report failed: abandoning the run", "err", err)
		r.w.abandonRun(r.rs.run.RunID, err)
		return nil, err
	}
	for i, res := range results {
		switch res.Code {
		case protocol.ResultLeaseLost:
			r.rs.log.Info("lease lost: abandoning the run", "kind", items[i].Kind, "step_id", items[i].StepID)
			r.w.abandonRun(r.rs.run.RunID, workflow.ErrLeaseLost)
			return nil, workflow.ErrLeaseLost
		case protocol.ResultInvalid:
			r.rs.log.Error("report refused as invalid: abandoning the run",
				"kind", items[i].Kind, "step_id", items[i].StepID, "message", res.Message)
			err := fmt.Errorf("%w: %s", workflow.ErrReportRefused, res.Message)
			r.w.abandonRun(r.rs.run.RunID, err)
			return nil, err
		}
	}
	return results, nil
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
		w.stats.retries.Add(1)
		delay := reportBackoff.Delay(attempt, rand.Float64())
		w.log.Debug("report will be retried", "attempt", attempt, "delay", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// transientResult returns an error if the results must be retried: some
// item met a transient dispatcher error and none is final for the run.
func transientResult(results []protocol.ReportResult) error {
	var transient error
	for i, r := range results {
		switch r.Code {
		case protocol.ResultLeaseLost, protocol.ResultInvalid:
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
