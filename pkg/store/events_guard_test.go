package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// guarded is a completion of c that saw its delivery's events of names.
func guarded(c store.ClaimedRun, out string, names ...string) store.RunsCompleteItem {
	return store.RunsCompleteItem{Lease: leaseOf(c), Output: []byte(out),
		Events: &store.EventsSeen{Seq: c.EventSeq, Names: names}}
}

// complete1 completes one item and returns its outcome's error.
func (e *env) complete1(it store.RunsCompleteItem) error {
	e.t.Helper()
	out, err := e.s.RunsCompleteBatch(e.ctx, []store.RunsCompleteItem{it})
	if err != nil {
		e.t.Fatalf("complete: %v", err)
	}
	return out[0].Err
}

// events lists a run's events.
func (e *env) events(id uuid.UUID) []store.Event {
	e.t.Helper()
	evs, err := e.s.EventsList(e.ctx, "ns", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *env) send(id uuid.UUID, name, payload string) store.SentEvent {
	e.t.Helper()
	return sendEvent(e.t, e.s, "ns", id, name, payload)
}

// A completion that finds an unconsumed event of a name it waited for,
// stored after its delivery, is refused: the run is claimable at once
// under the same attempt, the steps that came with the completion are
// recorded, and the next execution (whose delivery counts the event)
// completes. An event stored before the delivery does not refuse it (the
// execution could take it, and chose not to): it ends unreceived.
func TestEventsGuardRefusesCompletionPastAnEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{})
	early := e.send(r.ID, "item", `"early"`)
	c := e.claimRun(r.ID, "T")
	if c.EventSeq != 0 || early.RunStatus != store.StatusPending {
		t.Fatalf("claimed with event count %d, the early event found the run %s", c.EventSeq, early.RunStatus)
	}
	late := e.send(r.ID, "item", `"late"`)
	other := e.send(r.ID, "other", `"other"`)
	it := guarded(c, `"done"`, "item")
	it.Steps = []store.StepsRecordParams{{StepID: "last", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted,
		Output: []byte(`1`)}}
	err := e.complete1(it)
	if !errors.Is(err, store.ErrEventsArrived) {
		t.Fatalf("completion past an event: %v, want ErrEventsArrived", err)
	}
	run := e.get("ns", r.ID)
	if run.Status != store.StatusPending || run.AvailableAt == nil || run.AvailableAt.After(time.Now()) ||
		run.Attempts != c.Attempts || run.Epoch != c.Epoch || run.LockedBy != nil {
		t.Fatalf("refused run: %+v", run)
	}
	steps, err := e.s.StepsList(e.ctx, "ns", r.ID)
	if err != nil || len(steps) != 1 || steps[0].StepID != "last" || steps[0].Status != store.StepCompleted {
		t.Fatalf("steps of the refused completion: %+v %v", steps, err)
	}
	// The old lease is gone: its report, repeated, is told so.
	if err := e.complete1(guarded(c, `"done"`, "item")); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("repeated refused completion: %v", err)
	}

	c2 := e.claimRun(r.ID, "T")
	if c2.EventSeq != 2 || c2.LeaseToken != c.LeaseToken+1 || len(c2.Steps) != 1 {
		t.Fatalf("second delivery: count %d token %d steps %d", c2.EventSeq, c2.LeaseToken, len(c2.Steps))
	}
	if _, err := e.s.EventsConsume(e.ctx, leaseOf(c2), "item", "event:item"); err != nil {
		t.Fatal(err)
	}
	// Not consumed: the early event (the second delivery's history took
	// the oldest), the late one and the other's, all there before this
	// delivery: it completes, and they end unreceived.
	if err := e.complete1(guarded(c2, `"done"`, "item")); err != nil {
		t.Fatalf("second completion: %v", err)
	}
	if run := e.get("ns", r.ID); run.Status != store.StatusCompleted || string(run.Output) != `"done"` {
		t.Fatalf("run after the second completion: %s %s", run.Status, run.Output)
	}
	got := map[uuid.UUID]store.Event{}
	for _, ev := range e.events(r.ID) {
		got[ev.ID] = ev
	}
	if ev := got[early.ID]; ev.ConsumedBy != "event:item" || ev.Unreceived {
		t.Fatalf("early event: %+v", ev)
	}
	for _, id := range []uuid.UUID{late.ID, other.ID} {
		if ev := got[id]; !ev.Unreceived || ev.ConsumedAt != nil {
			t.Fatalf("event %s: %+v, want unreceived", ev.Name, ev)
		}
	}
}

// Only events of the names the execution waited for or drained refuse its
// end (or any, with All); an end without the check (an older worker's)
// completes as before; an event consumed during the execution does not
// refuse it.
func TestEventsGuardNamesAndOlderWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := func() store.ClaimedRun {
		r := e.create(store.RunsCreateParams{})
		return e.claimRun(r.ID, "T")
	}

	c := run()
	e.send(c.ID, "other", `1`)
	if err := e.complete1(guarded(c, `1`, "item")); err != nil {
		t.Fatalf("an event of another name: %v", err)
	}

	c = run()
	e.send(c.ID, "other", `1`)
	it := guarded(c, `1`)
	it.Events.All = true
	if err := e.complete1(it); !errors.Is(err, store.ErrEventsArrived) {
		t.Fatalf("an event of any name with All: %v", err)
	}

	c = run()
	e.send(c.ID, "item", `1`)
	if err := e.complete1(store.RunsCompleteItem{Lease: leaseOf(c), Output: []byte(`1`)}); err != nil {
		t.Fatalf("an end without the check: %v", err)
	}
	if evs := e.events(c.ID); len(evs) != 1 || !evs[0].Unreceived {
		t.Fatalf("its event: %+v", evs)
	}

	c = run()
	e.send(c.ID, "item", `1`)
	if _, err := e.s.EventsConsume(e.ctx, leaseOf(c), "item", "event:item"); err != nil {
		t.Fatal(err)
	}
	if err := e.complete1(guarded(c, `1`, "item")); err != nil {
		t.Fatalf("an event consumed during the execution: %v", err)
	}

	// Names are checked like any event name.
	c = run()
	if err := e.complete1(guarded(c, `1`, "bad name")); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a bad name: %v", err)
	}
	many := make([]string, protocol.MaxEventNames+1)
	for i := range many {
		many[i] = fmt.Sprintf("e%d", i)
	}
	if err := e.complete1(guarded(c, `1`, many...)); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("too many names: %v", err)
	}
}

// A run that got no event during its execution completes in the one
// statement of an unchecked completion; one that did pays the slow path.
func TestEventsGuardStatementsPerCompletion(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	tally := stmtcount.NewTally()
	pool, err := store.ConnectTraced(t.Context(), url, tally)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &env{t: t, ctx: t.Context(), s: store.New(pool, store.Options{}), pool: pool}
	// The payload limits are read once and cached: read them before
	// counting.
	if _, err := e.s.Limits(e.ctx); err != nil {
		t.Fatal(err)
	}
	cost := func(it store.RunsCompleteItem) (int64, error) {
		before := tally.Snapshot()
		out, err := e.s.RunsCompleteBatch(e.ctx, []store.RunsCompleteItem{it})
		if err != nil {
			t.Fatal(err)
		}
		// The completion's planner settings travel with it.
		stmts, _ := withoutPlannerSettings(statementsSince(tally, before))
		var n int64
		for _, c := range stmts {
			n += c
		}
		return n, out[0].Err
	}
	step := []store.StepsRecordParams{{StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted, Output: []byte(`1`)}}
	for _, withStep := range []bool{false, true} {
		var n [3]int64
		for i, kind := range []string{"unchecked", "checked", "checked, event before the delivery"} {
			r := e.create(store.RunsCreateParams{})
			if i == 2 {
				e.send(r.ID, "item", `1`)
			}
			c := e.claimRun(r.ID, "T")
			it := store.RunsCompleteItem{Lease: leaseOf(c), Output: []byte(`1`)}
			if i > 0 {
				it = guarded(c, `1`, "item")
			}
			if withStep {
				it.Steps = step
			}
			var err error
			if n[i], err = cost(it); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		t.Logf("with a step %v: statements per completion: unchecked %d, checked %d, checked with an earlier event %d",
			withStep, n[0], n[1], n[2])
		if n[0] != 1 || n[1] != 1 || n[2] != 1 {
			t.Fatalf("statements per completion (with a step %v): %v, want 1 each", withStep, n)
		}
	}
	// The slow path: an event during the execution, of another name (the
	// run completes) and of the name (refused).
	for _, name := range []string{"other", "item"} {
		r := e.create(store.RunsCreateParams{})
		c := e.claimRun(r.ID, "T")
		e.send(r.ID, name, `1`)
		n, err := cost(guarded(c, `1`, "item"))
		t.Logf("an event %q during the execution: %d statements, %v", name, n, err)
		if (name == "item") != errors.Is(err, store.ErrEventsArrived) || (name == "other" && err != nil) {
			t.Fatalf("an event %q during the execution: %v", name, err)
		}
	}
}

// A sender that holds the run's row lock when the completion reaches it
// commits its event first: the completion, waiting for the lock, then
// re-checks the newest row version, sees the count moved and is refused.
// A subquery of the completion's statement would have missed the event
// (its snapshot is older than the wait).
func TestEventsGuardCompletionWaitingForASender(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, withStep := range []bool{false, true} {
		r := e.create(store.RunsCreateParams{})
		c := e.claimRun(r.ID, "T")
		sent, release := make(chan struct{}), make(chan struct{})
		sendErr := make(chan error, 1)
		go func() {
			sendErr <- e.s.InTx(e.ctx, func(tx *store.Store) error {
				if _, err := tx.EventsSend(e.ctx, store.EventsSendParams{Namespace: "ns", RunID: r.ID, Name: "item",
					Payload: []byte(`1`)}); err != nil {
					return err
				}
				close(sent)
				<-release
				return nil
			})
		}()
		<-sent
		it := guarded(c, `1`, "item")
		if withStep {
			it.Steps = []store.StepsRecordParams{{StepID: "s", Attempt: 1, Kind: store.StepFunction, Status: store.StepCompleted,
				Output: []byte(`1`)}}
		}
		done := make(chan error, 1)
		go func() {
			out, err := e.s.RunsCompleteBatch(e.ctx, []store.RunsCompleteItem{it})
			if err == nil {
				err = out[0].Err
			}
			done <- err
		}()
		e.waitLockWaiters(1)
		close(release)
		if err := <-sendErr; err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, store.ErrEventsArrived) {
			t.Fatalf("with a step %v: completion that waited for a sender: %v, want ErrEventsArrived", withStep, err)
		}
	}

	// The other way round: a completion that holds the lock first ends
	// the run, and the sender waiting for it finds the run finished.
	r := e.create(store.RunsCreateParams{})
	c := e.claimRun(r.ID, "T")
	completed, release := make(chan struct{}), make(chan struct{})
	txErr := make(chan error, 1)
	go func() {
		txErr <- e.s.InTx(e.ctx, func(tx *store.Store) error {
			out, err := tx.RunsCompleteBatch(e.ctx, []store.RunsCompleteItem{guarded(c, `1`, "item")})
			if err == nil {
				err = out[0].Err
			}
			close(completed)
			if err != nil {
				return err
			}
			<-release
			return nil
		})
	}()
	<-completed
	sendDone := make(chan error, 1)
	go func() {
		_, err := e.s.EventsSend(e.ctx, store.EventsSendParams{Namespace: "ns", RunID: r.ID, Name: "item", Payload: []byte(`1`)})
		sendDone <- err
	}()
	e.waitLockWaiters(1)
	close(release)
	if err := <-txErr; err != nil {
		t.Fatal(err)
	}
	if err := <-sendDone; !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a send that waited for a completion: %v, want ErrConflict (finished)", err)
	}
}

// claimBusy claims run id of type T, which senders may hold locked for a
// moment (a claim skips a locked run: the dispatcher claims again after a
// backoff, as here).
func (e *env) claimBusy(id uuid.UUID) store.ClaimedRun {
	e.t.Helper()
	for try := 0; try < 1000; try++ {
		for _, c := range e.claim(store.RunsClaimParams{Namespace: "ns", Queue: "q", WorkerID: uuid.New(),
			Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute}) {
			if c.ID == id {
				return c
			}
			e.t.Fatalf("claimed run %s, not %s", c.ID, id)
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("run %s was never claimable", id)
	return store.ClaimedRun{}
}

// waitLockWaiters waits until n sessions of the test's database wait for a
// lock.
func (e *env) waitLockWaiters(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		if err != nil {
			e.t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d sessions wait for a lock, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Concurrent sends race the executions of a run that drains its events and
// completes, executed again whenever its completion is refused: every
// event a send stored is received, by exactly one drain, and every send
// either stored its event or found the run finished.
func TestEventsGuardRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const (
		runs    = 20
		senders = 6
		perSend = 8
	)
	var reruns atomic.Int64
	for i := range runs {
		r := e.create(store.RunsCreateParams{})
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			stored = map[uuid.UUID]bool{}
		)
		start := make(chan struct{})
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range perSend {
					ev, err := e.s.EventsSend(e.ctx, store.EventsSendParams{Namespace: "ns", RunID: r.ID, Name: "item",
						Payload: fmt.Appendf(nil, `"%d-%d-%d"`, i, s, k)})
					if errors.Is(err, store.ErrConflict) {
						return // finished: nothing stored
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					stored[ev.ID] = true
					mu.Unlock()
				}
			}()
		}
		close(start)
		for exec := 1; ; exec++ {
			if exec > 200 {
				t.Fatalf("run %d: not completed after 200 executions", i)
			}
			c := e.claimBusy(r.ID)
			res, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: leaseOf(c), StepID: "drain:item", Name: "item"})
			if err != nil {
				t.Fatal(err)
			}
			it := guarded(c, `1`, "item")
			if exec%2 == 0 {
				it.Steps = []store.StepsRecordParams{{StepID: fmt.Sprintf("s%d", exec), Attempt: 1, Kind: store.StepFunction,
					Status: store.StepCompleted, Output: []byte(`1`)}}
			}
			out, err := e.s.RunsCompleteBatch(e.ctx, []store.RunsCompleteItem{it})
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(out[0].Err, store.ErrEventsArrived) {
				reruns.Add(1)
				continue
			}
			if out[0].Err != nil {
				t.Fatal(out[0].Err)
			}
			if res.Events != res.Fresh && res.Fresh != 0 && exec == 1 {
				t.Fatalf("run %d: a first drain holds events it did not take: %+v", i, res)
			}
			break
		}
		wg.Wait()
		evs := e.events(r.ID)
		if len(evs) != len(stored) {
			t.Fatalf("run %d: %d events stored, %d sends succeeded", i, len(evs), len(stored))
		}
		for _, ev := range evs {
			if ev.ConsumedBy != "drain:item" || ev.Unreceived || !stored[ev.ID] {
				t.Fatalf("run %d: event %s: %+v", i, ev.ID, ev)
			}
		}
		// The drain step holds every event, each once.
		steps, err := e.s.StepsList(e.ctx, "ns", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var list []string
		for _, s := range steps {
			if s.StepID == "drain:item" {
				if err := json.Unmarshal(s.Output, &list); err != nil {
					t.Fatal(err)
				}
			}
		}
		seen := map[string]bool{}
		for _, p := range list {
			if seen[p] {
				t.Fatalf("run %d: %s drained twice", i, p)
			}
			seen[p] = true
		}
		if len(list) != len(evs) {
			t.Fatalf("run %d: the drain step holds %d events of %d", i, len(list), len(evs))
		}
	}
	t.Logf("%d runs, %d completions refused", runs, reruns.Load())
}

// A drain takes every pending event of its name, oldest first, once; an
// empty one records nothing; a drain step that runs again (at the end of
// a replayed history) grows with what came since; update requests cannot
// be drained.
func TestEventsDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{})
	c := e.claimRun(r.ID, "T")
	l := leaseOf(c)
	drain := func(step string) store.EventsDrainResult {
		t.Helper()
		res, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: l, StepID: step, Name: "item"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := drain("drain:item"); res.Events != 0 || res.Output != nil {
		t.Fatalf("empty drain: %+v", res)
	}
	if steps, _ := e.s.StepsList(e.ctx, "ns", r.ID); len(steps) != 0 {
		t.Fatalf("an empty drain recorded %+v", steps)
	}
	e.send(r.ID, "item", `{"n":1}`)
	e.send(r.ID, "other", `0`)
	e.send(r.ID, "item", `not json`)
	res := drain("drain:item")
	if string(res.Output) != `[{"n":1},"not json"]` || res.Events != 2 || res.Fresh != 2 {
		t.Fatalf("drain: %s %+v", res.Output, res)
	}
	// Retried: the same list.
	if again := drain("drain:item"); string(again.Output) != string(res.Output) || again.Fresh != 0 {
		t.Fatalf("retried drain: %s %+v", again.Output, again)
	}
	e.send(r.ID, "item", `3`)
	if grown := drain("drain:item"); string(grown.Output) != `[{"n":1},"not json",3]` || grown.Fresh != 1 {
		t.Fatalf("grown drain: %s %+v", grown.Output, grown)
	}
	steps, err := e.s.StepsList(e.ctx, "ns", r.ID)
	if err != nil || len(steps) != 1 || steps[0].StepID != "drain:item" || steps[0].Kind != store.StepEvent ||
		steps[0].Status != store.StepCompleted || string(steps[0].Output) != `[{"n":1},"not json",3]` || string(steps[0].Input) != "item" {
		t.Fatalf("drain step: %+v %v", steps, err)
	}
	var names []string
	for _, ev := range e.events(r.ID) {
		if ev.ConsumedAt != nil {
			names = append(names, ev.Name+"@"+ev.ConsumedBy)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[item@drain:item item@drain:item item@drain:item]" {
		t.Fatalf("consumed: %v", names)
	}
	// A step of that id that is not a drain is not overwritten.
	if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: l, StepID: "drain:x", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted, Output: []byte(`7`)}); err != nil {
		t.Fatal(err)
	}
	e.send(r.ID, "item", `4`)
	if _, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: l, StepID: "drain:x", Name: "item"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("drain into another step: %v", err)
	}
	// A drain step recorded otherwise (a fork copies its history) is
	// appended to as it is.
	if err := e.s.StepsRecord(e.ctx, store.StepsRecordParams{Lease: l, StepID: "drain:copied", Attempt: 1, Kind: store.StepEvent,
		Status: store.StepCompleted, Input: []byte("item"), Output: []byte(`["from the original"]`)}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: l, StepID: "drain:copied", Name: "item"}); err != nil ||
		string(res.Output) != `["from the original",4]` || res.Events != 2 || res.Fresh != 1 {
		t.Fatalf("drain into a copied step: %s %+v %v", res.Output, res, err)
	}
	if _, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: l, StepID: "drain:copied", Name: "other"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("drain of another name into a drain step: %v", err)
	}
	if _, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: l, StepID: "d", Name: "update.AddItem"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("drain of an update: %v", err)
	}
	stale := l
	stale.Token++
	if _, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: stale, StepID: "drain:item", Name: "item"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("drain under a stale lease: %v", err)
	}
}

// A drain takes at most protocol.MaxDrainEvents events and a list within
// the payload limit; the rest stay pending.
func TestEventsDrainLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.SettingsSet(e.ctx, store.Settings{PayloadWarnBytes: 100, PayloadMaxBytes: 100}); err != nil {
		t.Fatal(err)
	}
	s := store.New(e.pool, store.Options{}) // reads the new limits
	r := e.create(store.RunsCreateParams{})
	c := e.claimRun(r.ID, "T")
	for i := range 10 {
		if _, err := s.EventsSend(e.ctx, store.EventsSendParams{Namespace: "ns", RunID: r.ID, Name: "item",
			Payload: fmt.Appendf(nil, `"%018d"`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: leaseOf(c), StepID: "drain:item", Name: "item"})
	if err != nil {
		t.Fatal(err)
	}
	// 20 bytes and a comma each, in 100 bytes with the brackets: 4.
	if res.Events != 4 || len(res.Output) > 100 {
		t.Fatalf("drain within 100 bytes: %d events, %d bytes: %s", res.Events, len(res.Output), res.Output)
	}
	res, err = s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: leaseOf(c), StepID: "drain:item#2", Name: "item"})
	if err != nil || res.Events != 4 {
		t.Fatalf("second drain: %+v %v", res, err)
	}
	pending := 0
	for _, ev := range e.events(r.ID) {
		if ev.ConsumedAt == nil {
			pending++
		}
	}
	if pending != 2 {
		t.Fatalf("%d events pending, want 2", pending)
	}
}

// Continue-as-new is guarded as a completion is.
func TestEventsGuardContinueAsNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{ExternalID: "loop"})
	c := e.claimRun(r.ID, "T")
	e.send(r.ID, "item", `1`)
	next := protocol.ContinuedRunID(r.ID)
	seen := &store.EventsSeen{Seq: c.EventSeq, Names: []string{"item"}}
	if _, err := e.s.RunsContinueAsNew(e.ctx, leaseOf(c), next, []byte(`2`), seen); !errors.Is(err, store.ErrEventsArrived) {
		t.Fatalf("continue past an event: %v", err)
	}
	if run := e.get("ns", r.ID); run.Status != store.StatusPending {
		t.Fatalf("refused run is %s", run.Status)
	}
	c = e.claimRun(r.ID, "T")
	if _, err := e.s.EventsDrain(e.ctx, store.EventsDrainParams{Lease: leaseOf(c), StepID: "drain:item", Name: "item"}); err != nil {
		t.Fatal(err)
	}
	e.send(r.ID, "other", `1`)
	seen = &store.EventsSeen{Seq: c.EventSeq, Names: []string{"item"}}
	typ, err := e.s.RunsContinueAsNew(e.ctx, leaseOf(c), next, []byte(`2`), seen)
	if err != nil || typ != "T" {
		t.Fatalf("continue after the drain: %q %v", typ, err)
	}
	if run := e.get("ns", next); run.Status != store.StatusPending || string(run.Input) != `2` {
		t.Fatalf("continued run: %+v", run)
	}
	// Repeated: the same answer.
	if _, err := e.s.RunsContinueAsNew(e.ctx, leaseOf(c), next, []byte(`2`), seen); err != nil {
		t.Fatalf("repeated continue: %v", err)
	}
}
