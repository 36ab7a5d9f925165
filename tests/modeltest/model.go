package modeltest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
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
//     error (type ChildFailed, or ChildCancelled for a cancelled one);
//   - a run sleeping past its deadline fails with "deadline exceeded";
//   - a cancel request makes every durable call that would do something
//     new return workflow.ErrCancelled, recorded results still replaying;
//     cleanup under workflow.WithoutCancel runs as usual; a run that then
//     returns an error ends CANCELLED (not retried), one that returns a
//     result COMPLETED; the request reaches the run's live children but
//     those started with ParentCloseAbandon;
//   - a terminated run ends CANCELLED at once, and runs no more code;
//   - when a run ends, its live children get their parent-close policy:
//     terminated ("terminated: parent closed"), asked to cancel, or left
//     running;
//   - worker crashes change nothing of the above but how often a step
//     function may have been invoked (at least once more per crash) and,
//     since a crash counts against the run's max attempts, that a run whose
//     attempts are spent may fail with the crash ("worker <id> lost",
//     "lease expired") or with the error of an earlier run attempt than
//     the model's. Check takes those ends from the database (CrashFacts)
//     and predicts the rest from them.

// Run statuses as the model names them (the store's names).
const (
	StatusCompleted = "COMPLETED"
	StatusFailed    = "FAILED"
	StatusCancelled = "CANCELLED"
)

// DeadlineError is the error of a run that missed its deadline.
const DeadlineError = "deadline exceeded"

// Prediction is how the model says a program ends.
type Prediction struct {
	Status string
	// Error is the run's error (FAILED, CANCELLED), normalised
	// (NormalizeMessage).
	Error string
	// Output is the run's output (COMPLETED).
	Output Record
	// Attempts is the number of run attempts (retry epochs).
	Attempts int
	// Invocations counts the step function invocations by
	// "<program key>/<step id>", children's included.
	Invocations map[string]int
	// AtMost lists the keys of Invocations that are bounds, not counts: the
	// steps of a child whose end races with its termination.
	AtMost map[string]bool
	// Unchecked lists the op IDs of FailFast branches that lost the race
	// to the failing branch: their observations and invocations depend on
	// timing (a cancelled step in flight is not recorded).
	Unchecked []string
	// Deadline: the run ends by its deadline.
	Deadline bool
	// Children lists the keys of the child programs, with how many child
	// runs each one makes (one per parent attempt that starts it).
	Children map[string]int
	// Ends are the possible ends of each detached child run, by instance
	// (RunInstance).
	Ends map[string][]End
	// Lost lists the program keys of runs that ended by a crash (from the
	// facts): what they and their descendants did is not predicted.
	Lost []string
	// Capped counts the runs that failed by their workflow's error once
	// their attempts were spent, recoveries after crashes counted among
	// them, so the model allows them no later retry epoch (from the
	// facts); PastDeadline says the run ended by its deadline, which faults
	// made it miss (from the facts).
	Capped       int
	PastDeadline bool
	// Continued is how many times the run continued as new
	// (Program.Continue): every run of the chain but the last ends
	// COMPLETED, continued as the next.
	Continued int
	// State is the durable state of the chain's first run when it ended
	// (KindState: per name, the value of the last op that ran; nil if the
	// program sets none).
	State map[string]int
	// Updates are the answers the callers of the first run's updates get
	// (KindUpdate), by op ID: the result, or the handler's error.
	Updates map[string]Obs
	// Unreceived counts, by run instance, the events a simulated run
	// ended without receiving: sent (an early event no wait took, a late
	// one after the last wait for its name) and left when it ended. The
	// engine refuses a run's end while an event of a name it waited for
	// arrived during the execution, and executes it again; the replay
	// takes the same path, so what is left is left all the same, and
	// shown unreceived. Runs that leave none are not listed.
	Unreceived map[string]int
}

// End is how a run ends.
type End struct {
	Status string
	// Error is normalised.
	Error  string
	Output Record
}

func (e End) String() string {
	if e.Status == StatusCompleted {
		out, _ := json.Marshal(e.Output)
		return "COMPLETED " + string(out)
	}
	return fmt.Sprintf("%s %q", e.Status, e.Error)
}

// RunInstance names the attempt-th run of the child id of the run named
// parent (a program's own run is named by its key): a program's child
// programs may make several runs, one per attempt of the parent that
// starts them.
func RunInstance(parent, id string, attempt int) string {
	return parent + "/" + id + "#" + strconv.Itoa(attempt)
}

// RunEnd is how one run of a program ended (its own or a descendant's), as
// the database says.
type RunEnd struct {
	Status string
	Error  string
	Output json.RawMessage
	// Attempts counts the run's attempts (recoveries after crashes
	// included), Epoch its retry epochs.
	Attempts, Epoch int
}

// CrashFacts are the ends, by instance, of the runs of a program that
// crashes may have decided: a run the model simulates checks its own end
// against its run policy to see whether its attempts were spent.
type CrashFacts map[string]RunEnd

// lostError matches the error of a run failed by the reaper's recovery.
var lostError = regexp.MustCompile(`^(worker [0-9a-f-]{36} lost|lease expired)$`)

// lost reports whether the run inst ended failed by a crash once its
// attempts (of at most maxAttempts) were spent.
func (f CrashFacts) lost(inst string, maxAttempts int) (RunEnd, bool) {
	e, ok := f[inst]
	return e, ok && e.Status == StatusFailed && lostError.MatchString(e.Error) && maxAttempts > 0 && e.Attempts >= maxAttempts
}

// epochCap returns the retry epoch in which the run inst failed because
// crashes had spent its attempts (0 if they did not).
func (f CrashFacts) epochCap(inst string, maxAttempts int) int {
	e, ok := f[inst]
	if ok && e.Status == StatusFailed && maxAttempts > 0 && e.Attempts >= maxAttempts && e.Attempts > e.Epoch {
		return e.Epoch
	}
	return 0
}

// pastDeadline reports whether p's run, which has a deadline, ended by it.
func (f CrashFacts) pastDeadline(p Program) bool {
	return f.endedByDeadline(p.Key, &p)
}

// endedByDeadline reports whether the run inst of p, which has a deadline,
// ended by it.
func (f CrashFacts) endedByDeadline(inst string, p *Program) bool {
	e, ok := f[inst]
	return ok && p.DeadlineMS > 0 && e.Status == StatusFailed && e.Error == DeadlineError
}

// merr is an error as a workflow observes it.
type merr struct {
	msg, typ string
	nr       bool
	// typed: the error is, or (joined) holds, a workflow.TypedError; typ
	// is then the type of the first one (what workflow.ErrorType says).
	typed bool
	// terminated: the run was terminated (it ends at once).
	terminated bool
}

func (e *merr) obs() Obs { return Obs{Err: e.msg, Type: e.typ, NR: e.nr} }

func errCancelled() *merr { return &merr{msg: CancelledError, typ: TypeCancelled} }

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
	// starts counts the child's runs.
	starts int
}

// Fates of a hold op: what ends its wait.
const (
	fateCancel  = "cancel"
	fateRelease = "release"
)

// detached is a child started by a detach op.
type detached struct {
	child Child
	inst  string
}

type mrun struct {
	pr       *predictor
	p        *Program
	inst     string
	epoch    int
	steps    map[string]*mstep
	waits    map[string]*mwait
	children map[string]*mchild
	// events holds the unconsumed payloads per event name, oldest first.
	events    map[string][]string
	signalled map[string]bool
	// waitN counts the waits per name in the current execution.
	waitN map[string]int
	// cancelled: the run's context is cancelled (a cancel request);
	// requested: by a cancel op of its own (so passed on to its children).
	cancelled, requested bool
	// hold is the fate of the run's hold ops.
	hold     string
	detached []detached
	started  map[string]bool
}

// errDeadline stops the simulation at a sleep past the run's deadline.
var errDeadline = &merr{msg: DeadlineError}

// Predict returns how p ends.
func Predict(p Program) Prediction { return PredictWith(p, nil) }

// PredictWith returns how p ends, given the ends of the runs that crashes
// decided (facts; nil: none).
func PredictWith(p Program, facts CrashFacts) Prediction {
	pred, _ := predict(p, facts, nil)
	return pred
}

// predict returns how p ends, given the crash facts and the steps its
// first run starts with recorded (seed), and the steps that run ended
// with.
func predict(p Program, facts CrashFacts, seed map[string]*mstep) (Prediction, map[string]*mstep) {
	pred := Prediction{Invocations: map[string]int{}, Children: map[string]int{}, Ends: map[string][]End{}, AtMost: map[string]bool{}}
	pr := &predictor{pred: &pred, facts: facts, seed: seed, top: p.Key}
	maxAttempts := 1
	if p.RunRetry != nil {
		maxAttempts = p.RunRetry.MaxAttempts
	}
	// A chain of runs (Program.Continue): each run that completes
	// continues as the next, which starts afresh with the same retry
	// policy; the chain ends as its last run does.
	q := &p
	e := pr.run(q, q.Key, maxAttempts, "")
	pred.State = e.state
	for e.status == StatusCompleted && q.Continue != nil {
		q = q.Continue
		pred.Continued++
		e = pr.run(q, q.Key, maxAttempts, "")
	}
	pred.Status, pred.Error, pred.Attempts, pred.Deadline = e.status, e.err, e.epochs, e.deadline
	if e.status == StatusCompleted {
		pred.Output = e.out
	}
	if facts.pastDeadline(p) {
		// Faults delayed the run past its (wall-clock) deadline: it was cut
		// short there, somewhere before where the model ends it.
		pred.Status, pred.Error, pred.Output, pred.Deadline = StatusFailed, DeadlineError, nil, true
		pred.Continued = 0 // only the first run has a deadline
		pred.PastDeadline = e.status != StatusFailed || e.err != DeadlineError
	}
	sort.Strings(pred.Unchecked)
	return pred, pr.steps
}

type predictor struct {
	pred  *Prediction
	facts CrashFacts
	// seed, if set, are the steps the top-level run starts with recorded
	// (a fork's copied history); steps, after run, are the top-level
	// run's steps when it ended.
	seed, steps map[string]*mstep
	// top is the instance of the chain's first run.
	top string
	// cut counts the runs being simulated that the facts say ended by
	// their deadline: faults may have delayed their tree so far that the
	// deadline closed it before a descendant's detached child started.
	cut int
}

type runEnd struct {
	status, err string
	out         Record
	epochs      int
	deadline    bool
	state       map[string]int
}

// run simulates the run inst of p under at most maxAttempts run attempts
// (0: no limit), its hold ops' fate hold; it returns how it ends and
// predicts the ends of its detached children.
func (pr *predictor) run(p *Program, inst string, maxAttempts int, hold string) runEnd {
	if e, ok := pr.facts.lost(inst, maxAttempts); ok {
		pr.pred.Lost = append(pr.pred.Lost, p.Key)
		return runEnd{status: StatusFailed, err: NormalizeMessage(e.Error), epochs: e.Epoch}
	}
	if pr.facts.endedByDeadline(inst, p) {
		pr.cut++
		defer func() { pr.cut-- }()
	}
	epochCap := pr.facts.epochCap(inst, maxAttempts)
	if epochCap > 0 {
		pr.pred.Capped++
	}
	r := &mrun{pr: pr, p: p, inst: inst, steps: map[string]*mstep{}, waits: map[string]*mwait{}, children: map[string]*mchild{},
		events: map[string][]string{}, signalled: map[string]bool{}, hold: hold, started: map[string]bool{}}
	top := inst == pr.top
	if top {
		for id, st := range pr.seed {
			c := *st
			r.steps[id] = &c
		}
	}
	var runNR []string
	if p.RunRetry != nil {
		runNR = p.RunRetry.NonRetryable
	}
	var end runEnd
	for r.epoch = 1; ; r.epoch++ {
		r.waitN = map[string]int{}
		rec := Record{}
		err := r.ops(p.Ops, rec)
		end.epochs = r.epoch
		switch {
		case err == errDeadline:
			end.status, end.err, end.deadline = StatusFailed, DeadlineError, true
		case err != nil && err.terminated:
			end.status, end.err = StatusCancelled, err.msg
		case err == nil:
			end.status, end.out = StatusCompleted, rec
		case r.cancelled:
			end.status, end.err = StatusCancelled, NormalizeMessage(err.msg)
		case err.nr || contains(runNR, err.typ) || (maxAttempts > 0 && r.epoch >= maxAttempts) || (epochCap > 0 && r.epoch >= epochCap):
			end.status, end.err = StatusFailed, NormalizeMessage(err.msg)
		default:
			continue
		}
		break
	}
	for _, d := range r.detached {
		pr.detachedEnd(d, r.requested, p.DeadlineMS > 0)
	}
	left := 0
	for _, evs := range r.events {
		left += len(evs)
	}
	if left > 0 {
		if pr.pred.Unreceived == nil {
			pr.pred.Unreceived = map[string]int{}
		}
		pr.pred.Unreceived[inst] = left
	}
	end.state = r.state()
	if top {
		pr.steps = r.steps
	}
	return end
}

// state is the run's durable state: per name, the value of the last
// KindState op (top level, in program order) that was recorded.
func (r *mrun) state() map[string]int {
	var st map[string]int
	for i := range r.p.Ops {
		op := &r.p.Ops[i]
		if op.Kind != KindState {
			continue
		}
		if st == nil {
			st = map[string]int{}
		}
		if s := r.steps[op.ID]; s != nil && s.done {
			st[op.Name] = s.value
		}
	}
	return st
}

// childMaxAttempts is the max attempts of a child run under policy rp.
func childMaxAttempts(rp *Retry) int {
	if rp == nil {
		return 5
	}
	return rp.MaxAttempts
}

// detachedEnd predicts the end of the detached child d once its parent
// ended (cancelled: asked to cancel before; deadline: the parent has a
// deadline, which on a slow machine may come before the child started).
// Under crashes, an ancestor the facts say ended by its deadline may have
// closed the tree before the child started as well, however early the
// model's fault-free timeline reaches the detach: faults (recoveries, a
// restarted database) delay a run by seconds. Without crashes there are
// no facts, and such an early cut stays a divergence.
func (pr *predictor) detachedEnd(d detached, cancelled, deadline bool) {
	cp := d.child.Program
	cp.RunRetry = d.child.Retry
	maxAttempts := childMaxAttempts(d.child.Retry)
	if e, ok := pr.facts.lost(d.inst, maxAttempts); ok {
		pr.pred.Lost = append(pr.pred.Lost, cp.Key)
		pr.pred.Ends[d.inst] = []End{{Status: StatusFailed, Error: NormalizeMessage(e.Error)}}
		return
	}
	defer func() {
		if (deadline || pr.cut > 0) && d.child.Policy == PolicyRequestCancel {
			pr.pred.Ends[d.inst] = append(pr.pred.Ends[d.inst], End{Status: StatusCancelled, Error: UnstartedClosedError})
		}
	}()
	simulate := func(fate string) End {
		e := pr.run(&cp, d.inst, maxAttempts, fate)
		end := End{Status: e.status, Error: e.err}
		if e.status == StatusCompleted {
			end.Output = e.out
		}
		return end
	}
	terminated := End{Status: StatusCancelled, Error: ParentClosedError}
	switch d.child.Policy {
	case PolicyAbandon:
		pr.pred.Ends[d.inst] = []End{simulate(fateRelease)}
	case PolicyRequestCancel:
		pr.pred.Ends[d.inst] = []End{simulate(fateCancel)}
	default:
		if !cancelled {
			pr.pred.Ends[d.inst] = []End{terminated}
			return
		}
		// The parent's cancel request reached the child too: it ends by
		// its own handling of the request or is terminated when the parent
		// ends, whichever comes first, and may have run some of its steps.
		before := map[string]int{}
		for k, v := range pr.pred.Invocations {
			before[k] = v
		}
		e := simulate(fateCancel)
		for k, v := range pr.pred.Invocations {
			if v != before[k] {
				pr.pred.AtMost[k] = true
			}
		}
		pr.pred.Ends[d.inst] = []End{terminated, e}
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
