package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Register registers the interpreter on w as WorkflowType; each step
// function invocation is written to log (nil: not logged).
func Register(w *worker.Worker, log InvocationLog) error {
	if log == nil {
		log = nopLog{}
	}
	in := &interpreter{log: log}
	return worker.Register(w, WorkflowType, in.run)
}

// Interpret runs p as the workflow of ctx's run and returns what each op
// observed; invocations go to log (nil: none). Register is the usual way
// to run it.
func Interpret(ctx workflow.Context, p Program, log InvocationLog) (Record, error) {
	if log == nil {
		log = nopLog{}
	}
	return (&interpreter{log: log}).run(ctx, p)
}

type interpreter struct {
	log InvocationLog
}

// Failure is the error of a scripted step failure.
type Failure struct {
	Type string
	Msg  string
}

func (f *Failure) Error() string { return f.Msg }

// ErrorType implements workflow.TypedError.
func (f *Failure) ErrorType() string { return f.Type }

// exec is one execution of a program.
type exec struct {
	in    *interpreter
	p     *Program
	runID string
	mu    sync.Mutex
	rec   Record
	waitN map[string]int
	// lastOp is when an op last began (unix ns): a suspension is reported
	// (and the run's slot freed) during an op, before the unwinding that
	// ends the execution, so an execution that suspends is taken to end
	// at its last op's beginning.
	lastOp atomic.Int64
}

func (in *interpreter) run(ctx workflow.Context, p Program) (Record, error) {
	x := &exec{in: in, p: &p, runID: ctx.RunID().String(), rec: Record{}, waitN: map[string]int{}}
	// The attempt each execution saw: a crash must not make it grow.
	in.log.Invoked(p.Key, x.runID, ExecutionID, ctx.Attempt())
	// Deferred, so a suspension (which unwinds the function) ends it too;
	// it is recovered only to tell it apart from a return, and passed on.
	begin := time.Now()
	defer func() {
		if r := recover(); r != nil {
			end := begin
			if t := x.lastOp.Load(); t != 0 {
				end = time.Unix(0, t)
			}
			in.log.Executed(p.Key, x.runID, begin, end)
			panic(r)
		}
		in.log.Executed(p.Key, x.runID, begin, time.Now())
	}()
	if err := x.ops(ctx, p.Ops); err != nil {
		return nil, err
	}
	if p.Continue != nil {
		next := *p.Continue
		next.Signal, next.NATS = p.Signal, p.NATS
		return nil, workflow.ContinueAsNew(ctx, next)
	}
	return x.rec, nil
}

// observe records an op's value or error.
func (x *exec) observe(op *Op, v int, err error) {
	if err != nil {
		x.record(op.ID, errObs(err))
		return
	}
	x.record(op.ID, Obs{V: intJSON(v)})
}

func (x *exec) record(id string, o Obs) {
	x.mu.Lock()
	x.rec[id] = o
	x.mu.Unlock()
}

func errObs(err error) Obs {
	return Obs{Err: NormalizeMessage(err.Error()), Type: workflow.ErrorType(err), NR: workflow.IsNonRetryable(err)}
}

func (x *exec) ops(ctx workflow.Context, ops []Op) error {
	for i := range ops {
		op := &ops[i]
		x.lastOp.Store(time.Now().UnixNano())
		var err error
		switch op.Kind {
		case KindStep:
			err = x.step(ctx, op)
		case KindSleep:
			err = workflow.Sleep(ctx, op.ID, time.Duration(op.MS)*time.Millisecond)
			if err != nil {
				// Only a cancelled run or Parallel branch gets here.
				return err
			}
		case KindWait:
			err = x.wait(ctx, op)
		case KindChildren:
			err = x.children(ctx, op)
		case KindParallel:
			err = x.parallel(ctx, op)
		case KindCancel:
			err = x.hold(ctx, op, Signal{Send: SendCancel})
		case KindTerminate:
			err = x.hold(ctx, op, Signal{Send: SendTerminate, Reason: TerminateReason(op.ID)})
		case KindHold:
			err = x.hold(ctx, op, Signal{Send: SendHold, Payload: op.Payload})
		case KindDetach:
			err = x.detach(ctx, op)
		case KindSide:
			var v int
			v, err = workflow.SideEffect(ctx, op.ID, func() int {
				x.in.log.Invoked(x.p.Key, x.runID, op.ID, 1)
				return op.outcome(1).Value
			})
			x.observe(op, v, err)
		case KindVersion:
			var v int
			v, err = workflow.Version(ctx, op.ID, workflow.DefaultVersion, 1)
			x.observe(op, v, err)
		case KindUpdate:
			err = x.update(ctx, op)
		case KindState:
			v := op.outcome(1).Value
			err = workflow.NewState[int](op.Name).Set(ctx, v)
			x.observe(op, v, err)
		default:
			return workflow.NonRetryable(fmt.Errorf("modeltest: unknown op kind %q", op.Kind))
		}
		if err != nil && op.OnErr == OnErrReturn {
			return err
		}
	}
	return nil
}

func policy(r *Retry) retry.Policy {
	coef := r.Coefficient
	if coef == 0 {
		coef = 1
	}
	return retry.Policy{
		MaxAttempts: r.MaxAttempts, InitialInterval: time.Duration(r.IntervalMS) * time.Millisecond,
		BackoffCoefficient: coef, MaxInterval: time.Second, Jitter: -1, NonRetryable: r.NonRetryable,
	}
}

func (x *exec) step(ctx workflow.Context, op *Op) error {
	var opts []workflow.StepOption
	if op.Retry != nil {
		opts = append(opts, workflow.WithRetry(policy(op.Retry)))
	}
	if op.TimeoutMS > 0 {
		opts = append(opts, workflow.WithStepTimeout(time.Duration(op.TimeoutMS)*time.Millisecond))
	}
	v, err := workflow.Step(ctx, op.ID, func(sctx context.Context) (int, error) {
		info, _ := workflow.StepInfoFrom(sctx)
		n := info.Attempt
		x.in.log.Invoked(x.p.Key, x.runID, op.ID, n)
		o := op.outcome(n)
		switch o.Kind {
		case OutOK, "":
			return o.Value, nil
		case OutFail:
			return 0, &Failure{Type: TypeTransient, Msg: stepFailure(op.ID, n, TypeTransient)}
		case OutDeclined:
			return 0, &Failure{Type: TypeDeclined, Msg: stepFailure(op.ID, n, TypeDeclined)}
		case OutFatal:
			return 0, workflow.NonRetryable(&Failure{Type: TypeFatal, Msg: stepFailure(op.ID, n, TypeFatal)})
		case OutTimeout:
			<-sctx.Done()
			return 0, sctx.Err()
		case OutPanic:
			panic(panicValue(op.ID, n))
		}
		return 0, workflow.NonRetryable(fmt.Errorf("modeltest: unknown outcome %q", o.Kind))
	}, opts...)
	if err != nil {
		x.record(op.ID, errObs(err))
		return err
	}
	x.record(op.ID, Obs{V: intJSON(v)})
	return nil
}

func (x *exec) wait(ctx workflow.Context, op *Op) error {
	x.mu.Lock()
	x.waitN[op.Name]++
	stepID := eventStepID(op.Name, x.waitN[op.Name])
	x.mu.Unlock()
	sig := Signal{StepID: stepID, Name: op.Name, Payload: op.Payload, Send: op.Send}
	if op.Send == SendBefore || op.Send == SendDuring {
		if err := x.signal(ctx, op, sig); err != nil {
			// A cancelled run: the signal step would be new.
			x.record(op.ID, errObs(err))
			return err
		}
	}
	timeout := time.Duration(op.TimeoutMS) * time.Millisecond
	v, err := workflow.WaitForEvent[string](ctx, op.Name, timeout)
	if op.Send == SendAfter {
		if serr := x.signal(ctx, op, sig); serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		x.record(op.ID, errObs(err))
		return err
	}
	x.record(op.ID, Obs{V: stringJSON(v)})
	return nil
}

// update has the driver send the op's update, then serves it.
func (x *exec) update(ctx workflow.Context, op *Op) error {
	if err := x.signal(ctx, op, Signal{Name: op.Name, Payload: op.Payload, Send: SendUpdate}); err != nil {
		x.record(op.ID, errObs(err))
		return err
	}
	u := workflow.NewUpdate[string, string](op.Name, nil)
	err := u.Handle(ctx, HoldTimeoutMS*time.Millisecond, func(_ workflow.Context, req string) (string, error) {
		x.record(op.ID, Obs{V: stringJSON(req)})
		if o := op.outcome(1); o.Kind == OutDeclined {
			return "", &Failure{Type: TypeDeclined, Msg: updateFailure(op.ID)}
		}
		return UpdateAnswer(req, op.outcome(1).Value), nil
	})
	if err != nil {
		x.record(op.ID, errObs(err))
	}
	return err
}

func (x *exec) children(ctx workflow.Context, op *Op) error {
	fs := make([]*workflow.ChildFuture[json.RawMessage], len(op.Children))
	for i := range op.Children {
		c := &op.Children[i]
		cp := c.Program
		cp.Signal, cp.NATS = x.p.Signal, x.p.NATS
		var opts []workflow.ChildOption
		if c.Retry != nil {
			opts = append(opts, workflow.WithChildRetry(policy(c.Retry)))
		}
		fs[i] = workflow.StartChild[json.RawMessage](ctx, c.ID, WorkflowType, cp, opts...)
	}
	var o Obs
	var err error
	if len(fs) == 1 {
		var v json.RawMessage
		v, err = fs[0].Get(ctx)
		if err == nil {
			o.V = v
		}
	} else {
		var vs []json.RawMessage
		vs, err = workflow.ChildAll(ctx, fs)
		o.V = rawList(vs)
	}
	if err != nil {
		e := errObs(err)
		o.Err, o.Type, o.NR = e.Err, e.Type, e.NR
	}
	x.record(op.ID, o)
	return err
}

func (x *exec) parallel(ctx workflow.Context, op *Op) error {
	mode := workflow.CollectAll
	if op.Mode == ModeFailFast {
		mode = workflow.FailFast
	}
	fns := make([]func(workflow.Context) error, len(op.Branches))
	for b := range op.Branches {
		ops := op.Branches[b]
		fns[b] = func(bctx workflow.Context) error { return x.ops(bctx, ops) }
	}
	err := workflow.Parallel(ctx, mode, fns...)
	if err != nil {
		x.record(op.ID, errObs(err))
		return err
	}
	x.record(op.ID, Obs{})
	return nil
}

// hold runs a cancel, terminate or hold op: a signal step asks the driver
// to act (sig) once the run waits for the event op.Name, which nobody but
// the driver of a hold sends; then the op's cleanup step runs with
// workflow.WithoutCancel, whatever the wait returned. The wait's error
// (the cancellation) is the op's, unless the cleanup step returns one.
func (x *exec) hold(ctx workflow.Context, op *Op, sig Signal) error {
	x.mu.Lock()
	x.waitN[op.Name]++
	sig.StepID = eventStepID(op.Name, x.waitN[op.Name])
	x.mu.Unlock()
	sig.Name = op.Name
	err := x.signal(ctx, op, sig)
	var v string
	if err == nil {
		v, err = workflow.WaitForEvent[string](ctx, op.Name, HoldTimeoutMS*time.Millisecond)
	}
	if err != nil {
		x.record(op.ID, errObs(err))
	} else {
		x.record(op.ID, Obs{V: stringJSON(v)})
	}
	if op.Cleanup != nil {
		if cerr := x.step(workflow.WithoutCancel(ctx), op.Cleanup); cerr != nil && op.Cleanup.OnErr == OnErrReturn {
			return cerr
		}
	}
	return err
}

// detach starts the op's children with their parent-close policies and
// goes on, without waiting for them, once the driver says every one holds
// (their hold ops wait).
func (x *exec) detach(ctx workflow.Context, op *Op) error {
	x.mu.Lock()
	x.waitN[op.Name]++
	stepID := eventStepID(op.Name, x.waitN[op.Name])
	x.mu.Unlock()
	sig := Signal{StepID: stepID, Name: op.Name, Payload: HeldPayload, Send: SendHeld}
	for i := range op.Children {
		c := &op.Children[i]
		cp := c.Program
		cp.Signal, cp.NATS = x.p.Signal, x.p.NATS
		opts := []workflow.ChildOption{workflow.WithParentClosePolicy(workflow.ParentClosePolicy(c.Policy))}
		if c.Policy == "" {
			opts[0] = nil
		}
		if c.Retry != nil {
			opts = append(opts, workflow.WithChildRetry(policy(c.Retry)))
		}
		f := workflow.StartChild[json.RawMessage](ctx, c.ID, WorkflowType, cp, opts...)
		h := Hold{RunID: f.RunID().String()}
		if len(cp.Ops) > 0 && cp.Ops[0].Kind == KindHold {
			h.StepID = eventStepID(cp.Ops[0].Name, 1)
		}
		sig.Holds = append(sig.Holds, h)
	}
	err := x.signal(ctx, op, sig)
	var v string
	if err == nil {
		v, err = workflow.WaitForEvent[string](ctx, op.Name, HoldTimeoutMS*time.Millisecond)
	}
	if err != nil {
		x.record(op.ID, errObs(err))
		return err
	}
	x.record(op.ID, Obs{V: stringJSON(v)})
	return nil
}

// Signal is what a signal step tells the driver: the program Key's run
// RunID reached op OpID, whose wait is step StepID for the event Name; the
// driver acts as Send says.
type Signal struct {
	Key     string `json:"key"`
	RunID   string `json:"run_id"`
	OpID    string `json:"op"`
	StepID  string `json:"step"`
	Name    string `json:"name"`
	Payload string `json:"payload"`
	Send    string `json:"send"`
	// Reason is a termination's (SendTerminate).
	Reason string `json:"reason,omitempty"`
	// Holds are the detached children to wait for (SendHeld).
	Holds []Hold `json:"holds,omitempty"`
}

// Hold is a detached child: its run, and the step of its hold op's wait
// ("" if its program starts with no hold op: it is not waited for).
type Hold struct {
	RunID  string `json:"run_id"`
	StepID string `json:"step,omitempty"`
}

// signal runs the signal step of op: a request to the driver, which
// answers once it has done what the signal asks (for SendBefore and
// SendAfter, once the event is stored; at once for the others, which it
// does later). The step is memoized like any other, so the driver hears of
// each point at least once.
func (x *exec) signal(ctx workflow.Context, op *Op, sig Signal) error {
	if x.p.Signal == "" {
		return workflow.NonRetryable(errors.New("modeltest: a wait needs a driver (the program has no signal subject)"))
	}
	sig.Key, sig.RunID, sig.OpID = x.p.Key, x.runID, op.ID
	_, err := workflow.Step(ctx, signalStepID(op.ID), func(sctx context.Context) (bool, error) {
		nc, err := natsConn(x.p.NATS)
		if err != nil {
			return false, err
		}
		data, _ := json.Marshal(sig)
		// Until answered: the driver, NATS or the connection may be
		// restarting.
		for {
			rctx, cancel := context.WithTimeout(sctx, 5*time.Second)
			_, err := nc.RequestWithContext(rctx, x.p.Signal, data)
			cancel()
			if err == nil {
				return true, nil
			}
			if sctx.Err() != nil {
				return false, context.Cause(sctx)
			}
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-sctx.Done():
				t.Stop()
				return false, context.Cause(sctx)
			case <-t.C:
			}
		}
	}, workflow.WithRetry(retry.Policy{MaxAttempts: -1, InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond}))
	return err
}

var (
	connMu sync.Mutex
	conns  = map[string]*nats.Conn{}
)

// natsConn returns this process's connection to url for signals.
func natsConn(url string) (*nats.Conn, error) {
	connMu.Lock()
	defer connMu.Unlock()
	if nc := conns[url]; nc != nil && !nc.IsClosed() {
		return nc, nil
	}
	nc, err := nats.Connect(url, nats.Name("kagzi-modeltest-signals"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	conns[url] = nc
	return nc, nil
}
