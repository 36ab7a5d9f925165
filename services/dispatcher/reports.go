package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// reportJob is one worker report waiting to be applied.
type reportJob struct {
	// refused are the runs of this report an item of which the store
	// refused for good, with the first reason.
	refused map[uuid.UUID]string
	msg     *nats.Msg
	report  protocol.Report
	results []protocol.ReportResult
	// finished are the runs this report ended, published after commit.
	finished []finishedRun
	// received is when the report arrived (for the report latency).
	received time.Time
}

func (d *Dispatcher) onReport(m *nats.Msg) {
	job := &reportJob{msg: m, received: time.Now()}
	if err := protocol.Decode(m.Data, &job.report); err != nil {
		d.dropMalformed(m, err)
		return
	}
	// NATS permissions let a worker publish on its namespace's subject
	// only; a report naming another namespace is not its to make.
	if want := protocol.SubjectReport(job.report.Namespace); m.Subject != want {
		d.dropMalformed(m, fmt.Errorf("report of namespace %q on subject %q", job.report.Namespace, m.Subject))
		return
	}
	select {
	case d.reports <- job:
	case <-d.ctx.Done():
	}
}

// reportWriter applies reports: it takes whatever has queued up (up to
// ReportBatch items) and applies it in one transaction.
func (d *Dispatcher) reportWriter() {
	for {
		var first *reportJob
		select {
		case first = <-d.reports:
		case <-d.ctx.Done():
			d.drainReports()
			return
		}
		batch := []*reportJob{first}
		items := len(first.report.Items)
	collect:
		for items < reportBatch {
			select {
			case j := <-d.reports:
				batch = append(batch, j)
				items += len(j.report.Items)
			default:
				break collect
			}
		}
		d.applyBatch(d.ctx, batch)
	}
}

// drainReports applies the reports already received when the dispatcher
// stops, so a worker's last outcomes are not lost to a restart.
func (d *Dispatcher) drainReports() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 5*time.Second)
	defer cancel()
	for {
		select {
		case j := <-d.reports:
			d.applyBatch(ctx, []*reportJob{j})
		default:
			return
		}
	}
}

// applyBatch applies the jobs in one transaction; if the transaction fails
// as a whole, each job gets its own so one bad report cannot sink others.
func (d *Dispatcher) applyBatch(ctx context.Context, batch []*reportJob) {
	err := d.st.InTx(ctx, func(tx *store.Store) error { return d.applyJobs(ctx, tx, batch) })
	if err != nil && len(batch) > 1 {
		for _, j := range batch {
			d.applyBatch(ctx, []*reportJob{j})
		}
		return
	}
	if err != nil {
		d.log.Error("apply report", "worker_id", batch[0].report.WorkerID, "err", err)
		j := batch[0]
		j.results = make([]protocol.ReportResult, len(j.report.Items))
		for i := range j.results {
			j.results[i] = protocol.ReportResult{Code: protocol.ResultError, Message: err.Error()}
		}
		j.finished = nil
	} else {
		d.reportTxs.Add(1)
		d.publishReported(batch)
	}
	for _, j := range batch {
		d.reply(j)
	}
}

// finishedRun is a run a report ended, with its workflow type for the
// per-type metrics (empty when a repeated report found it already ended:
// it was counted then).
type finishedRun struct {
	protocol.RunFinished
	typ string
}

// itemRef points at one item of one job.
type itemRef struct {
	j *reportJob
	i int
}

// applyJobs applies the items of every job, set-wise where it can: all step
// records in one round trip, then the rarer transitions one by one in the
// order they came (suspensions, event waits, child starts, failures), then
// all run completions in one statement. A run's steps and child starts thus
// precede its completion, as the worker sent them. The function steps of a
// run that completes in the same batch, with nothing else between, go with
// its completion instead (one statement, one lease check), which records
// them before it completes the run. A run an item of which
// the store refuses for good (a payload over the limit, a result that
// conflicts with the recorded one) is failed with that reason, once, in the
// same transaction, and its later items are not applied: sending the same
// report again would be refused again, so leaving the run to be retried
// would repeat the refusal forever. It returns an error only for failures
// that abort the transaction.
func (d *Dispatcher) applyJobs(ctx context.Context, tx *store.Store, batch []*reportJob) error {
	var (
		steps     []store.StepsRecordParams
		stepRefs  []itemRef
		completes []store.RunsCompleteItem
		doneRefs  []itemRef
		others    []itemRef
		// ending: the completion of each run that ends in this batch, and
		// whether its function steps may ride on it.
		ending map[uuid.UUID]*foldable
	)
	for _, j := range batch {
		j.results = make([]protocol.ReportResult, len(j.report.Items))
		j.finished = j.finished[:0]
		j.refused = nil
		for i := range j.report.Items {
			it := &j.report.Items[i]
			if it.Kind == protocol.ReportRunCompleted {
				if ending == nil {
					ending = map[uuid.UUID]*foldable{}
				}
				ending[it.RunID] = &foldable{ok: true, tok: it.LeaseToken}
			}
		}
	}
	for _, j := range batch {
		for i := range j.report.Items {
			it := &j.report.Items[i]
			if f := ending[it.RunID]; f != nil && !foldsInto(it, f.tok) && it.Kind != protocol.ReportRunCompleted {
				f.ok = false
			}
		}
	}
	for _, j := range batch {
		for i := range j.report.Items {
			it := &j.report.Items[i]
			l := store.Lease{Namespace: j.report.Namespace, RunID: it.RunID, Token: it.LeaseToken}
			switch it.Kind {
			case protocol.ReportStepCompleted, protocol.ReportStepFailed:
				if f := ending[it.RunID]; f != nil && f.ok {
					f.steps = append(f.steps, stepParams(l, it))
					f.refs = append(f.refs, itemRef{j, i})
					continue
				}
				steps = append(steps, stepParams(l, it))
				stepRefs = append(stepRefs, itemRef{j, i})
			case protocol.ReportRunCompleted:
			default:
				others = append(others, itemRef{j, i})
			}
		}
	}
	// The first completion of a run takes its steps (a repeated one, none).
	folded := map[itemRef][]itemRef{}
	for _, j := range batch {
		for i := range j.report.Items {
			it := &j.report.Items[i]
			if it.Kind != protocol.ReportRunCompleted {
				continue
			}
			c := store.RunsCompleteItem{Lease: store.Lease{Namespace: j.report.Namespace, RunID: it.RunID, Token: it.LeaseToken},
				Output: it.Output, Events: eventsSeen(it)}
			if f := ending[it.RunID]; f.ok && len(f.steps) > 0 {
				c.Steps = f.steps
				folded[itemRef{j, i}] = f.refs
				f.steps, f.refs = nil, nil
			}
			completes = append(completes, c)
			doneRefs = append(doneRefs, itemRef{j, i})
		}
	}
	if len(steps) > 0 {
		outs, err := tx.StepsRecordBatch(ctx, steps)
		if err != nil {
			return err
		}
		for k, ref := range stepRefs {
			if err := d.stepResult(ref, outs[k]); err != nil {
				return err
			}
		}
	}
	for _, ref := range others {
		if d.skipRefused(ref) {
			continue
		}
		if err := d.applyOther(ctx, tx, ref); err != nil {
			return err
		}
	}
	completes, doneRefs = d.dropRefused(completes, doneRefs)
	if len(completes) > 0 {
		outs, err := tx.RunsCompleteBatch(ctx, completes)
		if err != nil {
			return err
		}
		for k, ref := range doneRefs {
			for n, sref := range folded[ref] {
				if err := d.stepResult(sref, outs[k].Steps[n]); err != nil {
					return err
				}
			}
			if d.skipRefused(ref) {
				continue
			}
			if err := d.result(ref, outs[k].Err); err != nil {
				return err
			}
			if outs[k].Err == nil {
				ref.j.finished = append(ref.j.finished, finishedRun{protocol.RunFinished{Namespace: ref.j.report.Namespace,
					RunID: ref.j.report.Items[ref.i].RunID, Status: string(store.StatusCompleted)}, outs[k].Type})
			}
		}
	}
	return d.failRefused(ctx, tx, batch)
}

// foldable is a run that completes in a batch: whether its function steps
// go with its completion (every other item of the run in the batch is such
// a step, under the same lease), and those steps with their items.
type foldable struct {
	ok    bool
	tok   int64
	steps []store.StepsRecordParams
	refs  []itemRef
}

// foldsInto says whether it may be recorded with its run's completion under
// lease token tok.
func foldsInto(it *protocol.ReportItem, tok int64) bool {
	return (it.Kind == protocol.ReportStepCompleted || it.Kind == protocol.ReportStepFailed) &&
		it.LeaseToken == tok && (it.StepKind == "" || store.StepKind(it.StepKind) == store.StepFunction)
}

// stepResult records the outcome of one step report.
func (d *Dispatcher) stepResult(ref itemRef, o store.StepOutcome) error {
	if err := d.result(ref, o.Err); err != nil {
		return err
	}
	if o.CancelRequested && ref.j.results[ref.i].Code == protocol.ResultOK {
		ref.j.results[ref.i].CancelRequested = true
	}
	return nil
}

// skipRefused answers an item of a run whose earlier item was refused,
// without applying it.
func (d *Dispatcher) skipRefused(ref itemRef) bool {
	why, ok := ref.j.refused[ref.j.report.Items[ref.i].RunID]
	if ok {
		ref.j.results[ref.i] = protocol.ReportResult{
			Code:    protocol.ResultInvalid,
			Message: "not applied: an earlier item of this run was refused: " + why,
		}
	}
	return ok
}

// dropRefused removes the completions of runs with a refused item.
func (d *Dispatcher) dropRefused(completes []store.RunsCompleteItem, refs []itemRef) ([]store.RunsCompleteItem, []itemRef) {
	keptC, keptR := completes[:0], refs[:0]
	for k, ref := range refs {
		if !d.skipRefused(ref) {
			keptC, keptR = append(keptC, completes[k]), append(keptR, ref)
		}
	}
	return keptC, keptR
}

// failRefused fails, for good, each run an item of which was refused.
func (d *Dispatcher) failRefused(ctx context.Context, tx *store.Store, batch []*reportJob) error {
	for _, j := range batch {
		ids := make([]uuid.UUID, 0, len(j.refused))
		for id := range j.refused {
			ids = append(ids, id)
		}
		// Lock runs in id order, as every multi-run statement does.
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		for _, id := range ids {
			tok := int64(0)
			for _, it := range j.report.Items {
				if it.RunID == id {
					tok = it.LeaseToken
					break
				}
			}
			l := store.Lease{Namespace: j.report.Namespace, RunID: id, Token: tok}
			// A run this lease no longer holds (failed by an earlier copy
			// of this report, or taken by another worker) is left alone.
			cur, err := tx.RunsGet(ctx, l.Namespace, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && (cur.Status != store.StatusRunning || cur.LeaseToken != tok)) {
				continue
			}
			if err != nil {
				return err
			}
			err = tx.RunsFail(ctx, l, "report refused: "+j.refused[id])
			switch {
			case err == nil:
				d.runsRefused.Add(1)
				d.log.Warn("run failed: its report was refused", "run_id", id, "reason", j.refused[id])
				j.finished = append(j.finished, finishedRun{protocol.RunFinished{Namespace: j.report.Namespace, RunID: id,
					Status: string(store.StatusFailed)}, cur.Type})
			case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrNotFound):
				// The run moved on under another lease, or is gone.
			default:
				return err
			}
		}
	}
	return nil
}

// applyOther applies one item that is neither a step record nor a
// completion.
func (d *Dispatcher) applyOther(ctx context.Context, tx *store.Store, ref itemRef) error {
	it := &ref.j.report.Items[ref.i]
	ns := ref.j.report.Namespace
	l := store.Lease{Namespace: ns, RunID: it.RunID, Token: it.LeaseToken}
	var (
		err     error
		ev      store.EventsReceiveResult
		drain   store.EventsDrainResult
		refused error
	)
	switch it.Kind {
	case protocol.ReportAttributesSet:
		var o store.StepOutcome
		o, refused, err = tx.RunsAttributesSet(ctx, store.RunsAttributesSetParams{Lease: l, StepID: it.StepID,
			Attributes: it.Output, StartedAt: it.StartedAt})
		if err == nil {
			if err = d.stepResult(ref, o); err != nil {
				return err
			}
			if refused != nil && ref.j.results[ref.i].Code == protocol.ResultOK {
				// Recorded as the step's failure: the workflow returns it.
				ref.j.results[ref.i].Message = refused.Error()
			}
			return nil
		}
	case protocol.ReportWaitTokenMint:
		var (
			o      store.StepOutcome
			minted protocol.WaitTokenMinted
		)
		o, minted, err = tx.WaitTokensMint(ctx, store.WaitTokensMintParams{Lease: l, StepID: it.StepID,
			ExpiresAt: *it.Until, StartedAt: it.StartedAt})
		if err == nil {
			if err = d.stepResult(ref, o); err != nil {
				return err
			}
			if r := &ref.j.results[ref.i]; r.Code == protocol.ResultOK {
				// The token travels back as the step's output.
				r.Output, err = json.Marshal(minted)
			}
			return err
		}
	case protocol.ReportRunFailed:
		var res store.RunsFailAttemptResult
		res, err = tx.RunsFailAttempt(ctx, l, it.Error, it.ErrorType, it.NonRetryable)
		if err == nil && (res.Status == store.StatusFailed || res.Status == store.StatusCancelled) {
			ref.j.finished = append(ref.j.finished, finishedRun{protocol.RunFinished{Namespace: ns, RunID: it.RunID,
				Status: string(res.Status)}, res.Type})
		}
	case protocol.ReportRunSleep:
		if len(it.Steps) == 0 && !it.Events {
			err = tx.RunsSleep(ctx, l, it.Until)
		} else {
			_, err = tx.RunsWait(ctx, store.RunsWaitParams{Lease: l, Until: it.Until, ChildSteps: it.Steps})
		}
	case protocol.ReportRunRelease:
		err = tx.RunsRelease(ctx, l)
	case protocol.ReportRunContinue:
		var typ string
		typ, err = tx.RunsContinueAsNew(ctx, l, protocol.ContinuedRunID(it.RunID), it.Output, eventsSeen(it))
		if err == nil {
			ref.j.finished = append(ref.j.finished, finishedRun{protocol.RunFinished{Namespace: ns, RunID: it.RunID,
				Status: string(store.StatusCompleted)}, typ})
		}
	case protocol.ReportEventWait:
		ev, err = tx.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: it.StepID, Attempt: it.Attempt,
			Name: it.Name, Until: it.Until, StartedAt: it.StartedAt, Suspend: it.Suspend})
	case protocol.ReportEventDrain:
		drain, err = tx.EventsDrain(ctx, store.EventsDrainParams{Lease: l, StepID: it.StepID, Name: it.Name, StartedAt: it.StartedAt})
	case protocol.ReportChildStart:
		c := it.Child
		err = tx.RunsStartChild(ctx, store.RunsStartChildParams{Lease: l, StepID: it.StepID, Attempt: it.Attempt,
			ChildRunID: protocol.ChildRunID(it.RunID, it.StepID, it.Attempt), Type: c.Type, Version: c.Version,
			Queue: c.Queue, Input: c.Input, RetryPolicy: c.RetryPolicy, Priority: c.Priority, StartedAt: it.StartedAt,
			ParentClosePolicy: store.ParentClosePolicy(c.ParentClosePolicy)})
	}
	if err := d.result(ref, err); err != nil {
		return err
	}
	if it.Kind == protocol.ReportEventWait && ref.j.results[ref.i].Code == protocol.ResultOK {
		r := &ref.j.results[ref.i]
		switch ev.Status {
		case store.EventReceived:
			if len(ev.Payload) > protocol.InlinePayloadBytes {
				// Fetched by the worker as the EVENT step's output.
				r.OutputSize = len(ev.Payload)
			} else {
				r.Output = json.RawMessage(ev.Payload)
			}
		case store.EventWaiting:
			r.Waiting = true
		}
	}
	if it.Kind == protocol.ReportEventDrain && ref.j.results[ref.i].Code == protocol.ResultOK && drain.Events > 0 {
		r := &ref.j.results[ref.i]
		if len(drain.Output) > protocol.InlinePayloadBytes {
			r.OutputSize = len(drain.Output)
		} else {
			r.Output = json.RawMessage(drain.Output)
		}
	}
	return nil
}

// eventsSeen is the event guard a run's end carries (nil from an older
// worker: the run ends as reported).
func eventsSeen(it *protocol.ReportItem) *store.EventsSeen {
	if it.EventsSeen == nil {
		return nil
	}
	return &store.EventsSeen{Seq: *it.EventsSeen, Names: it.EventNames, All: it.AllEvents}
}

// result records the outcome of one item; it returns err back when the
// failure aborts the transaction.
func (d *Dispatcher) result(ref itemRef, err error) error {
	r := &ref.j.results[ref.i]
	switch {
	case err == nil:
		*r = protocol.ReportResult{Code: protocol.ResultOK}
		d.applied.Add(1)
	case errors.Is(err, store.ErrEventsArrived):
		// Not a refusal of the report: the run executes again.
		*r = protocol.ReportResult{Code: protocol.ResultRerun, Message: err.Error()}
		d.reruns.Add(1)
	case errors.Is(err, store.ErrLeaseLost):
		*r = protocol.ReportResult{Code: protocol.ResultLeaseLost, Message: err.Error()}
		d.leaseLost.Add(1)
		d.tel.leaseLost.Add(d.ctx, 1, d.tel.ns(ref.j.report.Namespace))
	case errors.Is(err, store.ErrInvalidArgument), errors.Is(err, store.ErrPayloadTooLarge),
		errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		*r = protocol.ReportResult{Code: protocol.ResultInvalid, Message: err.Error()}
		id := ref.j.report.Items[ref.i].RunID
		if _, seen := ref.j.refused[id]; !seen {
			if ref.j.refused == nil {
				ref.j.refused = map[uuid.UUID]string{}
			}
			ref.j.refused[id] = err.Error()
		}
	default:
		return err
	}
	return nil
}

func stepParams(l store.Lease, it *protocol.ReportItem) store.StepsRecordParams {
	p := store.StepsRecordParams{
		Lease: l, StepID: it.StepID, Attempt: it.Attempt, Kind: store.StepKind(it.StepKind),
		Output: it.Output, Error: it.Error, ErrorType: it.ErrorType, StartedAt: it.StartedAt, FinishedAt: it.FinishedAt,
	}
	if p.Kind == "" {
		p.Kind = store.StepFunction
	}
	if it.Kind == protocol.ReportStepCompleted {
		p.Status = store.StepCompleted
	} else {
		p.Status = store.StepFailed
		p.RetryAt = it.Until
		p.NonRetryable = it.NonRetryable
	}
	return p
}

// reply answers the worker and, after the commit, announces finished runs
// directly. The relay announces them too, unless it runs in this process
// (Deps.Published): then whichever of the two comes first announces,
// since both would go out on the same connection.
func (d *Dispatcher) reply(j *reportJob) {
	for _, f := range j.finished {
		d.tel.finished(d.ctx, f.Namespace, f.typ, f.Status)
	}
	for i := range j.finished {
		f := &j.finished[i].RunFinished
		d.deps.Published.once(f.RunID, f.Status, func() bool {
			data, err := protocol.Encode(f)
			return err == nil && d.nc.Publish(protocol.SubjectDone(f.Namespace, f.RunID), data) == nil
		})
	}
	d.tel.reportLatency.Record(d.ctx, float64(time.Since(j.received))/float64(time.Millisecond), d.tel.ns(j.report.Namespace))
	if j.msg.Reply == "" {
		return
	}
	// In the report's encoding: a worker reads what it writes.
	data, err := protocol.EncodeAs(&protocol.ReportReply{Results: j.results}, protocol.EncodingOf(j.msg.Data))
	if err != nil {
		d.log.Error("encode report reply", "err", err)
		return
	}
	if err := j.msg.Respond(data); err != nil {
		d.log.Warn("report reply not sent", "err", err)
	}
}
