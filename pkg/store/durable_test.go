package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// Child runs, fan-in, cascading cancel, waits, event receipt, retries of
// failed runs and concurrency limits.

// startChild starts child step id of the parent under lease l.
func (e *env) startChild(l store.Lease, step string, input string) uuid.UUID {
	e.t.Helper()
	return e.startChildWith(l, step, input, "")
}

// startChildWith starts a child of type C with a parent-close policy.
func (e *env) startChildWith(l store.Lease, step string, input string, policy store.ParentClosePolicy) uuid.UUID {
	e.t.Helper()
	child := uuid.NewSHA1(l.RunID, []byte(step))
	err := e.s.RunsStartChild(e.ctx, store.RunsStartChildParams{Lease: l, StepID: step, Attempt: 1, ChildRunID: child,
		Type: "C", Input: []byte(input), ParentClosePolicy: policy})
	if err != nil {
		e.t.Fatalf("start child %s: %v", step, err)
	}
	return child
}

// claimRun claims the given run of type typ (releasing the others of that
// type it claims on the way).
func (e *env) claimRun(id uuid.UUID, typ string) store.ClaimedRun {
	e.t.Helper()
	got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: typ}}, Limit: 100, Lease: time.Minute})
	var out *store.ClaimedRun
	for i, c := range got {
		if c.ID == id {
			out = &got[i]
		} else if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
			e.t.Fatal(err)
		}
	}
	if out == nil {
		e.t.Fatalf("run %s of type %s was not claimable (claimed %d others)", id, typ, len(got))
	}
	return *out
}

func stepOf(c store.ClaimedRun, id string) *store.StepState {
	for i := range c.Steps {
		if c.Steps[i].StepID == id {
			return &c.Steps[i]
		}
	}
	return nil
}

func TestChildrenFanInWakesParentOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P", TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	pc := e.claimRun(parent.ID, "P")
	pl := leaseOf(pc)
	a := e.startChild(pl, "a", `1`)
	b := e.startChild(pl, "b", `2`)
	// A replayed start finds the child there.
	if again := e.startChild(pl, "a", `1`); again != a {
		t.Fatal("child id not deterministic")
	}
	kids, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", ParentID: &parent.ID})
	if err != nil || len(kids) != 2 {
		t.Fatalf("children: %d %v", len(kids), err)
	}
	child := e.get("ns", a)
	if child.ParentRunID == nil || *child.ParentRunID != parent.ID || child.ParentStepID != "a" || child.Queue != "q" ||
		child.TraceContext != parent.TraceContext || string(child.Input) != "1" || child.Status != store.StatusPending {
		t.Fatalf("child row %+v", child)
	}
	ready, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: []string{"a", "b"}})
	if err != nil || ready {
		t.Fatalf("wait: ready=%v %v", ready, err)
	}
	// A retried wait is a no-op success.
	if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: []string{"a", "b"}}); err != nil {
		t.Fatalf("retried wait: %v", err)
	}
	if p := e.get("ns", parent.ID); p.Status != store.StatusSleeping || p.AvailableAt != nil {
		t.Fatalf("parent after wait: %s %v", p.Status, p.AvailableAt)
	}
	ac := e.claimRun(a, "C")
	if err := e.s.RunsComplete(e.ctx, leaseOf(ac), []byte(`"A"`)); err != nil {
		t.Fatal(err)
	}
	if p := e.get("ns", parent.ID); p.AvailableAt != nil {
		t.Fatalf("parent woken with child b still running (due %v)", p.AvailableAt)
	}
	bc := e.claimRun(b, "C")
	if res, err := e.s.RunsFailAttempt(e.ctx, leaseOf(bc), "boom", "E", true); err != nil || res.Status != store.StatusFailed {
		t.Fatalf("fail child: %+v %v", res, err)
	}
	if p := e.get("ns", parent.ID); p.Status != store.StatusSleeping || p.AvailableAt == nil {
		t.Fatalf("parent not woken after its last child finished: %s %v", p.Status, p.AvailableAt)
	}
	pc = e.claimRun(parent.ID, "P")
	sa, sb := stepOf(pc, "a"), stepOf(pc, "b")
	if sa == nil || sa.Status != store.StepCompleted || string(sa.Output) != `"A"` {
		t.Fatalf("step a %+v", sa)
	}
	if sb == nil || sb.Status != store.StepFailed || sb.ErrorType != "ChildFailed" || sb.RetryAt != nil || sb.RunAttempt != 1 {
		t.Fatalf("step b %+v", sb)
	}
	if want := fmt.Sprintf("child run %s failed: boom", b); sb.Error != want {
		t.Fatalf("step b error %q, want %q", sb.Error, want)
	}
}

// Children finishing concurrently, each in its own transaction, wake the
// parent: the last one sees the waiting list empty whatever the commit order.
func TestConcurrentChildrenNeverLoseTheWakeup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for round := 0; round < 5; round++ {
		parent := e.create(store.RunsCreateParams{Type: "P"})
		pl := leaseOf(e.claimRun(parent.ID, "P"))
		const n = 8
		var steps []string
		var kids []uuid.UUID
		for i := 0; i < n; i++ {
			step := fmt.Sprintf("c%d", i)
			steps = append(steps, step)
			kids = append(kids, e.startChild(pl, step, "null"))
		}
		claimed := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "C"}}, Limit: n, Lease: time.Minute})
		if len(claimed) != n {
			t.Fatalf("claimed %d children", len(claimed))
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(n + 1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: steps}); err != nil {
				t.Errorf("wait: %v", err)
			}
		}()
		for _, c := range claimed {
			go func(c store.ClaimedRun) {
				defer wg.Done()
				<-start
				if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("1")); err != nil {
					t.Errorf("complete child: %v", err)
				}
			}(c)
		}
		close(start)
		wg.Wait()
		p := e.get("ns", parent.ID)
		if p.Status != store.StatusSleeping || p.AvailableAt == nil {
			t.Fatalf("round %d: every child finished but the parent is %s, due %v", round, p.Status, p.AvailableAt)
		}
	}
}

func TestWaitForFinishedChildrenIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pl := leaseOf(e.claimRun(parent.ID, "P"))
	a := e.startChild(pl, "a", "null")
	if err := e.s.RunsComplete(e.ctx, leaseOf(e.claimRun(a, "C")), []byte("7")); err != nil {
		t.Fatal(err)
	}
	ready, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: []string{"a"}})
	if err != nil || !ready {
		t.Fatalf("wait for a finished child: ready=%v %v", ready, err)
	}
	// A wait with a timer and no children is due at the timer.
	pl = leaseOf(e.claimRun(parent.ID, "P"))
	until := time.Now().Add(time.Hour)
	if ready, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, Until: &until}); err != nil || ready {
		t.Fatalf("timer wait: %v %v", ready, err)
	}
	if p := e.get("ns", parent.ID); p.AvailableAt == nil || p.AvailableAt.Sub(until).Abs() > time.Millisecond {
		t.Fatalf("due %v, want %v", p.AvailableAt, until)
	}
	// A stale lease cannot wait.
	if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: store.Lease{Namespace: "ns", RunID: parent.ID, Token: 1}}); !errors.Is(
		err,
		store.ErrLeaseLost,
	) {
		t.Fatalf("stale wait: %v", err)
	}
}

// A request to cancel a parent reaches its children (but not those it
// abandons); when the parent ends, each live child gets its parent-close
// policy: terminated (the default), asked to cancel, or left running. A
// terminated child is recorded in the parent's history.
func TestCancelRequestAndParentClosePolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pl := leaseOf(e.claimRun(parent.ID, "P"))
	a := e.startChild(pl, "a", "null")
	b := e.startChild(pl, "b", "null")
	asked := e.startChildWith(pl, "asked", "null", store.ParentCloseRequestCancel)
	kept := e.startChildWith(pl, "kept", "null", store.ParentCloseAbandon)
	bc := e.claimRun(b, "C")
	grand := e.startChild(leaseOf(bc), "g", "null")
	if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	// Terminating one child records it in the parent, which keeps waiting for b.
	if _, err := e.s.RunsTerminate(e.ctx, "ns", a, ""); err != nil {
		t.Fatal(err)
	}
	if p := e.get("ns", parent.ID); p.AvailableAt != nil {
		t.Fatalf("parent woken while b runs")
	}
	// Asking the parent to cancel asks b and the child it asks to cancel on
	// close; b's unstarted child is cancelled at once; the abandoned child
	// is not asked.
	if _, err := e.s.RunsCancel(e.ctx, "ns", parent.ID); err != nil {
		t.Fatal(err)
	}
	if p := e.get("ns", parent.ID); p.Status != store.StatusSleeping || p.CancelRequestedAt == nil || p.AvailableAt == nil {
		t.Fatalf("parent after the request: %+v", p)
	}
	if r := e.get("ns", b); r.Status != store.StatusRunning || r.CancelRequestedAt == nil {
		t.Fatalf("running child after the request: %s asked %v", r.Status, r.CancelRequestedAt)
	}
	if r := e.get("ns", grand); r.Status != store.StatusCancelled || r.Error != "parent cancelled" {
		t.Fatalf("unstarted grandchild: %s %q", r.Status, r.Error)
	}
	if r := e.get("ns", kept); r.CancelRequestedAt != nil || r.Status != store.StatusPending {
		t.Fatalf("abandoned child was asked to cancel: %+v", r)
	}
	// The parent's workflow handles the request and stops: it ends
	// CANCELLED, and its children get their policies.
	pl = leaseOf(e.claimRun(parent.ID, "P"))
	res, err := e.s.RunsFailAttempt(e.ctx, pl, "workflow: run cancelled", "", false)
	if err != nil || res.Status != store.StatusCancelled {
		t.Fatalf("parent stops: %+v %v", res, err)
	}
	if r := e.get("ns", b); r.Status != store.StatusCancelled || r.Error != "terminated: parent closed" {
		t.Fatalf("child terminated on close: %s %q", r.Status, r.Error)
	}
	// (Claimed once and released by claimRun above, so it counts as
	// started: it is asked, and due, rather than cancelled at once.)
	if r := e.get("ns", asked); r.Status != store.StatusPending || r.CancelRequestedAt == nil || r.AvailableAt == nil {
		t.Fatalf("child asked to cancel on close: %+v", r)
	}
	if r := e.get("ns", kept); r.Status != store.StatusPending || r.CancelRequestedAt != nil {
		t.Fatalf("abandoned child after the close: %+v", r)
	}
	steps, err := e.s.StepsList(e.ctx, "ns", parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.StepID == "kept" || s.StepID == "asked" {
			if s.Status != store.StepPending {
				t.Fatalf("live child's step %s: %s", s.StepID, s.Status)
			}
			continue
		}
		if s.Status != store.StepFailed || s.ErrorType != "ChildCancelled" {
			t.Fatalf("parent step %s: %s %s", s.StepID, s.Status, s.ErrorType)
		}
	}
}

// A child asked to cancel when its parent ends, that is running, keeps its
// lease and is told; a sleeping one is made due.
func TestParentCloseRequestsCancelOfStartedChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pl := leaseOf(e.claimRun(parent.ID, "P"))
	run := e.startChildWith(pl, "run", "null", store.ParentCloseRequestCancel)
	nap := e.startChildWith(pl, "nap", "null", store.ParentCloseRequestCancel)
	rc := e.claimRun(run, "C")
	nc := e.claimRun(nap, "C")
	future := time.Now().Add(time.Hour)
	if err := e.s.RunsSleep(e.ctx, leaseOf(nc), &future); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsComplete(e.ctx, pl, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if r := e.get("ns", run); r.Status != store.StatusRunning || r.CancelRequestedAt == nil || r.LeaseToken != rc.LeaseToken {
		t.Fatalf("running child: %+v", r)
	}
	if r := e.get("ns", nap); r.Status != store.StatusSleeping || r.CancelRequestedAt == nil || r.AvailableAt.After(time.Now()) {
		t.Fatalf("sleeping child: %+v", r)
	}
}

// The reaper's recoveries and deadlines fail runs too: a child failed by them
// wakes its parent.
func TestChildFailedByDeadlineWakesParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pl := leaseOf(e.claimRun(parent.ID, "P"))
	a := e.startChild(pl, "a", "null")
	e.exec(`UPDATE kagzi.workflow_runs SET deadline_at = now() - interval '1 second' WHERE run_id = $1`, a)
	if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: pl, ChildSteps: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	failed, err := e.s.RunsFailPastDeadline(e.ctx, time.Now())
	if err != nil || len(failed) != 1 || failed[0].ID != a {
		t.Fatalf("fail past deadline: %+v %v", failed, err)
	}
	if p := e.get("ns", parent.ID); p.AvailableAt == nil {
		t.Fatal("parent not woken by its child's deadline")
	}
}

func TestEventsReceive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.create(store.RunsCreateParams{Type: "P"})
	l := leaseOf(e.claimRun(run.ID, "P"))
	recv := func(step, name string, until *time.Time, suspend bool) store.EventsReceiveResult {
		t.Helper()
		res, err := e.s.EventsReceive(
			e.ctx,
			store.EventsReceiveParams{Lease: l, StepID: step, Attempt: 1, Name: name, Until: until, Suspend: suspend},
		)
		if err != nil {
			t.Fatalf("receive %s: %v", step, err)
		}
		return res
	}
	// Sent before the wait: received at once, recorded as the step's output.
	sendEvent(t, e.s, "ns", run.ID, "paid", `{"n":1}`)
	if res := recv("e1", "paid", nil, true); res.Status != store.EventReceived || string(res.Payload) != `{"n":1}` {
		t.Fatalf("early event: %+v", res)
	}
	if res := recv("e1", "paid", nil, true); res.Status != store.EventReceived || string(res.Payload) != `{"n":1}` {
		t.Fatalf("retried receive: %+v", res)
	}
	// A timeout in the past times out (the step is recorded FAILED).
	past := time.Now().Add(-time.Second)
	if res := recv("e2", "other", &past, true); res.Status != store.EventTimedOut {
		t.Fatalf("timeout: %+v", res)
	}
	// No event: the wait is recorded with its timeout and the run suspended.
	until := time.Now().Add(time.Hour)
	if res := recv("e3", "late", &until, true); res.Status != store.EventWaiting || res.Ready {
		t.Fatalf("wait: %+v", res)
	}
	if r := e.get("ns", run.ID); r.Status != store.StatusSleeping || r.AvailableAt == nil || r.AvailableAt.Sub(until).Abs() > time.Millisecond {
		t.Fatalf("waiting run: %s due %v", r.Status, r.AvailableAt)
	}
	if res := recv("e3", "late", &until, true); res.Status != store.EventWaiting {
		t.Fatalf("retried wait: %+v", res)
	}
	// The event wakes it; the replay (a later timeout offered) receives it.
	if ev := sendEvent(t, e.s, "ns", run.ID, "late", `"x"`); !ev.Woken {
		t.Fatal("waiting run not woken")
	}
	c := e.claimRun(run.ID, "P")
	l = leaseOf(c)
	if s := stepOf(c, "e3"); s == nil || s.Status != store.StepPending || s.RetryAt == nil || s.RetryAt.Sub(until).Abs() > time.Millisecond {
		t.Fatalf("delivered wait in progress: %+v", s)
	}
	later := time.Now().Add(2 * time.Hour)
	if res := recv("e3", "late", &later, true); res.Status != store.EventReceived || string(res.Payload) != `"x"` {
		t.Fatalf("woken wait: %+v", res)
	}
	steps, err := e.s.StepsList(e.ctx, "ns", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.StepStatus{"e1": store.StepCompleted, "e2": store.StepFailed, "e3": store.StepCompleted}
	for _, s := range steps {
		if s.Kind != store.StepEvent || want[s.StepID] != s.Status {
			t.Fatalf("step %s %s %s", s.StepID, s.Kind, s.Status)
		}
		if s.StepID == "e2" && s.ErrorType != store.EventTimeoutType {
			t.Fatalf("timeout error type %q", s.ErrorType)
		}
	}
	// A non-JSON payload reaches the workflow as a JSON string.
	sendEvent(t, e.s, "ns", run.ID, "raw", `not json`)
	if res := recv("e4", "raw", nil, false); string(res.Payload) != `"not json"` {
		t.Fatalf("raw payload: %s", res.Payload)
	}
}

func TestWaitingRunWokenByEventEvenWhenParkedInParallel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.create(store.RunsCreateParams{Type: "P"})
	l := leaseOf(e.claimRun(run.ID, "P"))
	// Two waits recorded without suspending (two parallel branches), then
	// the run suspends on a timer: both waits are honoured.
	t1 := time.Now().Add(time.Hour)
	t2 := time.Now().Add(30 * time.Minute)
	for _, w := range []struct {
		step, name string
		until      *time.Time
	}{{"w1", "a", &t1}, {"w2", "b", &t2}} {
		res, err := e.s.EventsReceive(e.ctx, store.EventsReceiveParams{Lease: l, StepID: w.step, Attempt: 1, Name: w.name, Until: w.until})
		if err != nil || res.Status != store.EventWaiting {
			t.Fatalf("receive %s: %+v %v", w.step, res, err)
		}
	}
	timer := time.Now().Add(2 * time.Hour)
	if _, err := e.s.RunsWait(e.ctx, store.RunsWaitParams{Lease: l, Until: &timer}); err != nil {
		t.Fatal(err)
	}
	if r := e.get("ns", run.ID); r.AvailableAt == nil || r.AvailableAt.Sub(t2).Abs() > time.Millisecond {
		t.Fatalf("due %v, want the earliest timeout %v", r.AvailableAt, t2)
	}
	if ev := sendEvent(t, e.s, "ns", run.ID, "a", "1"); !ev.Woken {
		t.Fatal("an event of either wait must wake the run")
	}
}

func TestStepAttemptsCarryRunAttemptAndTries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.create(store.RunsCreateParams{Type: "P"})
	l := leaseOf(e.claimRun(run.ID, "P"))
	retryAt := time.Now().Add(time.Hour)
	for i := 1; i <= 2; i++ {
		if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: l, StepID: "s", Attempt: i, Kind: store.StepFunction, Status: store.StepFailed,
			Error: "boom", ErrorType: "Boom", RetryAt: &retryAt}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.RunsSleep(e.ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, run.ID)
	c := e.claimRun(run.ID, "P")
	s := stepOf(c, "s")
	if s == nil || s.Attempt != 2 || s.Tries != 2 || s.RunAttempt != 1 || s.ErrorType != "Boom" || s.RetryAt == nil ||
		!s.RetryAt.Equal(retryAt.Truncate(time.Microsecond)) {
		t.Fatalf("step %+v", s)
	}
	// The run fails for good; a manual retry resets its attempts and moves
	// the step's attempts to an earlier epoch (a fresh step budget).
	if _, err := e.s.RunsFailAttempt(e.ctx, leaseOf(c), "gave up", "Boom", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RunsRetry(e.ctx, "ns", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
	r, err := e.s.RunsRetry(e.ctx, "ns", run.ID)
	if err != nil || r.Status != store.StatusPending || r.Attempts != 0 || r.Error != "" || r.FinishedAt != nil || r.AvailableAt == nil {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if _, err := e.s.RunsRetry(e.ctx, "ns", run.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("retry of a pending run: %v", err)
	}
	c = e.claimRun(run.ID, "P")
	if s := stepOf(c, "s"); c.Attempts != 1 || s == nil || s.RunAttempt != 0 || s.Tries != 0 {
		t.Fatalf("after retry: attempts %d, step %+v", c.Attempts, s)
	}
}

func TestConcurrencyLimitCapsRunningRunsOfAType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "L", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "L", -1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative limit: %v", err)
	}
	for i := 0; i < 20; i++ {
		e.create(store.RunsCreateParams{Type: "L"})
		e.create(store.RunsCreateParams{Type: "U"})
	}
	types := []store.TypeVersion{{Type: "L"}, {Type: "U"}}
	count := func() (l, u int) {
		t.Helper()
		var nl, nu int
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE workflow_type = 'L'), count(*) FILTER (WHERE workflow_type = 'U')
FROM kagzi.workflow_runs WHERE status = 'RUNNING'`).Scan(&nl, &nu); err != nil {
			t.Fatal(err)
		}
		return nl, nu
	}
	// Many claimers at once never exceed the limit.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.s.RunsClaim(e.ctx, store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
				Types: types, Limit: 2, Lease: time.Minute}); err != nil {
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if nl, nu := count(); nl != 3 || nu != 13 {
		t.Fatalf("running: L %d (limit 3), U %d (want the other 13 of 16 slots)", nl, nu)
	}
	// Finishing one frees one slot.
	var id uuid.UUID
	var tok int64
	if err := e.pool.QueryRow(e.ctx, `SELECT run_id, lease_token FROM kagzi.workflow_runs
		WHERE workflow_type = 'L' AND status = 'RUNNING' LIMIT 1`).Scan(&id, &tok); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RunsComplete(e.ctx, store.Lease{Namespace: "ns", RunID: id, Token: tok}, nil); err != nil {
		t.Fatal(err)
	}
	got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(), Types: types[:1], Limit: 10, Lease: time.Minute})
	if len(got) != 1 {
		t.Fatalf("claimed %d L runs after one finished, want 1", len(got))
	}
	// 0 pauses the type; deleting the limit lifts it.
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "L", 0); err != nil {
		t.Fatal(err)
	}
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(), Types: types[:1], Limit: 10, Lease: time.Minute}); len(
		got,
	) != 0 {
		t.Fatalf("claimed %d runs of a paused type", len(got))
	}
	limits, err := e.s.LimitsList(e.ctx, "ns")
	if err != nil || len(limits) != 1 || limits[0].Type != "L" || limits[0].MaxRunning != 0 {
		t.Fatalf("limits %+v %v", limits, err)
	}
	if err := e.s.LimitsDelete(e.ctx, "ns", "q", "L"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.LimitsDelete(e.ctx, "ns", "q", "L"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got := e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(), Types: types[:1], Limit: 100, Lease: time.Minute}); len(
		got,
	) != 16 {
		t.Fatalf("claimed %d once the limit was lifted, want the 16 left", len(got))
	}
}

func TestStartChildUnderLostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.create(store.RunsCreateParams{Type: "P", RetryPolicy: &retry.Policy{MaxAttempts: 2}})
	l := leaseOf(e.claimRun(parent.ID, "P"))
	if err := e.s.RunsRelease(e.ctx, l); err != nil {
		t.Fatal(err)
	}
	child := uuid.NewSHA1(parent.ID, []byte("x"))
	err := e.s.RunsStartChild(e.ctx, store.RunsStartChildParams{Lease: l, StepID: "x", Attempt: 1, ChildRunID: child, Type: "C"})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("start under a lost lease: %v", err)
	}
	if _, err := e.s.RunsGet(e.ctx, "ns", child); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("child exists after a refused start: %v", err)
	}
}

// A limit set while runs of the type run counts them.
func TestConcurrencyLimitCountsRunsAlreadyRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.create(store.RunsCreateParams{Type: "L"})
	}
	p := store.RunsClaimParams{
		Namespace: "ns",
		Queue:     "q",
		WorkerID:  uuid.New(),
		Types:     []store.TypeVersion{{Type: "L"}},
		Limit:     3,
		Lease:     time.Minute,
	}
	if got := e.claim(p); len(got) != 3 {
		t.Fatalf("claimed %d before the limit", len(got))
	}
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "L", 3); err != nil {
		t.Fatal(err)
	}
	p.Limit = 10
	if got := e.claim(p); len(got) != 0 {
		t.Fatalf("claimed %d with 3 running under a limit of 3", len(got))
	}
	if _, err := e.s.LimitsSet(e.ctx, "ns", "q", "L", 4); err != nil {
		t.Fatal(err)
	}
	if got := e.claim(p); len(got) != 1 {
		t.Fatalf("claimed %d after raising the limit to 4, want 1", len(got))
	}
}

// A failure report's text comes from user code: NUL bytes, invalid UTF-8
// and a message past the limit, cut inside a multibyte character, must
// still be stored rather than refused by Postgres.
func TestFailReportWithUnstorableTextIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"})
	c := e.claimRun(r.ID, "T")
	msg := "bad \x00 byte \xff " + strings.Repeat("é", 8<<10)
	errType := "Type\x00\xfe" + strings.Repeat("ß", 200)
	if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: leaseOf(c), StepID: "s", Attempt: 1,
		Kind: store.StepFunction, Status: store.StepFailed, Error: msg, ErrorType: errType}); err != nil {
		t.Fatalf("step report: %v", err)
	}
	steps, err := e.s.StepsList(e.ctx, "ns", r.ID)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps %+v %v", steps, err)
	}
	if st := steps[0]; !utf8.ValidString(st.Error) || !utf8.ValidString(st.ErrorType) || !strings.HasPrefix(st.ErrorType, "Type\uFFFD\uFFFDß") {
		t.Fatalf("stored step error type %q", st.ErrorType)
	}
	res, err := e.s.RunsFailAttempt(e.ctx, leaseOf(c), msg, errType, true)
	if err != nil || res.Status != store.StatusFailed {
		t.Fatalf("fail: %+v %v", res, err)
	}
	got := e.get("ns", r.ID)
	if !utf8.ValidString(got.Error) || strings.ContainsRune(got.Error, 0) {
		t.Fatalf("stored error is not clean text: %q", got.Error[:40])
	}
	if !strings.HasPrefix(got.Error, "bad \uFFFD byte \uFFFD é") || len(got.Error) > 8<<10 || len(got.Error) < 8<<10-2 {
		t.Fatalf("stored error: %d bytes, starts %q", len(got.Error), got.Error[:20])
	}
}
