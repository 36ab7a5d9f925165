package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kagzi/kagzi/internal/wfexec"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// gatherFn waits for one "item", drains the others and returns them all.
func gatherFn(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
	first, err := workflow.WaitForEvent[string](ctx, "item", 0)
	if err != nil {
		return nil, err
	}
	rest, err := workflow.DrainEvents[string](ctx, "item")
	if err != nil {
		return nil, err
	}
	return json.Marshal(append([]string{first}, rest...))
}

// drainAnswer answers drains with the list pending (and counts them).
func drainAnswer(pending *[]string, drains *int) func(it protocol.ReportItem) protocol.ReportResult {
	return func(it protocol.ReportItem) protocol.ReportResult {
		if it.Kind != protocol.ReportEventDrain {
			return protocol.ReportResult{Code: protocol.ResultOK}
		}
		*drains++
		if len(*pending) == 0 {
			return protocol.ReportResult{Code: protocol.ResultOK}
		}
		out, _ := json.Marshal(*pending)
		*pending = nil
		return protocol.ReportResult{Code: protocol.ResultOK, Output: out}
	}
}

func end(t *testing.T, items []protocol.ReportItem) protocol.ReportItem {
	t.Helper()
	if len(items) == 0 {
		t.Fatal("no report")
	}
	return items[len(items)-1]
}

// A run's end names the delivery's event count and the names the execution
// waited for or drained; without a count (an older dispatcher) or a name,
// it names nothing.
func TestEndNamesTheEventsSeen(t *testing.T) {
	seq := int64(4)
	run := newRun(nil, completed("event:item", 1, "a"), completed("event:update.Add", 1, "x"))
	run.EventSeq = &seq
	rep := &recorder{}
	out := exec(t, context.Background(), run, rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := workflow.WaitForEvent[string](ctx, "item", 0); err != nil {
			return nil, err
		}
		if _, err := workflow.WaitForEvent[string](ctx, "update.Add", 0); err != nil {
			return nil, err
		}
		if _, err := workflow.DrainEvents[string](ctx, "note"); err != nil {
			return nil, err
		}
		return json.RawMessage(`1`), nil
	})
	if out.Status != wfexec.OutcomeCompleted {
		t.Fatalf("outcome %v %v", out.Status, out.Err)
	}
	it := end(t, rep.all())
	if it.Kind != protocol.ReportRunCompleted || it.EventsSeen == nil || *it.EventsSeen != 4 ||
		!slices.Equal(it.EventNames, []string{"item", "note", "update.Add"}) || it.AllEvents {
		t.Fatalf("end: %+v", it)
	}

	// More names than a report lists: every name.
	rep = &recorder{}
	exec(t, context.Background(), run, rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		for i := range protocol.MaxEventNames + 1 {
			if _, err := workflow.DrainEvents[string](ctx, fmt.Sprintf("n%d", i)); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`1`), workflow.ContinueAsNew(ctx, 2)
	})
	if it := end(t, rep.all()); it.Kind != protocol.ReportRunContinue || !it.AllEvents || len(it.EventNames) != 0 || *it.EventsSeen != 4 {
		t.Fatalf("end with many names: %+v", it)
	}

	// No count, or no name, or a failure: nothing.
	for name, c := range map[string]struct {
		seq *int64
		fn  workflow.Func
	}{
		"no count": {nil, gatherFn},
		"no name":  {&seq, func(workflow.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`1`), nil }},
		"failure": {&seq, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
			_, _ = workflow.DrainEvents[string](ctx, "item")
			return nil, errors.New("boom")
		}},
	} {
		run := newRun(nil, completed("event:item", 1, "a"))
		run.EventSeq = c.seq
		rep := &recorder{}
		exec(t, context.Background(), run, rep, c.fn)
		if it := end(t, rep.all()); it.EventsSeen != nil || it.EventNames != nil || it.AllEvents {
			t.Fatalf("%s: end %+v", name, it)
		}
	}
}

// A first execution drains what is pending; an empty drain records
// nothing. A replay returns a drain's record, except at the end of the
// recorded history, where the drain asks again and gets what it recorded
// and what came since.
func TestDrainEventsReplay(t *testing.T) {
	var (
		pending = []string{"b", "c"}
		drains  int
	)
	rep := &recorder{answer: drainAnswer(&pending, &drains)}
	run := newRun(nil, completed("event:item", 1, "a"))
	out := exec(t, context.Background(), run, rep, gatherFn)
	if out.Status != wfexec.OutcomeCompleted || drains != 1 {
		t.Fatalf("first execution: %v %v, %d drains", out.Status, out.Err, drains)
	}
	if it := end(t, rep.all()); string(it.Output) != `["a","b","c"]` {
		t.Fatalf("output %s", it.Output)
	}
	drain := rep.all()[0]
	if drain.Kind != protocol.ReportEventDrain || drain.StepID != "drain:item" || drain.Attempt != 1 || drain.Name != "item" {
		t.Fatalf("drain item: %+v", drain)
	}

	// Replayed at the end of the history (its completion was refused):
	// the drain asks again, the engine answers with the grown list.
	pending = []string{"b", "c", "d"}
	drains = 0
	rep = &recorder{answer: drainAnswer(&pending, &drains)}
	run = newRun(nil, completed("event:item", 1, "a"), completed("drain:item", 1, []string{"b", "c"}))
	exec(t, context.Background(), run, rep, gatherFn)
	if it := end(t, rep.all()); drains != 1 || string(it.Output) != `["a","b","c","d"]` {
		t.Fatalf("replay at the frontier: %d drains, output %s", drains, it.Output)
	}

	// Replayed with a step recorded after it: its record, no round trip.
	pending = []string{"late"}
	drains = 0
	rep = &recorder{answer: drainAnswer(&pending, &drains)}
	run = newRun(nil, completed("event:item", 1, "a"), completed("drain:item", 1, []string{"b"}), completed("after", 1, 1))
	exec(t, context.Background(), run, rep, func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		got, err := gatherFn(ctx, in)
		if err != nil {
			return nil, err
		}
		if _, err := workflow.Step(ctx, "after", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		return got, nil
	})
	if it := end(t, rep.all()); drains != 0 || string(it.Output) != `["a","b"]` {
		t.Fatalf("replay before the frontier: %d drains, output %s", drains, it.Output)
	}

	// An empty drain before the frontier stays empty (nothing recorded,
	// nothing asked); at the frontier it asks.
	pending = []string{"late"}
	drains = 0
	rep = &recorder{answer: drainAnswer(&pending, &drains)}
	run = newRun(nil, completed("s", 1, 1))
	var seen [][]string
	exec(t, context.Background(), run, rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		a, err := workflow.DrainEvents[string](ctx, "item")
		if err != nil {
			return nil, err
		}
		if _, err := workflow.Step(ctx, "s", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		b, err := workflow.DrainEvents[string](ctx, "item")
		if err != nil {
			return nil, err
		}
		seen = append(seen, a, b)
		return json.RawMessage(`1`), nil
	})
	if drains != 1 || len(seen) != 2 || len(seen[0]) != 0 || !slices.Equal(seen[1], []string{"late"}) {
		t.Fatalf("drains %d, seen %q", drains, seen)
	}
	if ids := []string{rep.all()[0].StepID}; ids[0] != "drain:item#2" {
		t.Fatalf("the frontier's drain is %v", ids)
	}
}

// Draining an update's requests is refused; a payload that does not
// decode is a non-retryable error; a drain of a cancelled run takes
// nothing new.
func TestDrainEventsErrors(t *testing.T) {
	rep := &recorder{answer: func(it protocol.ReportItem) protocol.ReportResult {
		if it.Kind == protocol.ReportEventDrain {
			return protocol.ReportResult{Code: protocol.ResultOK, Output: json.RawMessage(`["x", 1]`)}
		}
		return protocol.ReportResult{Code: protocol.ResultOK}
	}}
	var errs []error
	exec(t, context.Background(), newRun(nil), rep, func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := workflow.DrainEvents[string](ctx, "update.Add")
		errs = append(errs, err)
		_, err = workflow.DrainEvents[int](ctx, "n")
		errs = append(errs, err)
		_, err = workflow.DrainEvents[int](ctx, "bad name")
		errs = append(errs, err)
		return json.RawMessage(`1`), nil
	})
	if errs[0] == nil || errs[1] == nil || !workflow.IsNonRetryable(errs[1]) || errs[2] == nil {
		t.Fatalf("errors: %v", errs)
	}

	cctx, cancel := context.WithCancelCause(context.Background())
	cancel(workflow.ErrCancelled)
	rep = &recorder{}
	run := newRun(nil, completed("drain:a", 1, []string{"kept"}))
	var got []string
	var gotErr error
	workflow.Func(func(ctx workflow.Context, _ json.RawMessage) (json.RawMessage, error) {
		got, _ = workflow.DrainEvents[string](ctx, "a")
		_, gotErr = workflow.DrainEvents[string](ctx, "b")
		return json.RawMessage(`1`), nil
	}).Execute(context.Background(), wfexec.Execution{Run: run, Reporter: rep, Cancel: cctx})
	if !slices.Equal(got, []string{"kept"}) || !errors.Is(gotErr, workflow.ErrCancelled) {
		t.Fatalf("cancelled drains: %q, %v", got, gotErr)
	}
	for _, it := range rep.all() {
		if it.Kind == protocol.ReportEventDrain {
			t.Fatalf("a cancelled run drained: %+v", it)
		}
	}
}
