// Package driver runs model-test programs (tests/modeltest) through a
// real engine. It is apart from package modeltest, whose interpreter the
// worker binary links, because it needs the store and the client.
package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// Driver runs programs through a real engine: it starts their runs, sends
// their events when their signal steps ask, waits for them to end and
// reads back what the database and the invocation logs hold.
type Driver struct {
	Client *client.Client
	Store  *store.Store
	// NC is the driver's NATS connection (signals arrive on it).
	NC        *nats.Conn
	Namespace string
	// Queue of the runs ("" the client's default).
	Queue string
	// NATSURL is the URL the workers' interpreters reach the driver at.
	NATSURL string
	// Invocations reads every step invocation logged so far.
	Invocations func() ([]modeltest.Invocation, error)
	// Logf, if set, receives progress and problems.
	Logf func(format string, args ...any)
	// Keys, if positive, gives each program's run the concurrency key
	// KeyOf(program key) (StartOptions.ConcurrencyKey).
	Keys int

	subject string
	sub     *nats.Subscription
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	sent     map[string]bool
	problems []string
	launched map[string]uuid.UUID
	// answers are the answers of the updates sent (KindUpdate), by
	// "<program key>/<op id>"; updating counts the calls still waiting.
	answers  map[string]modeltest.Obs
	updating sync.WaitGroup
}

func (d *Driver) logf(format string, args ...any) {
	if d.Logf != nil {
		d.Logf(format, args...)
	}
}

func (d *Driver) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.mu.Lock()
	d.problems = append(d.problems, msg)
	d.mu.Unlock()
	d.logf("PROBLEM: %s", msg)
}

// Problems returns what went wrong on the driver's side (an event that
// could not be sent…): each is a failure of the test, not of the engine.
func (d *Driver) Problems() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.problems...)
}

// Start subscribes to the driver's signal subject.
func (d *Driver) Start(ctx context.Context) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	d.subject = protocol.SubjectModelSignal(hex.EncodeToString(b[:]))
	d.sent = map[string]bool{}
	d.launched = map[string]uuid.UUID{}
	d.ctx, d.cancel = context.WithCancel(ctx)
	sub, err := d.NC.Subscribe(d.subject, func(m *nats.Msg) {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.onSignal(m)
		}()
	})
	if err != nil {
		return err
	}
	d.sub = sub
	return d.NC.Flush()
}

// Stop unsubscribes and waits for the signals being handled.
func (d *Driver) Stop() {
	if d.sub != nil {
		_ = d.sub.Unsubscribe()
	}
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
}

func (d *Driver) onSignal(m *nats.Msg) {
	var s modeltest.Signal
	if err := json.Unmarshal(m.Data, &s); err != nil {
		d.problem("malformed signal %q: %v", m.Data, err)
		return
	}
	runID, err := uuid.Parse(s.RunID)
	if err != nil {
		d.problem("signal with run id %q: %v", s.RunID, err)
		return
	}
	// Each point is acted on once, whatever the signal's deliveries.
	k := s.RunID + "/" + s.OpID
	first := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		done := d.sent[k]
		d.sent[k] = true
		return !done
	}
	switch s.Send {
	case modeltest.SendBefore, modeltest.SendAfter:
		// Answered once the event is stored: the program goes on only then.
		if first() {
			d.send(runID, s)
		}
		_ = m.Respond([]byte("ok"))
	case modeltest.SendDuring:
		_ = m.Respond([]byte("ok"))
		if first() && d.waitPending(runID, s.StepID) {
			d.send(runID, s)
		}
	case modeltest.SendCancel, modeltest.SendTerminate:
		_ = m.Respond([]byte("ok"))
		if first() && d.waitPending(runID, s.StepID) {
			d.stop(runID, s)
		}
	case modeltest.SendHold:
		_ = m.Respond([]byte("ok"))
		if first() {
			d.release(runID, s)
		}
	case modeltest.SendUpdate:
		_ = m.Respond([]byte("ok"))
		if first() {
			d.update(runID, s)
		}
	case modeltest.SendHeld:
		_ = m.Respond([]byte("ok"))
		if first() && d.held(runID, s) {
			d.send(runID, s)
		}
	default:
		_ = m.Respond([]byte("ok"))
		d.problem("signal of run %s op %s: send mode %q", s.RunID, s.OpID, s.Send)
	}
}

// send stores the event of signal s for run id, once: after a failure whose
// effect is unknown, it looks for the event before sending again.
func (d *Driver) send(id uuid.UUID, s modeltest.Signal) {
	payload, _ := json.Marshal(s.Payload)
	d.act(id, fmt.Sprintf("event %s for run %s (op %s)", s.Name, id, s.OpID), func(attempt int) error {
		if attempt > 0 {
			if evs, err := d.Store.EventsList(d.ctx, d.Namespace, id); err == nil {
				for _, e := range evs {
					if e.Name == s.Name && modeltest.JSONEqual(e.Payload, payload) {
						return nil
					}
				}
			}
		}
		_, err := d.Client.SendEvent(d.ctx, id, s.Name, s.Payload)
		return err
	})
}

// update sends the update of signal s to run id and keeps the answer its
// call gets (or its error) for Observe. The call waits for the answer,
// by push, while the run goes on.
func (d *Driver) update(id uuid.UUID, s modeltest.Signal) {
	d.updating.Add(1)
	go func() {
		defer d.updating.Done()
		u := workflow.NewUpdate[string, string](s.Name, nil)
		resp, err := client.Update(d.ctx, d.Client, id, u, s.Payload)
		o := modeltest.Obs{V: json.RawMessage(fmt.Sprintf("%q", resp))}
		var failed *client.UpdateFailedError
		switch {
		case errors.As(err, &failed):
			o = modeltest.Obs{Err: failed.Message, Type: failed.Type}
		case err != nil:
			o = modeltest.Obs{Err: "no answer: " + err.Error()}
		}
		d.mu.Lock()
		if d.answers == nil {
			d.answers = map[string]modeltest.Obs{}
		}
		d.answers[s.Key+"/"+s.OpID] = o
		d.mu.Unlock()
	}()
}

// updates returns the answers the updates of p's first run got, by op
// ID (nil if p sends none), once every call sent has returned.
func (d *Driver) updates(ctx context.Context, p modeltest.Program) (map[string]modeltest.Obs, error) {
	var ids []string
	for _, op := range p.Ops {
		if op.Kind == modeltest.KindUpdate {
			ids = append(ids, op.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	done := make(chan struct{})
	go func() { d.updating.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]modeltest.Obs{}
	for _, id := range ids {
		if o, ok := d.answers[p.Key+"/"+id]; ok {
			out[id] = o
		}
	}
	return out, nil
}

// act calls do (attempt counts from 0) until it succeeds, retrying what
// failed for a reason that may pass (the database or NATS restarting under
// faults). A conflict with run id once it ended — by its deadline, its
// parent's end, a crash that spent its attempts, or an earlier try that
// went through — is done; any other refusal is a problem of the engine,
// named by what.
func (d *Driver) act(id uuid.UUID, what string, do func(attempt int) error) {
	for attempt := 0; ; attempt++ {
		err := do(attempt)
		switch {
		case err == nil:
			return
		case errors.Is(err, store.ErrConflict) && d.ended(id):
			return
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInvalidArgument):
			d.problem("%s: %v", what, err)
			return
		case d.ctx.Err() != nil:
			d.problem("%s not done: %v", what, err)
			return
		}
		if !sleepCtx(d.ctx, 200*time.Millisecond) {
			return
		}
	}
}

// ended reports whether the run id has ended. A read that fails (the
// database restarting under faults) is tried again: a wrong "no" would be
// reported as a problem of the engine.
func (d *Driver) ended(id uuid.UUID) bool {
	for {
		r, err := d.Store.RunsGet(d.ctx, d.Namespace, id)
		if err == nil {
			return r.Status.Terminal()
		}
		if errors.Is(err, store.ErrNotFound) || !sleepCtx(d.ctx, 200*time.Millisecond) {
			return false
		}
	}
}

// waitPending waits until the run id has recorded its wait stepID in
// progress (true), or the wait ended otherwise (it took an older event) or
// the run ended (false).
func (d *Driver) waitPending(id uuid.UUID, stepID string) bool {
	b := backoff{}
	for {
		pending, over, err := d.pending(id, stepID)
		if err == nil && (pending || over) {
			return pending
		}
		if !b.sleep(d.ctx) {
			return false
		}
	}
}

// pending reports whether the wait stepID of run id is in progress, or
// over: the wait or the run ended.
func (d *Driver) pending(id uuid.UUID, stepID string) (pending, over bool, err error) {
	return d.pendingCtx(d.ctx, id, stepID)
}

// pendingCtx is pending under ctx.
func (d *Driver) pendingCtx(ctx context.Context, id uuid.UUID, stepID string) (pending, over bool, err error) {
	steps, err := d.Store.StepsList(ctx, d.Namespace, id)
	if err != nil {
		return false, false, err
	}
	for _, st := range steps {
		if st.StepID == stepID && st.IsLatest {
			if st.Status == store.StepPending {
				return true, false, nil
			}
			return false, true, nil
		}
	}
	r, err := d.Store.RunsGet(ctx, d.Namespace, id)
	if err != nil {
		return false, false, err
	}
	return false, r.Status.Terminal(), nil
}

// stop cancels or terminates the run id as signal s asks (its wait is in
// progress), retrying what failed for a reason that may pass.
func (d *Driver) stop(id uuid.UUID, s modeltest.Signal) {
	d.act(id, fmt.Sprintf("%s of run %s (op %s)", s.Send, id, s.OpID), func(int) error {
		if s.Send == modeltest.SendTerminate {
			return d.Client.Terminate(d.ctx, id, s.Reason)
		}
		return d.Client.Cancel(d.ctx, id)
	})
}

// release sends a held child its event once its parent ended, if its
// parent-close policy is ABANDON (the others end it otherwise).
func (d *Driver) release(id uuid.UUID, s modeltest.Signal) {
	b := backoff{}
	for {
		r, err := d.Store.RunsGet(d.ctx, d.Namespace, id)
		if err == nil {
			if r.ParentRunID == nil || r.ParentClosePolicy != store.ParentClosePolicy(modeltest.PolicyAbandon) || r.Status.Terminal() {
				return
			}
			p, err := d.Store.RunsGet(d.ctx, d.Namespace, *r.ParentRunID)
			if err == nil && p.Status.Terminal() {
				d.send(id, s)
				return
			}
		}
		if !b.sleep(d.ctx) {
			return
		}
	}
}

// held waits until every detached child of signal s holds (its hold wait
// in progress) or ended; false if the parent id ended first.
func (d *Driver) held(id uuid.UUID, s modeltest.Signal) bool {
	for _, h := range s.Holds {
		b := backoff{}
		child, err := uuid.Parse(h.RunID)
		if err != nil {
			d.problem("held signal of run %s: child %q: %v", id, h.RunID, err)
			return false
		}
		if h.StepID == "" {
			continue
		}
		for {
			pending, over, err := d.pending(child, h.StepID)
			if err == nil && (pending || over) {
				break
			}
			// (A child not found is not started yet: its start goes with
			// the parent's report of the signal step.)
			if r, err := d.Store.RunsGet(d.ctx, d.Namespace, id); err == nil && r.Status.Terminal() {
				return false
			}
			if !b.sleep(d.ctx) {
				return false
			}
		}
	}
	return true
}

// backoff paces a poll of the store: 20 ms at first, growing to 500 ms, so
// that the points programs wait at long do not load the database.
type backoff struct{ d time.Duration }

func (b *backoff) sleep(ctx context.Context) bool {
	b.d = min(max(b.d*3/2, 20*time.Millisecond), 500*time.Millisecond)
	return sleepCtx(ctx, b.d)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// StartRequest is the start of p's run (its key is the external id, so a
// start retried after an error does not start a second run).
func (d *Driver) StartRequest(p modeltest.Program) client.StartRequest {
	p.Signal, p.NATS = d.subject, d.NATSURL
	pol := &retry.Policy{MaxAttempts: 1}
	if p.RunRetry != nil {
		pol = &retry.Policy{MaxAttempts: p.RunRetry.MaxAttempts, InitialInterval: time.Duration(p.RunRetry.IntervalMS) * time.Millisecond,
			BackoffCoefficient: 1, Jitter: -1, NonRetryable: p.RunRetry.NonRetryable}
	}
	o := client.StartOptions{Queue: d.Queue, ExternalID: p.Key, RetryPolicy: pol}
	if d.Keys > 0 {
		o.ConcurrencyKey = modeltest.KeyOf(p.Key, d.Keys)
	}
	if p.DeadlineMS > 0 {
		o.Deadline = time.Now().Add(time.Duration(p.DeadlineMS) * time.Millisecond)
	}
	return client.StartRequest{Type: modeltest.WorkflowType, Input: p, Options: o}
}

// Launch starts the runs of ps (in batches, retrying a batch that failed)
// and returns their ids in order.
func (d *Driver) Launch(ctx context.Context, ps []modeltest.Program) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(ps))
	const batch = 50
	for i := 0; i < len(ps); i += batch {
		reqs := make([]client.StartRequest, 0, batch)
		for _, p := range ps[i:min(i+batch, len(ps))] {
			reqs = append(reqs, d.StartRequest(p))
		}
		for {
			hs, err := d.Client.StartMany(ctx, reqs)
			if err == nil {
				for j, h := range hs {
					ids = append(ids, h.RunID)
					d.mu.Lock()
					d.launched[ps[i+j].Key] = h.RunID
					d.mu.Unlock()
				}
				break
			}
			if ctx.Err() != nil {
				return ids, err
			}
			d.logf("start failed (retrying; external ids make it idempotent): %v", err)
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return ids, ctx.Err()
			}
		}
	}
	return ids, nil
}

// WaitAll waits until every run of ids has ended, and every run they
// started: detached children may outlive their parents.
func (d *Driver) WaitAll(ctx context.Context, ids []uuid.UUID) error {
	sem := make(chan struct{}, 128)
	errs := make(chan error, len(ids))
	for _, id := range ids {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- d.waitTree(ctx, id)
		}()
	}
	var first error
	for range ids {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitTree waits until the run id, the runs it continued as and their
// descendants have ended.
func (d *Driver) waitTree(ctx context.Context, id uuid.UUID) error {
	for {
		r, err := d.Client.Wait(ctx, id)
		if err == nil {
			if r.ContinuedAs != nil {
				if err := d.waitTree(ctx, *r.ContinuedAs); err != nil {
					return err
				}
			}
			break
		}
		if ctx.Err() != nil {
			return err
		}
		// Postgres or NATS restarting: wait again.
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	for {
		// An ended run starts no more children.
		kids, _, err := d.Store.RunsList(ctx, store.RunsListParams{Namespace: d.Namespace, ParentID: &id, Limit: 1000})
		if err == nil {
			for _, k := range kids {
				if err := d.waitTree(ctx, k.ID); err != nil {
					return err
				}
			}
			return nil
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Observe reads how each run of ids (of ps) ended, with its children, and
// what the invocation logs say of them.
func (d *Driver) Observe(ctx context.Context, ps []modeltest.Program, ids []uuid.UUID) ([]modeltest.Observed, error) {
	invs, err := d.Invocations()
	if err != nil {
		return nil, err
	}
	byRoot := map[string]map[string]int{}
	execs := map[string]int{}
	for _, in := range invs {
		if in.StepID == modeltest.ExecutionID {
			execs[in.RunID] = max(execs[in.RunID], in.Attempt)
			continue
		}
		root := modeltest.RootKey(in.Key)
		m := byRoot[root]
		if m == nil {
			m = map[string]int{}
			byRoot[root] = m
		}
		m[in.Key+"/"+in.StepID]++
	}
	out := make([]modeltest.Observed, len(ps))
	var g errgroup.Group
	g.SetLimit(8)
	for i := range ps {
		g.Go(func() error {
			o, err := d.observe(ctx, ps[i], ids[i], execs)
			if err != nil {
				return err
			}
			o.Invocations = byRoot[ps[i].Key]
			if o.Invocations == nil {
				o.Invocations = map[string]int{}
			}
			out[i] = o
			return nil
		})
	}
	return out, g.Wait()
}

func (d *Driver) observe(ctx context.Context, p modeltest.Program, id uuid.UUID, execs map[string]int) (modeltest.Observed, error) {
	r, err := d.Store.RunsGet(ctx, d.Namespace, id)
	if err != nil {
		return modeltest.Observed{}, fmt.Errorf("run %s: %w", id, err)
	}
	o := modeltest.Observed{Completed: map[string]int{}, ChildRuns: map[string]int{}, Runs: map[string]modeltest.RunEnd{}, Executions: map[string]int{},
		Unreceived: map[string]int{}}
	if o.State, err = d.state(ctx, p, id); err != nil {
		return o, err
	}
	if o.Updates, err = d.updates(ctx, p); err != nil {
		return o, err
	}
	visit := func(run store.Run, inst string, steps []store.Step) {
		for _, s := range steps {
			if s.Status == store.StepCompleted {
				o.Completed[run.ID.String()+"/"+s.StepID]++
			}
		}
		if n, ok := execs[run.ID.String()]; ok {
			o.Executions[inst] = n
		}
		o.Runs[inst] = modeltest.RunEnd{Status: string(run.Status), Error: run.Error, Output: json.RawMessage(run.Output),
			Attempts: run.Attempts, Epoch: run.Epoch}
		if run.ParentRunID != nil {
			var p modeltest.Program
			if json.Unmarshal(run.Input, &p) == nil {
				o.ChildRuns[p.Key]++
			}
		}
	}
	// Follow the chain (Program.Continue) from the first run: each run is
	// named by its own program's key, and the chain ends as its last run.
	chain := p.Chain()
	for i := 0; ; i++ {
		key := modeltest.ContinueKey(p.Key, i)
		if i < len(chain) {
			key = chain[i].Key
		}
		if err := d.walkRuns(ctx, id, key, visit); err != nil {
			return o, err
		}
		evs, err := d.Store.EventsList(ctx, d.Namespace, id)
		if err != nil {
			return o, fmt.Errorf("events of run %s: %w", id, err)
		}
		o.Unreceived[key] = 0
		for _, e := range evs {
			if e.Unreceived {
				o.Unreceived[key]++
			}
		}
		o.Status, o.Error, o.Output, o.Attempts, o.Epoch = string(r.Status), r.Error, json.RawMessage(r.Output), r.Attempts, r.Epoch
		if r.ContinuedAs == nil {
			return o, nil
		}
		if r.Status != store.StatusCompleted && o.Broken == "" {
			o.Broken = fmt.Sprintf("run %d of the chain is %s, continued as %s", i+1, r.Status, r.ContinuedAs)
		}
		if id, o.Continued = *r.ContinuedAs, o.Continued+1; o.Continued > len(chain)+10 {
			return o, fmt.Errorf("run %s: a chain of more than %d runs", id, o.Continued)
		}
		if r, err = d.Store.RunsGet(ctx, d.Namespace, id); err != nil {
			return o, fmt.Errorf("run %s: %w", id, err)
		}
	}
}

// state reads, as a client does, the durable state the run id (of p) has
// under the names p's top-level KindState ops set (nil if none).
func (d *Driver) state(ctx context.Context, p modeltest.Program, id uuid.UUID) (map[string]int, error) {
	var st map[string]int
	for _, op := range p.Ops {
		if op.Kind != modeltest.KindState {
			continue
		}
		if st == nil {
			st = map[string]int{}
		}
		if _, read := st[op.Name]; read {
			continue
		}
		v, ok, err := client.GetState(ctx, d.Client, id, workflow.NewState[int](op.Name))
		if err != nil {
			return nil, fmt.Errorf("state %q of run %s: %w", op.Name, id, err)
		}
		if ok {
			st[op.Name] = v
		}
	}
	return st, nil
}

// walkRuns calls fn for the run id, named inst (modeltest.RunInstance),
// and each of its descendants.
func (d *Driver) walkRuns(ctx context.Context, id uuid.UUID, inst string, fn func(store.Run, string, []store.Step)) error {
	r, err := d.Store.RunsGet(ctx, d.Namespace, id)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	steps, err := d.Store.StepsList(ctx, d.Namespace, id)
	if err != nil {
		return fmt.Errorf("steps of run %s: %w", id, err)
	}
	fn(r, inst, steps)
	kids, _, err := d.Store.RunsList(ctx, store.RunsListParams{Namespace: d.Namespace, ParentID: &id, Limit: 1000})
	if err != nil {
		return fmt.Errorf("children of run %s: %w", id, err)
	}
	for _, k := range kids {
		if err := d.walkRuns(ctx, k.ID, modeltest.RunInstance(inst, k.ParentStepID, childAttempt(id, k)), fn); err != nil {
			return err
		}
	}
	return nil
}

// childAttempt is the attempt of its parent's CHILD step that started
// child k (its id is derived from it), 0 if none up to 100 is.
func childAttempt(parent uuid.UUID, k store.Run) int {
	for a := 1; a <= 100; a++ {
		if protocol.ChildRunID(parent, k.ParentStepID, a) == k.ID {
			return a
		}
	}
	return 0
}

// Run runs ps end to end and returns how each ended.
func (d *Driver) Run(ctx context.Context, ps []modeltest.Program) ([]modeltest.Observed, error) {
	ids, err := d.Launch(ctx, ps)
	if err != nil {
		return nil, err
	}
	if err := d.WaitAll(ctx, ids); err != nil {
		return nil, err
	}
	return d.Observe(ctx, ps, ids)
}

// Try runs ps through the engine (concurrently) and judges them: Shrink's
// test.
func (d *Driver) Try(ctx context.Context, ps []modeltest.Program, crashes bool) ([]modeltest.Verdict, error) {
	obs, err := d.Run(ctx, ps)
	if err != nil {
		return nil, err
	}
	return modeltest.Judge(ps, obs, crashes), nil
}
