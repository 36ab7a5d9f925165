package modeltest

// The reference model's operations: how each op of a program plays out in
// a simulated run (mrun).

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ops runs a sequence; it returns the error of the first op whose error
// is returned.
func (r *mrun) ops(ops []Op, rec Record) *merr {
	for i := range ops {
		op := &ops[i]
		var err *merr
		switch op.Kind {
		case KindStep:
			err = r.step(op, rec, false)
		case KindSleep:
			if r.cancelled {
				// A new sleep with a cancelled context fails; the
				// interpreter returns a sleep's error.
				return errCancelled()
			}
			if r.p.DeadlineMS > 0 && op.MS >= r.p.DeadlineMS {
				return errDeadline
			}
		case KindWait:
			err = r.wait(op, rec)
		case KindChildren:
			err = r.childrenOp(op, rec)
		case KindParallel:
			err = r.parallel(op, rec)
		case KindCancel:
			err = r.cancel(op, rec)
		case KindTerminate:
			err = r.terminate(op, rec)
		case KindDetach:
			err = r.detach(op, rec)
		case KindHold:
			err = r.holdOp(op, rec)
		case KindSide:
			err = r.recorded(op, rec, op.outcome(1).Value, true)
		case KindVersion:
			err = r.recorded(op, rec, 1, false)
		case KindState:
			err = r.recorded(op, rec, op.outcome(1).Value, false)
		case KindUpdate:
			err = r.update(op, rec)
		default:
			panic(fmt.Sprintf("modeltest: op kind %q has no model", op.Kind))
		}
		if err == errDeadline || (err != nil && err.terminated) {
			return err
		}
		if err != nil && op.OnErr == OnErrReturn {
			return err
		}
	}
	return nil
}

// recorded runs a value recorded as a step on first reach (SideEffect,
// Version): replayed once recorded, cancelled if first reached after a
// cancel request; invoked counts the side effect's function.
func (r *mrun) recorded(op *Op, rec Record, value int, invoked bool) *merr {
	s := r.steps[op.ID]
	if s == nil {
		s = &mstep{}
		r.steps[op.ID] = s
	}
	if !s.done {
		if r.cancelled {
			err := errCancelled()
			rec[op.ID] = err.obs()
			return err
		}
		s.done, s.value = true, value
		if invoked {
			r.pr.pred.Invocations[r.p.Key+"/"+op.ID]++
		}
	}
	rec[op.ID] = Obs{V: intJSON(s.value)}
	return nil
}

// update serves the op's update: its request arrives (the driver sends
// it when the op's signal step runs) and is answered once; replays answer
// nothing new. A cancelled run records no new signal step: the op fails.
func (r *mrun) update(op *Op, rec Record) *merr {
	s := r.steps[op.ID]
	if s == nil {
		s = &mstep{}
		r.steps[op.ID] = s
	}
	if !s.done {
		if r.cancelled {
			err := errCancelled()
			rec[op.ID] = err.obs()
			return err
		}
		s.done = true
		if r.inst == r.pr.top {
			a := Obs{V: stringJSON(UpdateAnswer(op.Payload, op.outcome(1).Value))}
			if op.outcome(1).Kind == OutDeclined {
				a = Obs{Err: updateFailure(op.ID), Type: TypeDeclined}
			}
			if r.pr.pred.Updates == nil {
				r.pr.pred.Updates = map[string]Obs{}
			}
			r.pr.pred.Updates[op.ID] = a
		}
	}
	rec[op.ID] = Obs{V: stringJSON(op.Payload)}
	return nil
}

// attemptError is the error of attempt n of step op, or nil if it succeeds.
func attemptError(op *Op, n int) *merr {
	switch o := op.outcome(n); o.Kind {
	case OutOK, "":
		return nil
	case OutFail:
		return &merr{msg: stepFailure(op.ID, n, TypeTransient), typ: TypeTransient, typed: true}
	case OutDeclined:
		return &merr{msg: stepFailure(op.ID, n, TypeDeclined), typ: TypeDeclined, typed: true}
	case OutFatal:
		return &merr{msg: stepFailure(op.ID, n, TypeFatal), typ: TypeFatal, nr: true, typed: true}
	case OutTimeout:
		return &merr{msg: "context deadline exceeded", typ: TypeStepTimeout}
	case OutPanic:
		return &merr{msg: "panic: " + panicValue(op.ID, n), typ: TypePanic, typed: true}
	default:
		panic(fmt.Sprintf("modeltest: outcome %q has no model", o.Kind))
	}
}

// step runs step op; uncancellable: with workflow.WithoutCancel.
func (r *mrun) step(op *Op, rec Record, uncancellable bool) *merr {
	s := r.steps[op.ID]
	if s == nil {
		s = &mstep{}
		r.steps[op.ID] = s
	}
	if s.done {
		rec[op.ID] = Obs{V: intJSON(s.value)}
		return nil
	}
	if s.failed != nil && s.failedIn == r.epoch {
		rec[op.ID] = s.failed.obs()
		return s.failed
	}
	if r.cancelled && !uncancellable {
		err := errCancelled()
		rec[op.ID] = err.obs()
		return err
	}
	maxAttempts, nr := 5, []string(nil)
	if op.Retry != nil {
		maxAttempts, nr = op.Retry.MaxAttempts, op.Retry.NonRetryable
	}
	for tries := 1; ; tries++ {
		s.attempts++
		r.pr.pred.Invocations[r.p.Key+"/"+op.ID]++
		err := attemptError(op, s.attempts)
		if err == nil {
			s.done, s.value = true, op.outcome(s.attempts).Value
			rec[op.ID] = Obs{V: intJSON(s.value)}
			return nil
		}
		if err.nr || contains(nr, err.typ) || (maxAttempts > 0 && tries >= maxAttempts) {
			// A final failure is a *workflow.StepError: typed, with the
			// recorded mark, in every execution.
			err.typed = true
			s.failed, s.failedIn = err, r.epoch
			rec[op.ID] = err.obs()
			return err
		}
	}
}

func (r *mrun) wait(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	id := eventStepID(op.Name, r.waitN[op.Name])
	w := r.waits[id]
	if w == nil {
		w = &mwait{}
		r.waits[id] = w
	}
	if r.cancelled && !w.done && w.timedOutIn != r.epoch {
		// The wait, and its signal step, would do something new.
		err := errCancelled()
		rec[op.ID] = err.obs()
		return err
	}
	if op.Send == SendBefore && !r.signalled[op.ID] {
		r.signalled[op.ID] = true
		r.events[op.Name] = append(r.events[op.Name], op.Payload)
	}
	var err *merr
	switch {
	case w.done:
	case w.timedOutIn == r.epoch:
		err = &merr{msg: eventTimeout(op.Name, id), typ: TypeEventTimeout}
	case len(r.events[op.Name]) > 0:
		w.done, w.payload = true, r.events[op.Name][0]
		r.events[op.Name] = r.events[op.Name][1:]
	case op.Send == SendDuring && !r.signalled[op.ID]:
		// The driver sends it while the wait is in progress.
		r.signalled[op.ID] = true
		w.done, w.payload = true, op.Payload
	default:
		w.timedOutIn = r.epoch
		err = &merr{msg: eventTimeout(op.Name, id), typ: TypeEventTimeout}
	}
	if op.Send == SendAfter && !r.signalled[op.ID] {
		if r.cancelled {
			// Only a replayed wait gets here: its signal step is new.
			err = errCancelled()
		} else {
			r.signalled[op.ID] = true
			r.events[op.Name] = append(r.events[op.Name], op.Payload)
		}
	}
	if err != nil {
		rec[op.ID] = err.obs()
		return err
	}
	rec[op.ID] = Obs{V: stringJSON(w.payload)}
	return nil
}

// cancel: the driver asks the run to cancel while it waits; the wait
// returns the cancellation, then the cleanup step runs.
func (r *mrun) cancel(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	if !r.cancelled {
		r.requested = true
	}
	r.cancelled = true
	err := errCancelled()
	rec[op.ID] = err.obs()
	if cerr := r.cleanup(op, rec); cerr != nil {
		return cerr
	}
	return err
}

// cleanup runs op's cleanup step (uncancellable) and returns its error if
// the step returns it.
func (r *mrun) cleanup(op *Op, rec Record) *merr {
	if op.Cleanup == nil {
		return nil
	}
	if err := r.step(op.Cleanup, rec, true); err != nil && op.Cleanup.OnErr == OnErrReturn {
		return err
	}
	return nil
}

func (r *mrun) terminate(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	if r.cancelled {
		// Its signal step would be new: nothing reaches the driver.
		err := errCancelled()
		rec[op.ID] = err.obs()
		return err
	}
	return &merr{msg: terminatedError(op.ID), terminated: true}
}

// holdOp: the wait of a detached child ends as its fate says.
func (r *mrun) holdOp(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	id := eventStepID(op.Name, r.waitN[op.Name])
	w := r.waits[id]
	if w == nil {
		w = &mwait{}
		r.waits[id] = w
	}
	var err *merr
	switch {
	case w.done:
	case r.hold == fateRelease && !r.cancelled:
		w.done, w.payload = true, op.Payload
	default:
		r.cancelled = true
		err = errCancelled()
	}
	if err != nil {
		rec[op.ID] = err.obs()
	} else {
		rec[op.ID] = Obs{V: stringJSON(w.payload)}
	}
	if cerr := r.cleanup(op, rec); cerr != nil {
		return cerr
	}
	return err
}

// detach starts the op's children (once: later run attempts find them
// running) and goes on once they hold.
func (r *mrun) detach(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	if !r.started[op.ID] {
		if r.cancelled {
			err := errCancelled()
			rec[op.ID] = err.obs()
			return err
		}
		r.started[op.ID] = true
		for _, c := range op.Children {
			r.pr.pred.Children[c.Program.Key]++
			r.detached = append(r.detached, detached{child: c, inst: RunInstance(r.inst, c.ID, 1)})
		}
	}
	rec[op.ID] = Obs{V: stringJSON(HeldPayload)}
	return nil
}

func (r *mrun) childrenOp(op *Op, rec Record) *merr {
	outs := make([]json.RawMessage, len(op.Children))
	var errs []*merr
	for i := range op.Children {
		c := &op.Children[i]
		st := r.children[c.ID]
		if st == nil {
			st = &mchild{}
			r.children[c.ID] = st
		}
		switch {
		case st.done:
		case st.failed != nil && st.failedIn == r.epoch:
		case r.cancelled:
			// Not started: StartChild returns the cancellation.
			errs = append(errs, errCancelled())
			continue
		default:
			cp := c.Program
			cp.RunRetry = c.Retry
			if cp.RunRetry == nil {
				cp.RunRetry = &Retry{MaxAttempts: 5}
			}
			st.starts++
			r.pr.pred.Children[cp.Key]++
			e := r.pr.run(&cp, RunInstance(r.inst, c.ID, st.starts), cp.RunRetry.MaxAttempts, "")
			switch e.status {
			case StatusCompleted:
				st.done, st.output = true, recordJSON(e.out)
			case StatusCancelled:
				st.failed, st.failedIn = &merr{msg: childCancelled(e.err), typ: TypeChildCancelled, typed: true}, r.epoch
			default:
				st.failed, st.failedIn = &merr{msg: childFailure(e.err), typ: TypeChildFailed, typed: true}, r.epoch
			}
		}
		if st.done {
			outs[i] = st.output
		} else {
			errs = append(errs, st.failed)
		}
	}
	var err *merr
	var o Obs
	if len(op.Children) == 1 {
		if len(errs) == 0 {
			o.V = outs[0]
		} else {
			err = errs[0]
		}
	} else {
		o.V = rawList(outs)
		err = join(errs)
	}
	if err != nil {
		o.Err, o.Type, o.NR = err.msg, err.typ, err.nr
	}
	rec[op.ID] = o
	return err
}

func (r *mrun) parallel(op *Op, rec Record) *merr {
	errs := make([]*merr, len(op.Branches))
	for b := range op.Branches {
		if err := r.ops(op.Branches[b], rec); err != nil {
			if err == errDeadline || err.terminated {
				return err
			}
			errs[b] = err
		}
	}
	var err *merr
	if op.Mode == ModeFailFast {
		for b, e := range errs {
			if e != nil {
				err = e
				// The other branches were cancelled at some point.
				for ob := range op.Branches {
					if ob != b {
						Walk(op.Branches[ob], func(x *Op) { r.pr.pred.Unchecked = append(r.pr.pred.Unchecked, x.ID) })
					}
				}
				break
			}
		}
	} else {
		var nonNil []*merr
		for _, e := range errs {
			if e != nil {
				nonNil = append(nonNil, e)
			}
		}
		err = join(nonNil)
	}
	if err != nil {
		rec[op.ID] = err.obs()
	} else {
		rec[op.ID] = Obs{}
	}
	return err
}

// join is errors.Join as a workflow sees it: nil for none, messages one
// per line, marked non-retryable if any is, of the type of the first typed
// error in it (workflow.ErrorType looks for one with errors.As).
func join(errs []*merr) *merr {
	if len(errs) == 0 {
		return nil
	}
	j := &merr{typ: TypeJoined}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.msg
		j.nr = j.nr || e.nr
		if e.typed && !j.typed {
			j.typed, j.typ = true, e.typ
		}
	}
	j.msg = strings.Join(msgs, "\n")
	return j
}

func intJSON(v int) json.RawMessage { return json.RawMessage(fmt.Sprint(v)) }

func stringJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func recordJSON(rec Record) json.RawMessage {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return b
}

func rawList(xs []json.RawMessage) json.RawMessage {
	out := make([]json.RawMessage, len(xs))
	for i, x := range xs {
		if x == nil {
			x = json.RawMessage("null")
		}
		out[i] = x
	}
	b, _ := json.Marshal(out)
	return b
}
