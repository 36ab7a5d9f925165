package modeltest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func ok(v int) Outcome        { return Outcome{Kind: OutOK, Value: v} }
func out(kind string) Outcome { return Outcome{Kind: kind} }

func step(id, onErr string, max int, nr []string, outs ...Outcome) Op {
	return Op{Kind: KindStep, ID: id, OnErr: onErr, Outcomes: outs, Retry: &Retry{MaxAttempts: max, IntervalMS: 5, NonRetryable: nr}}
}

func obsV(v string) Obs { return Obs{V: json.RawMessage(v)} }

// The model on hand-written programs whose outcome follows from the
// contract by hand.
func TestPredict(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Program
		want Prediction
	}{
		{
			name: "retried until success",
			p:    Program{Key: "k", Ops: []Op{step("s1", OnErrReturn, 3, nil, out(OutFail), out(OutTimeout), ok(7))}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Output: Record{"s1": obsV("7")},
				Invocations: map[string]int{"k/s1": 3}},
		},
		{
			name: "budget spent, error handled",
			p: Program{Key: "k", Ops: []Op{
				step("s1", OnErrHandle, 2, nil, out(OutFail)),
				step("s2", OnErrReturn, 1, nil, ok(1)),
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Output: Record{
				"s1": {Err: "step s1 attempt 2: Transient", Type: TypeTransient}, "s2": obsV("1")},
				Invocations: map[string]int{"k/s1": 2, "k/s2": 1}},
		},
		{
			name: "non-retryable mark and listed type stop retries",
			p: Program{Key: "k", Ops: []Op{
				step("s1", OnErrHandle, 5, nil, out(OutFatal), ok(1)),
				step("s2", OnErrHandle, 5, []string{TypeDeclined}, out(OutDeclined), ok(1)),
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Output: Record{
				"s1": {Err: "step s1 attempt 1: Fatal", Type: TypeFatal, NR: true},
				"s2": {Err: "step s2 attempt 1: Declined", Type: TypeDeclined}},
				Invocations: map[string]int{"k/s1": 1, "k/s2": 1}},
		},
		{
			name: "run retry gives failed steps a fresh budget and keeps completed ones",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 3, IntervalMS: 5}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, ok(5)),
				step("s2", OnErrReturn, 2, nil, out(OutFail), out(OutFail), out(OutFail), ok(9)),
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 2, Output: Record{"s1": obsV("5"), "s2": obsV("9")},
				Invocations: map[string]int{"k/s1": 1, "k/s2": 4}},
		},
		{
			name: "run fails once its attempts are spent, with the panic's message",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2, IntervalMS: 5}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, out(OutPanic)),
			}},
			want: Prediction{Status: StatusFailed, Attempts: 2, Error: "panic: step s1 attempt 2 panicked",
				Invocations: map[string]int{"k/s1": 2}},
		},
		{
			name: "a non-retryable error fails the run at once",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 3, IntervalMS: 5}, Ops: []Op{
				step("s1", OnErrReturn, 2, nil, out(OutFail), out(OutFatal)),
			}},
			want: Prediction{Status: StatusFailed, Attempts: 1, Error: "step s1 attempt 2: Fatal",
				Invocations: map[string]int{"k/s1": 2}},
		},
		{
			name: "a type the run policy lists fails the run at once",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 3, IntervalMS: 5, NonRetryable: []string{TypeDeclined}}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, out(OutDeclined)),
			}},
			want: Prediction{Status: StatusFailed, Attempts: 1, Error: "step s1 attempt 1: Declined",
				Invocations: map[string]int{"k/s1": 1}},
		},
		{
			name: "events: before, during, after (then taken by a later wait), never",
			p: Program{Key: "k", Ops: []Op{
				{Kind: KindWait, ID: "w1", OnErr: OnErrHandle, Name: "a", Send: SendBefore, Payload: "pa", TimeoutMS: 20},
				{Kind: KindWait, ID: "w2", OnErr: OnErrHandle, Name: "b", Send: SendDuring, Payload: "pb", TimeoutMS: 60000},
				{Kind: KindWait, ID: "w3", OnErr: OnErrHandle, Name: "c", Send: SendAfter, Payload: "pc", TimeoutMS: 20},
				{Kind: KindWait, ID: "w4", OnErr: OnErrHandle, Name: "c", Send: SendNever, TimeoutMS: 20},
				{Kind: KindWait, ID: "w5", OnErr: OnErrHandle, Name: "c", Send: SendNever, TimeoutMS: 20},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Invocations: map[string]int{}, Output: Record{
				"w1": obsV(`"pa"`), "w2": obsV(`"pb"`),
				"w3": {Err: `workflow: timed out waiting for event "c" (step "event:c")`, Type: TypeEventTimeout},
				"w4": obsV(`"pc"`),
				"w5": {Err: `workflow: timed out waiting for event "c" (step "event:c#3")`, Type: TypeEventTimeout},
			}},
		},
		{
			// The late event arrives during the execution, after the only
			// wait for its name: the engine refuses the run's end once and
			// executes it again, whose replay ends the same way.
			name: "a late event no wait takes is left unreceived",
			p: Program{Key: "k", Ops: []Op{
				{Kind: KindWait, ID: "w1", OnErr: OnErrHandle, Name: "a", Send: SendAfter, Payload: "late", TimeoutMS: 20},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Invocations: map[string]int{}, Output: Record{
				"w1": {Err: `workflow: timed out waiting for event "a" (step "event:a")`, Type: TypeEventTimeout},
			}, Unreceived: map[string]int{"k": 1}},
		},
		{
			name: "a new run attempt waits again for a wait that timed out, and takes the late event",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2, IntervalMS: 5}, Ops: []Op{
				{Kind: KindWait, ID: "w1", OnErr: OnErrReturn, Name: "a", Send: SendAfter, Payload: "late", TimeoutMS: 20},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 2, Invocations: map[string]int{}, Output: Record{"w1": obsV(`"late"`)}},
		},
		{
			name: "children: output, failure, restart with the parent's attempt",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2, IntervalMS: 5}, Ops: []Op{
				{Kind: KindChildren, ID: "c1", OnErr: OnErrHandle, Children: []Child{
					{ID: "c1-0", Program: Program{Key: "k.c1-0", Ops: []Op{step("s2", OnErrReturn, 1, nil, ok(3))}}, Retry: &Retry{MaxAttempts: 1}},
				}},
				{Kind: KindChildren, ID: "c3", OnErr: OnErrReturn, Children: []Child{
					{ID: "c3-0", Program: Program{Key: "k.c3-0", Ops: []Op{step("s4", OnErrReturn, 1, nil, out(OutFail))}}, Retry: &Retry{MaxAttempts: 2}},
					{ID: "c3-1", Program: Program{Key: "k.c3-1", Ops: []Op{step("s5", OnErrReturn, 1, nil, ok(8))}}, Retry: &Retry{MaxAttempts: 1}},
				}},
			}},
			want: Prediction{Status: StatusFailed, Attempts: 2,
				// Two parent attempts start the failing child twice; it
				// runs two attempts each time.
				Error:       "child run <child> failed: step s4 attempt 2: Transient",
				Invocations: map[string]int{"k.c1-0/s2": 1, "k.c3-0/s4": 4, "k.c3-1/s5": 1},
				Children:    map[string]int{"k.c1-0": 1, "k.c3-0": 2, "k.c3-1": 1}},
		},
		{
			name: "collect-all joins branch errors, typed by the first typed one",
			p: Program{Key: "k", Ops: []Op{{Kind: KindParallel, ID: "g1", OnErr: OnErrHandle, Mode: ModeCollectAll, Branches: [][]Op{
				{{Kind: KindStep, ID: "s2", OnErr: OnErrReturn, Outcomes: []Outcome{out(OutTimeout)}, Retry: &Retry{MaxAttempts: 1}, TimeoutMS: 5}},
				{step("s3", OnErrReturn, 1, nil, ok(1))},
				{step("s4", OnErrReturn, 1, nil, out(OutFatal))},
			}}}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Output: Record{
				"s2": {Err: "context deadline exceeded", Type: TypeStepTimeout},
				"s3": obsV("1"),
				"s4": {Err: "step s4 attempt 1: Fatal", Type: TypeFatal, NR: true},
				// A final timeout is a typed *workflow.StepError, the first
				// typed error of the join.
				"g1": {Err: "context deadline exceeded\nstep s4 attempt 1: Fatal", Type: TypeStepTimeout, NR: true},
			}, Invocations: map[string]int{"k/s2": 1, "k/s3": 1, "k/s4": 1}},
		},
		{
			name: "fail-fast returns the failing branch's error; the others are not predicted",
			p: Program{Key: "k", Ops: []Op{{Kind: KindParallel, ID: "g1", OnErr: OnErrHandle, Mode: ModeFailFast, Branches: [][]Op{
				{step("s2", OnErrHandle, 1, nil, ok(1)), {Kind: KindSleep, ID: "z3", MS: 10}},
				{step("s4", OnErrReturn, 1, nil, out(OutFail))},
			}}}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Unchecked: []string{"s2", "z3"}, Output: Record{
				"s2": obsV("1"),
				"s4": {Err: "step s4 attempt 1: Transient", Type: TypeTransient},
				"g1": {Err: "step s4 attempt 1: Transient", Type: TypeTransient},
			}, Invocations: map[string]int{"k/s2": 1, "k/s4": 1}},
		},
		{
			name: "a sleep past the deadline fails the run",
			p: Program{Key: "k", DeadlineMS: 1000, RunRetry: &Retry{MaxAttempts: 3}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, ok(1)),
				{Kind: KindSleep, ID: "z2", MS: LongSleepMS},
				step("s3", OnErrReturn, 1, nil, ok(1)),
			}},
			want: Prediction{Status: StatusFailed, Attempts: 1, Error: DeadlineError, Deadline: true,
				Invocations: map[string]int{"k/s1": 1}},
		},
		{
			name: "a cancel request: the cleanup step runs, the run ends CANCELLED with the error it returns",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 3}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, ok(1)),
				{Kind: KindCancel, ID: "x2", Name: "x2", OnErr: OnErrReturn, Cleanup: &Op{Kind: KindStep, ID: "s3", OnErr: OnErrHandle,
					Outcomes: []Outcome{out(OutFail), ok(5)}, Retry: &Retry{MaxAttempts: 2}}},
				step("s4", OnErrReturn, 1, nil, ok(1)),
			}},
			want: Prediction{Status: StatusCancelled, Attempts: 1, Error: CancelledError,
				Invocations: map[string]int{"k/s1": 1, "k/s3": 2}},
		},
		{
			name: "after a handled cancel request, new durable calls return the cancellation; recorded ones replay",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 3}, Ops: []Op{
				step("s1", OnErrReturn, 1, nil, ok(1)),
				{Kind: KindCancel, ID: "x2", Name: "x2", OnErr: OnErrHandle},
				step("s3", OnErrHandle, 1, nil, ok(1)),
				{Kind: KindWait, ID: "w4", OnErr: OnErrHandle, Name: "a", Send: SendBefore, Payload: "pa", TimeoutMS: 20},
				{Kind: KindChildren, ID: "c5", OnErr: OnErrHandle, Children: []Child{
					{ID: "c5-0", Program: Program{Key: "k.c5-0", Ops: []Op{step("s6", OnErrReturn, 1, nil, ok(3))}}},
					{ID: "c5-1", Program: Program{Key: "k.c5-1", Ops: []Op{step("s7", OnErrReturn, 1, nil, ok(3))}}},
				}},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Invocations: map[string]int{"k/s1": 1}, Output: Record{
				"s1": obsV("1"),
				"x2": {Err: CancelledError, Type: TypeCancelled},
				"s3": {Err: CancelledError, Type: TypeCancelled},
				"w4": {Err: CancelledError, Type: TypeCancelled},
				"c5": {V: json.RawMessage(`[null,null]`), Err: CancelledError + "\n" + CancelledError, Type: TypeJoined},
			}},
		},
		{
			name: "a terminated run ends CANCELLED at once",
			p: Program{Key: "k", Ops: []Op{
				step("s1", OnErrReturn, 1, nil, ok(1)),
				{Kind: KindTerminate, ID: "t2", Name: "t2"},
				step("s3", OnErrReturn, 1, nil, ok(1)),
			}},
			want: Prediction{Status: StatusCancelled, Attempts: 1, Error: "terminated: model t2",
				Invocations: map[string]int{"k/s1": 1}},
		},
		{
			name: "a child cancelled or terminated fails its parent's Get as ChildCancelled, and starts again with the parent's attempt",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2}, Ops: []Op{
				{Kind: KindChildren, ID: "c1", OnErr: OnErrHandle, Children: []Child{
					{ID: "c1-0", Program: Program{Key: "k.c1-0", Ops: []Op{{Kind: KindCancel, ID: "x2", Name: "x2", OnErr: OnErrReturn}}}, Retry: &Retry{MaxAttempts: 3}},
				}},
				{Kind: KindChildren, ID: "c3", OnErr: OnErrReturn, Children: []Child{
					{ID: "c3-0", Program: Program{Key: "k.c3-0", Ops: []Op{{Kind: KindTerminate, ID: "t4", Name: "t4"}}}},
				}},
			}},
			want: Prediction{Status: StatusFailed, Attempts: 2, Error: "child run <child> cancelled: terminated: model t4",
				Invocations: map[string]int{}, Children: map[string]int{"k.c1-0": 2, "k.c3-0": 2}},
		},
		{
			name: "detached children get their parent-close policy when the parent ends",
			p: Program{Key: "k", Ops: []Op{
				{Kind: KindDetach, ID: "d1", Name: "held-d1", Children: []Child{
					{ID: "d1-0", Policy: PolicyTerminate, Program: Program{Key: "k.d1-0", Ops: []Op{
						{Kind: KindHold, ID: "h2", Name: "h2", Payload: "r2", OnErr: OnErrReturn, Cleanup: &Op{Kind: KindStep, ID: "s3", Outcomes: []Outcome{ok(3)}}}}}},
					{ID: "d1-1", Policy: PolicyRequestCancel, Program: Program{Key: "k.d1-1", Ops: []Op{
						{Kind: KindHold, ID: "h4", Name: "h4", Payload: "r4", OnErr: OnErrHandle, Cleanup: &Op{Kind: KindStep, ID: "s5", Outcomes: []Outcome{ok(5)}}},
						step("s6", OnErrHandle, 1, nil, ok(6))}}},
					{ID: "d1-2", Policy: PolicyAbandon, Program: Program{Key: "k.d1-2", Ops: []Op{
						{Kind: KindHold, ID: "h7", Name: "h7", Payload: "r7", OnErr: OnErrReturn, Cleanup: &Op{Kind: KindStep, ID: "s8", Outcomes: []Outcome{ok(8)}}},
						step("s9", OnErrReturn, 1, nil, ok(9))}}},
				}},
				step("s10", OnErrReturn, 1, nil, out(OutFail)),
			}},
			want: Prediction{Status: StatusFailed, Attempts: 1, Error: "step s10 attempt 1: Transient",
				Invocations: map[string]int{"k/s10": 1, "k.d1-1/s5": 1, "k.d1-2/s8": 1, "k.d1-2/s9": 1},
				Children:    map[string]int{"k.d1-0": 1, "k.d1-1": 1, "k.d1-2": 1},
				Ends: map[string][]End{
					"k/d1-0#1": {{Status: StatusCancelled, Error: ParentClosedError}},
					"k/d1-1#1": {{Status: StatusCompleted, Output: Record{"h4": {Err: CancelledError, Type: TypeCancelled}, "s5": obsV("5"),
						"s6": {Err: CancelledError, Type: TypeCancelled}}}},
					"k/d1-2#1": {{Status: StatusCompleted, Output: Record{"h7": obsV(`"r7"`), "s8": obsV("8"), "s9": obsV("9")}}},
				}},
		},
		{
			name: "a cancel request reaches detached children but abandoned ones; a terminated one may end either way",
			p: Program{Key: "k", Ops: []Op{
				{Kind: KindDetach, ID: "d1", Name: "held-d1", Children: []Child{
					{ID: "d1-0", Policy: PolicyTerminate, Program: Program{Key: "k.d1-0", Ops: []Op{
						{Kind: KindHold, ID: "h2", Name: "h2", Payload: "r2", OnErr: OnErrReturn, Cleanup: &Op{Kind: KindStep, ID: "s3", Outcomes: []Outcome{ok(3)}}}}}},
					{ID: "d1-1", Policy: PolicyAbandon, Program: Program{Key: "k.d1-1", Ops: []Op{
						{Kind: KindHold, ID: "h4", Name: "h4", Payload: "r4", OnErr: OnErrReturn}}}},
				}},
				{Kind: KindCancel, ID: "x5", Name: "x5", OnErr: OnErrHandle},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1, Output: Record{"d1": obsV(`"held"`), "x5": {Err: CancelledError, Type: TypeCancelled}},
				Invocations: map[string]int{"k.d1-0/s3": 1}, AtMost: map[string]bool{"k.d1-0/s3": true},
				Children: map[string]int{"k.d1-0": 1, "k.d1-1": 1},
				Ends: map[string][]End{
					"k/d1-0#1": {{Status: StatusCancelled, Error: ParentClosedError}, {Status: StatusCancelled, Error: CancelledError}},
					"k/d1-1#1": {{Status: StatusCompleted, Output: Record{"h4": obsV(`"r4"`)}}},
				}},
		},
		{
			name: "durable state keeps the last value set per name, across a run retry",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2, IntervalMS: 5}, Ops: []Op{
				{Kind: KindState, ID: "k1", Name: "a", OnErr: OnErrHandle, Outcomes: []Outcome{ok(1)}},
				{Kind: KindState, ID: "k2", Name: "b", OnErr: OnErrHandle, Outcomes: []Outcome{ok(2)}},
				step("s1", OnErrReturn, 1, nil, out(OutFail), ok(4)),
				{Kind: KindState, ID: "k3", Name: "a", OnErr: OnErrHandle, Outcomes: []Outcome{ok(3)}},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 2,
				Output:      Record{"k1": obsV("1"), "k2": obsV("2"), "s1": obsV("4"), "k3": obsV("3")},
				Invocations: map[string]int{"k/s1": 2}, State: map[string]int{"a": 3, "b": 2}},
		},
		{
			name: "durable state set after a cancel request is not recorded",
			p: Program{Key: "k", Ops: []Op{
				{Kind: KindState, ID: "k1", Name: "a", OnErr: OnErrHandle, Outcomes: []Outcome{ok(1)}},
				{Kind: KindCancel, ID: "x2", Name: "x2", OnErr: OnErrHandle},
				{Kind: KindState, ID: "k3", Name: "a", OnErr: OnErrHandle, Outcomes: []Outcome{ok(3)}},
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 1,
				Output:      Record{"k1": obsV("1"), "x2": {Err: CancelledError, Type: TypeCancelled}, "k3": {Err: CancelledError, Type: TypeCancelled}},
				Invocations: map[string]int{}, State: map[string]int{"a": 1}},
		},
		{
			name: "updates are answered once, across a run retry",
			p: Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2, IntervalMS: 5}, Ops: []Op{
				{Kind: KindUpdate, ID: "u1", Name: "upd-u1", Payload: "r1", OnErr: OnErrHandle, Outcomes: []Outcome{ok(7)}},
				{Kind: KindUpdate, ID: "u2", Name: "upd-u2", Payload: "r2", OnErr: OnErrHandle, Outcomes: []Outcome{out(OutDeclined)}},
				step("s1", OnErrReturn, 1, nil, out(OutFail), ok(4)),
			}},
			want: Prediction{Status: StatusCompleted, Attempts: 2,
				Output:      Record{"u1": obsV(`"r1"`), "u2": obsV(`"r2"`), "s1": obsV("4")},
				Invocations: map[string]int{"k/s1": 2},
				Updates:     map[string]Obs{"u1": obsV(`"r1/7"`), "u2": {Err: "update u2: declined", Type: TypeDeclined}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Predict(tc.p)
			if tc.want.Children == nil {
				tc.want.Children = map[string]int{}
			}
			if tc.want.Ends == nil {
				tc.want.Ends = map[string][]End{}
			}
			if tc.want.AtMost == nil {
				tc.want.AtMost = map[string]bool{}
			}
			if !reflect.DeepEqual(normal(got), normal(tc.want)) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tc.want, "", " ")
				t.Fatalf("predicted\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// normal makes predictions comparable: JSON values re-encoded.
func normal(p Prediction) string {
	b, _ := json.Marshal(p)
	var v any
	_ = json.Unmarshal(b, &v)
	b, _ = json.Marshal(v)
	return string(b)
}

func TestCompare(t *testing.T) {
	p := Program{Key: "k", Ops: []Op{step("s1", OnErrHandle, 2, nil, out(OutFatal))}}
	pred := Predict(p)
	good := Observed{Status: StatusCompleted, Attempts: 1, Epoch: 1, Output: json.RawMessage(`{"s1":{"err":"step s1 attempt 1: Fatal","type":"Fatal","nr":true}}`),
		Invocations: map[string]int{"k/s1": 1}}
	if d := Compare(p, pred, good, false); len(d) != 0 {
		t.Fatalf("diffs of an agreeing outcome: %v", d)
	}
	more := good
	more.Invocations = map[string]int{"k/s1": 2}
	if d := Compare(p, pred, more, false); len(d) != 1 {
		t.Fatalf("an extra invocation without crashes: %v", d)
	}
	if d := Compare(p, pred, more, true); len(d) != 0 {
		t.Fatalf("an extra invocation under crashes: %v", d)
	}
	lost := good
	lost.Output = json.RawMessage(`{"s1":{"err":"step s1 attempt 1: Fatal","type":"Fatal"}}`)
	if d := Compare(p, pred, lost, false); len(d) != 1 {
		t.Fatalf("a lost non-retryable mark: %v", d)
	}
	recovered := good
	recovered.Attempts = 2
	if d := Compare(p, pred, recovered, false); len(d) != 1 {
		t.Fatalf("an attempt more than the epochs without crashes: %v", d)
	}
	if d := Compare(p, pred, recovered, true); len(d) != 0 {
		t.Fatalf("a recovery under crashes: %v", d)
	}
	epoch := recovered
	epoch.Epoch = 2
	if d := Compare(p, pred, epoch, true); len(d) != 1 {
		t.Fatalf("a retry epoch more under crashes: %v", d)
	}
	unreceived := good
	unreceived.Unreceived = map[string]int{"k": 1}
	if d := Compare(p, pred, unreceived, false); len(d) != 1 {
		t.Fatalf("an event unreceived the model does not leave: %v", d)
	}
	unreceived.Unreceived = map[string]int{"k": 0}
	if d := Compare(p, pred, unreceived, false); len(d) != 0 {
		t.Fatalf("no event unreceived: %v", d)
	}
}

// Under crashes, a run whose attempts crashes spent may fail with the crash,
// or with the error of the epoch it was in; nothing else.
func TestCheckCrashFacts(t *testing.T) {
	const lostMsg = "worker 0190a4c2-1111-7222-8333-944455556666 lost"
	child := Program{Key: "k.c1-0", Ops: []Op{step("s2", OnErrReturn, 1, nil, ok(3))}}
	p := Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2}, Ops: []Op{
		{Kind: KindChildren, ID: "c1", OnErr: OnErrReturn, Children: []Child{{ID: "c1-0", Program: child, Retry: &Retry{MaxAttempts: 1}}}},
	}}
	// The child's only attempt lost with its worker: the parent sees the
	// failure and starts it again in its second attempt.
	obs := Observed{Status: StatusCompleted, Attempts: 2, Epoch: 2, Output: json.RawMessage(`{"c1":{"v":{"s2":{"v":3}}}}`),
		Invocations: map[string]int{"k.c1-0/s2": 1}, ChildRuns: map[string]int{"k.c1-0": 2},
		Runs: map[string]RunEnd{
			"k":        {Status: StatusCompleted, Attempts: 2, Epoch: 2},
			"k/c1-0#1": {Status: StatusFailed, Error: lostMsg, Attempts: 1, Epoch: 1},
			"k/c1-0#2": {Status: StatusCompleted, Attempts: 1, Epoch: 1},
		}}
	if _, d := Check(p, obs, true); len(d) != 0 {
		t.Fatalf("a child lost once its attempts were spent: %v", d)
	}
	if _, d := Check(p, obs, false); len(d) == 0 {
		t.Fatal("the same without crashes is no divergence")
	}
	// A crash of a run whose policy had attempts left is no excuse.
	p.Ops[0].Children[0].Retry = &Retry{MaxAttempts: 2}
	if _, d := Check(p, obs, true); len(d) == 0 {
		t.Fatal("a child lost with attempts left is no divergence")
	}

	// A run whose recoveries spent its attempts fails with its workflow's
	// error in the epoch it was in.
	q := Program{Key: "q", RunRetry: &Retry{MaxAttempts: 2}, Ops: []Op{step("s1", OnErrReturn, 1, nil, out(OutFail), ok(1))}}
	failed := Observed{Status: StatusFailed, Error: "step s1 attempt 1: Transient", Attempts: 2, Epoch: 1,
		Invocations: map[string]int{"q/s1": 1}, Runs: map[string]RunEnd{"q": {Status: StatusFailed, Error: "step s1 attempt 1: Transient", Attempts: 2, Epoch: 1}}}
	if _, d := Check(q, failed, true); len(d) != 0 {
		t.Fatalf("a run failed in its first epoch after a recovery: %v", d)
	}
	if _, d := Check(q, failed, false); len(d) == 0 {
		t.Fatal("the same without crashes is no divergence")
	}

	// Faults may delay a run with a deadline past it; only then.
	late := Observed{Status: StatusFailed, Error: DeadlineError, Attempts: 1, Epoch: 1, Invocations: map[string]int{},
		Runs: map[string]RunEnd{"q": {Status: StatusFailed, Error: DeadlineError, Attempts: 1, Epoch: 1}}}
	if _, d := Check(q, late, true); len(d) == 0 {
		t.Fatal("a run without a deadline failed by one")
	}
	q.DeadlineMS = DeadlineMS
	if _, d := Check(q, late, true); len(d) != 0 {
		t.Fatalf("a run delayed past its deadline by faults: %v", d)
	}
	if _, d := Check(q, late, false); len(d) == 0 {
		t.Fatal("the same without faults is no divergence")
	}
}

// A root whose deadline ends it by design (a sleep past it): faults that
// delayed a grandchild's branch let the deadline close the tree before a
// request-cancel child detached below started, far earlier than the
// model's fault-free timeline. That is excused only when the facts (under
// crashes) say the root ended by its deadline.
func TestCheckDeadlineCutsTree(t *testing.T) {
	grand := Program{Key: "k.c1-0", Ops: []Op{
		{Kind: KindDetach, ID: "d2", Name: "held-d2", Children: []Child{
			{ID: "d2-0", Policy: PolicyRequestCancel, Retry: &Retry{MaxAttempts: 2}, Program: Program{Key: "k.c1-0.d2-0", Ops: []Op{
				{Kind: KindHold, ID: "h3", Name: "h3", Payload: "r3", OnErr: OnErrHandle, Cleanup: &Op{Kind: KindStep, ID: "s4", Outcomes: []Outcome{ok(4)}}},
				step("s5", OnErrHandle, 1, nil, ok(5))}}},
		}},
		step("s6", OnErrHandle, 1, nil, ok(6)),
	}}
	p := Program{Key: "k", DeadlineMS: DeadlineMS, Ops: []Op{
		{Kind: KindChildren, ID: "c1", OnErr: OnErrHandle, Children: []Child{{ID: "c1-0", Program: grand, Retry: &Retry{MaxAttempts: 1}}}},
		{Kind: KindSleep, ID: "z7", MS: 10 * DeadlineMS},
	}}
	const inst = "k/c1-0#1/d2-0#1"
	pred := Predict(p)
	if !pred.Deadline || len(pred.Ends[inst]) != 1 || pred.Ends[inst][0].Status != StatusCompleted {
		t.Fatalf("fault-free, the root ends by its deadline after the child ran its request-cancel child: %+v", pred)
	}
	// The root's deadline came while its child, just past the detach, was
	// still running: the child was terminated and its request-cancel child
	// closed unstarted.
	obs := Observed{Status: StatusFailed, Error: DeadlineError, Attempts: 1, Epoch: 1,
		Invocations: map[string]int{}, ChildRuns: map[string]int{"k.c1-0": 1, "k.c1-0.d2-0": 1},
		Runs: map[string]RunEnd{
			"k":        {Status: StatusFailed, Error: DeadlineError, Attempts: 1, Epoch: 1},
			"k/c1-0#1": {Status: StatusCancelled, Error: ParentClosedError, Attempts: 1, Epoch: 1},
			inst:       {Status: StatusCancelled, Error: UnstartedClosedError, Attempts: 0, Epoch: 1},
		}}
	if _, d := Check(p, obs, true); len(d) != 0 {
		t.Fatalf("a tree cut by the root's deadline after faults delayed it: %v", d)
	}
	// No fault explains the cut: the model's timeline reaches the detach
	// long before the deadline.
	if _, d := Check(p, obs, false); len(d) != 1 {
		t.Fatalf("a tree cut early by a deadline without faults: %v", d)
	}
	// Under crashes, a root that did not end by its deadline excuses no
	// unstarted close below it.
	early := obs
	early.Status, early.Error = StatusCompleted, ""
	early.Runs = map[string]RunEnd{"k": {Status: StatusCancelled, Error: CancelledError, Attempts: 1, Epoch: 1},
		"k/c1-0#1": obs.Runs["k/c1-0#1"], inst: obs.Runs[inst]}
	if _, d := Check(p, early, true); !hasDiff(d, "detached child "+inst) {
		t.Fatalf("an unstarted close under a root that did not end by its deadline: %v", d)
	}
	// Nor is any other end of the request-cancel child excused.
	other := obs
	other.Runs = map[string]RunEnd{"k": obs.Runs["k"], "k/c1-0#1": obs.Runs["k/c1-0#1"],
		inst: {Status: StatusCancelled, Error: ParentClosedError, Attempts: 1, Epoch: 1}}
	if _, d := Check(p, other, true); len(d) != 1 {
		t.Fatalf("a request-cancel child terminated under a root cut by its deadline: %v", d)
	}
}

func hasDiff(d []Diff, prefix string) bool {
	for _, x := range d {
		if strings.HasPrefix(x.Msg, prefix) {
			return true
		}
	}
	return false
}

func TestNormalizeMessage(t *testing.T) {
	in := "child run 0190a4c2-1111-7222-8333-944455556666 failed: panic: step s1 attempt 1 panicked\n\ngoroutine 7 [running]:\nruntime/debug.Stack()\n\t/x.go:1\nstep s2 attempt 1: Transient"
	want := "child run <child> failed: panic: step s1 attempt 1 panicked\nstep s2 attempt 1: Transient"
	if got := NormalizeMessage(in); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Generated programs are valid for the model and the interpreter: unique
// ids, children keyed after their parents, and the same program for the
// same seed and index.
func TestGenerate(t *testing.T) {
	kinds := map[string]int{}
	defer func() {
		// The determinism helpers are exercised, through every path.
		if kinds[KindSide] == 0 || kinds[KindVersion] == 0 || kinds[KindState] == 0 || kinds[KindUpdate] == 0 {
			t.Errorf("500 programs with %d side effects, %d version calls, %d state sets and %d updates",
				kinds[KindSide], kinds[KindVersion], kinds[KindState], kinds[KindUpdate])
		}
	}()
	for i := 0; i < 500; i++ {
		p := Generate(3, i)
		if q := Generate(3, i); p.String() != q.String() {
			t.Fatalf("program %d differs between two generations", i)
		}
		ids := map[string]bool{}
		var check func(p Program)
		check = func(p Program) {
			Walk(p.Ops, func(op *Op) {
				if ids[op.ID] {
					t.Fatalf("program %d: id %s twice", i, op.ID)
				}
				ids[op.ID] = true
				kinds[op.Kind]++
				for _, c := range op.Children {
					if c.Program.Key != p.Key+"."+c.ID {
						t.Fatalf("program %d: child key %s", i, c.Program.Key)
					}
					check(c.Program)
				}
			})
		}
		check(p)
		_ = Predict(p)
	}
}

func TestShrink(t *testing.T) {
	p := Generate(1, 3)
	// "Fails" while a fatal outcome is left anywhere.
	hasFatal := func(p Program) bool { return strings.Contains(p.String(), `"k":"fatal"`) }
	if !hasFatal(p) {
		p.Ops = append(p.Ops, step("s99", OnErrHandle, 1, nil, out(OutFatal)))
	}
	min, _ := Shrink(p, 10000, 4, func(ps []Program) []bool {
		out := make([]bool, len(ps))
		for i, q := range ps {
			out[i] = hasFatal(q)
		}
		return out
	})
	if n := len(min.Ops); n != 1 || min.Ops[0].Kind != KindStep || len(min.Ops[0].Outcomes) != 1 || min.RunRetry != nil {
		t.Fatalf("shrunk to %s", min)
	}
}

// A chain of runs ends as its last run; a run that fails does not
// continue; the steps of each program of the chain count under its own
// key; and an engine that does not continue diverges.
func TestPredictContinueAsNew(t *testing.T) {
	ok := func(id string, v int) Op {
		return Op{Kind: KindStep, ID: id, OnErr: OnErrReturn, Outcomes: []Outcome{{Kind: OutOK, Value: v}}}
	}
	last := Program{Ops: []Op{ok("s3", 3)}}
	mid := Program{Ops: []Op{ok("s2", 2)}, Continue: &last}
	p := Program{Ops: []Op{ok("s1", 1)}, Continue: &mid}.WithKey("k")
	if p.Continue.Key != "k+1" || p.Continue.Continue.Key != "k+2" || RootKey("k+2.c1") != "k" {
		t.Fatalf("chain keys: %q %q", p.Continue.Key, p.Continue.Continue.Key)
	}
	pred := Predict(p)
	want := map[string]int{"k/s1": 1, "k+1/s2": 1, "k+2/s3": 1}
	if pred.Status != StatusCompleted || pred.Continued != 2 || !reflect.DeepEqual(pred.Invocations, want) ||
		!reflect.DeepEqual(pred.Output, Record{"s3": {V: json.RawMessage("3")}}) {
		t.Fatalf("prediction %+v", pred)
	}
	obs := Observed{Status: StatusCompleted, Output: json.RawMessage(`{"s3":{"v":3}}`), Attempts: 1, Epoch: 1,
		Invocations: want, Continued: 2}
	if d := Compare(p, pred, obs, false); len(d) != 0 {
		t.Fatalf("diffs of an agreeing chain: %v", d)
	}
	obs.Continued, obs.Output = 0, json.RawMessage(`{"s1":{"v":1}}`)
	if d := Compare(p, pred, obs, false); len(d) == 0 {
		t.Fatal("a run that did not continue agrees")
	}

	failing := p.Clone()
	failing.Ops[0].Outcomes = []Outcome{{Kind: OutFatal}}
	if pred := Predict(failing); pred.Status != StatusFailed || pred.Continued != 0 || pred.Invocations["k+1/s2"] != 0 {
		t.Fatalf("a failed run continued: %+v", pred)
	}
}

func TestPredictFork(t *testing.T) {
	p := Program{Key: "k", Ops: []Op{
		step("s1", OnErrReturn, 2, nil, out(OutFail), ok(1)),
		{Kind: KindState, ID: "k1", Name: "a", OnErr: OnErrHandle, Outcomes: []Outcome{ok(5)}},
		step("s2", OnErrHandle, 1, nil, out(OutFail)),
		{Kind: KindParallel, ID: "g3", Mode: ModeCollectAll, OnErr: OnErrHandle, Branches: [][]Op{
			{step("s4", OnErrReturn, 1, nil, ok(4))}, {step("s5", OnErrReturn, 1, nil, ok(5))}}},
		step("s6", OnErrReturn, 1, nil, out(OutFatal)),
	}}
	if !Forkable(p) {
		t.Fatal("not forkable")
	}
	orig := Predict(p)
	// From s6: everything before it that completed replays; s2 failed, so
	// it is not in the history and runs again.
	f := PredictFork(p, "s6")
	if f.Status != orig.Status || f.Error != orig.Error || f.Status != StatusFailed {
		t.Fatalf("fork ends %s %q, run %s %q", f.Status, f.Error, orig.Status, orig.Error)
	}
	want := map[string]int{"k/s2": 1, "k/s6": 1}
	if fmt.Sprint(f.Invocations) != fmt.Sprint(want) {
		t.Fatalf("fork invocations %v, want %v", f.Invocations, want)
	}
	if fmt.Sprint(f.State) != "map[a:5]" {
		t.Fatalf("fork state %v", f.State)
	}
	// From the start: everything runs again, as the run did.
	if f := PredictFork(p, ""); fmt.Sprint(f.Invocations) != fmt.Sprint(orig.Invocations) {
		t.Fatalf("fork from the start invokes %v, the run %v", f.Invocations, orig.Invocations)
	}
	if Forkable(Program{Key: "k", RunRetry: &Retry{MaxAttempts: 2}, Ops: p.Ops}) {
		t.Fatal("a program with run retries is forkable")
	}
}
