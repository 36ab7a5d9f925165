package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// collect waits for as many "item" events as its input says and returns
// their payloads in the order it received them.
var collect = workflow.New[int, []string]("Collect")

// Concurrent signal-with-starts of one external id start one run, which
// receives every caller's event; once it finished, the id starts a new run.
func TestSignalWithStart(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Implement(w, collect, func(ctx workflow.Context, n int) ([]string, error) {
			got := make([]string, 0, n)
			for range n {
				v, err := workflow.WaitForEvent[string](ctx, "item", 0)
				if err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const n = 12
	var (
		wg      sync.WaitGroup
		begin   = make(chan struct{})
		handles [n]*client.TypedHandle[[]string]
		started [n]bool
		errs    [n]error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			handles[i], started[i], errs[i] = client.SignalWithStartWorkflow(ctx, e.cl, collect, "batch-1", n,
				"item", fmt.Sprintf("p%02d", i))
		}()
	}
	close(begin)
	wg.Wait()
	starts := 0
	var want []string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if handles[i].RunID != handles[0].RunID {
			t.Fatalf("caller %d reached run %s, caller 0 run %s", i, handles[i].RunID, handles[0].RunID)
		}
		if started[i] {
			starts++
		}
		want = append(want, fmt.Sprintf("p%02d", i))
	}
	if starts != 1 {
		t.Fatalf("%d callers started a run, want 1", starts)
	}
	got, err := handles[0].Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the run received %v, want %v", got, want)
	}
	runs, _, err := e.cl.List(ctx, client.ListOptions{Type: collect.Name(), Limit: 100})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %d %v", collect.Name(), len(runs), err)
	}

	// The run finished: the id starts a new run, which gets this event.
	h, ok, err := client.SignalWithStartWorkflow(ctx, e.cl, collect, "batch-1", 1, "item", "again")
	if err != nil || !ok || h.RunID == handles[0].RunID {
		t.Fatalf("after the run finished: %v started=%v %v", h, ok, err)
	}
	got, err = h.Result(ctx)
	if err != nil || !slices.Equal(got, []string{"again"}) {
		t.Fatalf("the new run received %v %v", got, err)
	}
}

// gather waits for its first "item" event, drains the others pending and
// returns every payload it received.
var gather = workflow.New[int, []string]("Gather")

// Signal-with-starts of one external id on a workflow that ends as soon as
// it has its first event and has drained the others: events stored on a
// live run while it completes refuse its completion, and the run executes
// again and drains them. Every caller's event is received by exactly one
// run, none is left unreceived.
//
// First 120 callers in bursts of 10 concurrent calls, each pair of bursts
// on a run of its own: the run's first execution is held after its drain
// while the second burst of its pair is sent, then lets go and returns,
// so its completion always meets events it has not seen (the race made
// certain); the next pair waits for the run to end and starts another.
// Then 120 callers all at once on another id, as they come.
func TestSignalWithStartNoEventLost(t *testing.T) {
	t.Parallel()
	executions := newCounter()
	var hold atomic.Bool
	holding := make(chan uuid.UUID)
	release := make(chan struct{})
	e := start(t, opts{workers: 2, concurrency: 8, register: func(w *worker.Worker) error {
		return worker.Implement(w, gather, func(ctx workflow.Context, _ int) ([]string, error) {
			executions.inc("%s", ctx.RunID())
			first, err := workflow.WaitForEvent[string](ctx, "item", 0)
			if err != nil {
				return nil, err
			}
			rest, err := workflow.DrainEvents[string](ctx, "item")
			if err != nil {
				return nil, err
			}
			if hold.CompareAndSwap(true, false) {
				select {
				case holding <- ctx.RunID():
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return append([]string{first}, rest...), nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	const n, burst = 120, 10
	// send makes callers [from, to) signal-with-start id at once.
	send := func(id string, handles []*client.TypedHandle[[]string], from, to int) {
		var wg sync.WaitGroup
		begin := make(chan struct{})
		errs := make([]error, to-from)
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-begin
				handles[i], _, errs[i-from] = client.SignalWithStartWorkflow(ctx, e.cl, gather, id, 0, "item",
					fmt.Sprintf("%s-%03d", id, i))
			}()
		}
		close(begin)
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("caller %d: %v", from+k, err)
			}
		}
	}

	paced := make([]*client.TypedHandle[[]string], n)
	for b := 0; b < n; b += 2 * burst {
		hold.Store(true)
		send("cart-1", paced, b, b+burst)
		held := <-holding
		send("cart-1", paced, b+burst, b+2*burst)
		for i := b + burst; i < b+2*burst; i++ {
			if paced[i].RunID != held {
				t.Fatalf("caller %d reached run %s while run %s was live", i, paced[i].RunID, held)
			}
		}
		release <- struct{}{}
		if _, err := paced[b].Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.checkGathered(ctx, "cart-1", paced, executions)

	all := make([]*client.TypedHandle[[]string], n)
	send("cart-2", all, 0, n)
	e.checkGathered(ctx, "cart-2", all, executions)
}

// checkGathered checks that every caller's event was received by the run
// its call reached, once, and that no event of those runs is unreceived.
func (e *env) checkGathered(ctx context.Context, id string, handles []*client.TypedHandle[[]string], executions *counter) {
	t := e.t
	t.Helper()
	runs := map[uuid.UUID]*client.TypedHandle[[]string]{}
	for _, h := range handles {
		runs[h.RunID] = h
	}
	receivedBy := map[string]uuid.UUID{}
	for rid, h := range runs {
		got, err := h.Result(ctx)
		if err != nil {
			t.Fatalf("run %s: %v", rid, err)
		}
		for _, p := range got {
			if other, dup := receivedBy[p]; dup {
				t.Fatalf("%s received by runs %s and %s", p, other, rid)
			}
			receivedBy[p] = rid
		}
		evs, err := e.srv.Store.EventsList(ctx, "default", rid)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.ConsumedAt == nil || ev.Unreceived || receivedBy[strings.Trim(string(ev.Payload), `"`)] != rid {
				t.Fatalf("run %s: event %s %s: consumed by %q, unreceived %v", rid, ev.Name, ev.Payload, ev.ConsumedBy, ev.Unreceived)
			}
		}
	}
	for i, h := range handles {
		p := fmt.Sprintf("%s-%03d", id, i)
		if receivedBy[p] != h.RunID {
			t.Fatalf("%s: sent to run %s, received by %q", p, h.RunID, receivedBy[p])
		}
	}
	if len(receivedBy) != len(handles) {
		t.Fatalf("%d payloads received for %d callers", len(receivedBy), len(handles))
	}
	count := executions.snapshot()
	reruns := 0
	for rid := range runs {
		reruns += count[rid.String()] - 1
	}
	t.Logf("%s: %d events, %d runs, %d executions beyond one per run", id, len(handles), len(runs), reruns)
}

// A workflow that ignores an event completes, and the event shows as
// unreceived; one whose wait took an event and that returns while another
// of that name arrives is executed again once (the end refused), then
// completes with the late event unreceived: it waits for one only.
func TestEventIgnoredIsUnreceived(t *testing.T) {
	t.Parallel()
	executions := newCounter()
	gate := make(chan struct{})
	reached := make(chan struct{}, 1)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "OneGo", func(ctx workflow.Context, _ int) (string, error) {
			v, err := workflow.WaitForEvent[string](ctx, "go", 0)
			if err != nil {
				return "", err
			}
			if _, err := workflow.Step(ctx, "hold", func(context.Context) (int, error) {
				reached <- struct{}{}
				<-gate
				return 1, nil
			}); err != nil {
				return "", err
			}
			// Executions that return (one may have suspended in the wait
			// before "first" came).
			executions.inc("%s", ctx.RunID())
			return v, nil
		})
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := e.cl.Start(ctx, "OneGo", 0, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "note", "never read"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendEvent(ctx, h.RunID, "go", "first"); err != nil {
		t.Fatal(err)
	}
	<-reached
	// Stored while the run executes, after its wait took "first".
	if _, err := e.cl.SendEvent(ctx, h.RunID, "go", "late"); err != nil {
		t.Fatal(err)
	}
	close(gate)
	out, err := result[string](t, h, time.Minute)
	if err != nil || out != "first" {
		t.Fatalf("run: %q %v", out, err)
	}
	evs, err := e.srv.Store.EventsList(ctx, "default", h.RunID)
	if err != nil || len(evs) != 3 {
		t.Fatalf("events: %+v %v", evs, err)
	}
	state := map[string]string{}
	for _, ev := range evs {
		switch {
		case ev.ConsumedAt != nil:
			state[string(ev.Payload)] = "received by " + ev.ConsumedBy
		case ev.Unreceived:
			state[string(ev.Payload)] = "unreceived"
		default:
			state[string(ev.Payload)] = "pending"
		}
	}
	want := map[string]string{`"never read"`: "unreceived", `"first"`: "received by event:go", `"late"`: "unreceived"}
	if fmt.Sprint(state) != fmt.Sprint(want) {
		t.Fatalf("events: %v, want %v", state, want)
	}
	// Returned, then returned again after the refused completion.
	if got := executions.snapshot()[h.RunID.String()]; got != 2 {
		t.Fatalf("%d executions returned, want 2 (the first completion refused once)", got)
	}
}
