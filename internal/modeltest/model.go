package modeltest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The reference model. It predicts how a program ends by simulating it
// step by step, with none of the engine's machinery: no replay, no
// suspension, no worker, no clock. What it encodes is the contract a user
// of a durable workflow engine relies on:
//
//   - a step's result, once recorded, is what every later execution sees
//     (the same value, or the same error with the same type and the same
//     non-retryable mark), whatever happened in between: suspensions,
//     replays, worker crashes;
//   - a step is invoked until it succeeds, its error is non-retryable (a
//     mark, or a type its policy lists) or its policy's attempts are spent;
//     attempt numbers count every invocation of the step in the run;
//   - a run whose workflow returns an error is tried again under the run's
//     policy (unless the error is non-retryable for it); a new run attempt
//     keeps the completed steps, gives failed steps a fresh budget, waits
//     again for events whose wait timed out and starts failed children
//     again (docs/ARCHITECTURE.md, "Retries");
//   - an event is received by the first wait for its name that finds it
//     unconsumed, oldest first; a wait that found none before its timeout
//     returns the timeout error, in every later execution of that run
//     attempt;
//   - a child runs as a run of its own; its parent sees its output or its
//     error (type ChildFailed);
//   - a run sleeping past its deadline fails with "deadline exceeded";
//   - worker crashes change nothing of the above, only how often a step
//     function may have been invoked (at least once more per crash).

// Run statuses as the model names them (the store's names).
const (
	StatusCompleted = "COMPLETED"
	StatusFailed    = "FAILED"
)

// DeadlineError is the error of a run that missed its deadline.
const DeadlineError = "deadline exceeded"

// Prediction is how the model says a program ends.
type Prediction struct {
	Status string
	// Error is the run's error (FAILED), normalised (NormalizeMessage).
	Error string
	// Output is the run's output (COMPLETED).
	Output Record
	// Attempts is the number of run attempts.
	Attempts int
	// Invocations counts the step function invocations by
	// "<program key>/<step id>", children's included.
	Invocations map[string]int
	// Unchecked lists the op IDs of FailFast branches that lost the race
	// to the failing branch: their observations and invocations depend on
	// timing (a cancelled step in flight is not recorded).
	Unchecked []string
	// Deadline: the run ends by its deadline.
	Deadline bool
	// Children lists the keys of the child programs, with how many child
	// runs each one makes (one per parent attempt that starts it).
	Children map[string]int

	quirks Quirks
}

// merr is an error as a workflow observes it.
type merr struct {
	msg, typ string
	nr       bool
	// typed: the error is, or (joined) holds, a workflow.TypedError; typ
	// is then the type of the first one (what workflow.ErrorType says).
	typed bool
}

func (e *merr) obs() Obs { return Obs{Err: e.msg, Type: e.typ, NR: e.nr} }

type mstep struct {
	attempts int // invocations so far, in every run attempt
	done     bool
	value    int
	// failed is the final error of run attempt failedIn.
	failed   *merr
	failedIn int
}

type mwait struct {
	done       bool
	payload    string
	timedOutIn int
}

type mchild struct {
	done     bool
	output   json.RawMessage
	failed   *merr
	failedIn int
}

type mrun struct {
	p        *Program
	epoch    int
	steps    map[string]*mstep
	waits    map[string]*mwait
	children map[string]*mchild
	// events holds the unconsumed payloads per event name, oldest first.
	events    map[string][]string
	signalled map[string]bool
	pred      *Prediction
	// waitN counts the waits per name in the current execution.
	waitN map[string]int
}

// errDeadline stops the simulation at a sleep past the run's deadline.
var errDeadline = &merr{msg: DeadlineError}

// Predict returns how p ends.
func Predict(p Program) Prediction { return PredictWith(p, Quirks{}) }

// Quirks make the model mimic known divergences of the engine (see
// KnownIssues), so a divergence they explain can be told from a new one.
// The zero Quirks is the model.
type Quirks struct {
	// LoseNR: a step error's non-retryable mark is lost (the step's own
	// policy still treats it as final).
	LoseNR bool
	// TypedTimeouts: a step attempt's timeout is a typed error of type
	// TypeStepTimeout (as a replayed one is).
	TypedTimeouts bool
}

// PredictWith returns how p ends under quirks q.
func PredictWith(p Program, q Quirks) Prediction {
	pred := Prediction{Invocations: map[string]int{}, Children: map[string]int{}, quirks: q}
	predictInto(&p, &pred)
	sort.Strings(pred.Unchecked)
	return pred
}

func predictInto(p *Program, pred *Prediction) {
	r := &mrun{p: p, steps: map[string]*mstep{}, waits: map[string]*mwait{}, children: map[string]*mchild{},
		events: map[string][]string{}, signalled: map[string]bool{}, pred: pred}
	maxAttempts := 1
	var runNR []string
	if p.RunRetry != nil {
		maxAttempts = p.RunRetry.MaxAttempts
		runNR = p.RunRetry.NonRetryable
	}
	for r.epoch = 1; ; r.epoch++ {
		r.waitN = map[string]int{}
		rec := Record{}
		err := r.ops(p.Ops, rec)
		pred.Attempts = r.epoch
		switch {
		case err == errDeadline:
			pred.Status, pred.Error, pred.Deadline = StatusFailed, DeadlineError, true
			return
		case err == nil:
			pred.Status, pred.Output = StatusCompleted, rec
			return
		case err.nr || contains(runNR, err.typ) || (maxAttempts > 0 && r.epoch >= maxAttempts):
			pred.Status, pred.Error = StatusFailed, NormalizeMessage(err.msg)
			return
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// ops runs a sequence; it returns the error of the first op whose error
// is returned.
func (r *mrun) ops(ops []Op, rec Record) *merr {
	for i := range ops {
		op := &ops[i]
		var err *merr
		switch op.Kind {
		case KindStep:
			err = r.step(op, rec)
		case KindSleep:
			if r.p.DeadlineMS > 0 && op.MS >= r.p.DeadlineMS {
				return errDeadline
			}
		case KindWait:
			err = r.wait(op, rec)
		case KindChildren:
			err = r.childrenOp(op, rec)
		case KindParallel:
			err = r.parallel(op, rec)
		default:
			panic(fmt.Sprintf("modeltest: op kind %q has no model", op.Kind))
		}
		if err == errDeadline {
			return err
		}
		if err != nil && op.OnErr == OnErrReturn {
			return err
		}
	}
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

func (r *mrun) step(op *Op, rec Record) *merr {
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
	maxAttempts, nr := 5, []string(nil)
	if op.Retry != nil {
		maxAttempts, nr = op.Retry.MaxAttempts, op.Retry.NonRetryable
	}
	for tries := 1; ; tries++ {
		s.attempts++
		r.pred.Invocations[r.p.Key+"/"+op.ID]++
		err := attemptError(op, s.attempts)
		if err != nil && r.pred.quirks.TypedTimeouts && err.typ == TypeStepTimeout {
			err.typed = true
		}
		if err == nil {
			s.done, s.value = true, op.outcome(s.attempts).Value
			rec[op.ID] = Obs{V: intJSON(s.value)}
			return nil
		}
		if err.nr || contains(nr, err.typ) || (maxAttempts > 0 && tries >= maxAttempts) {
			if r.pred.quirks.LoseNR {
				err.nr = false
			}
			s.failed, s.failedIn = err, r.epoch
			rec[op.ID] = err.obs()
			return err
		}
	}
}

func (r *mrun) wait(op *Op, rec Record) *merr {
	r.waitN[op.Name]++
	id := eventStepID(op.Name, r.waitN[op.Name])
	if op.Send == SendBefore && !r.signalled[op.ID] {
		r.signalled[op.ID] = true
		r.events[op.Name] = append(r.events[op.Name], op.Payload)
	}
	w := r.waits[id]
	if w == nil {
		w = &mwait{}
		r.waits[id] = w
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
		r.signalled[op.ID] = true
		r.events[op.Name] = append(r.events[op.Name], op.Payload)
	}
	if err != nil {
		rec[op.ID] = err.obs()
		return err
	}
	rec[op.ID] = Obs{V: stringJSON(w.payload)}
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
		default:
			cp := c.Program
			cp.RunRetry = c.Retry
			if cp.RunRetry == nil {
				cp.RunRetry = &Retry{MaxAttempts: 5}
			}
			sub := Prediction{Invocations: r.pred.Invocations, Children: r.pred.Children, quirks: r.pred.quirks}
			r.pred.Children[cp.Key]++
			predictInto(&cp, &sub)
			if sub.Status == StatusCompleted {
				st.done, st.output = true, recordJSON(sub.Output)
			} else {
				st.failed, st.failedIn = &merr{msg: childFailure(sub.Error), typ: TypeChildFailed, typed: true}, r.epoch
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
			if err == errDeadline {
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
						Walk(op.Branches[ob], func(x *Op) { r.pred.Unchecked = append(r.pred.Unchecked, x.ID) })
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
