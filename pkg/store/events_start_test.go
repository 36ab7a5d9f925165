package store_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// sws is one signal-with-start of run type T with external id ext on queue q.
func (e *env) sws(ext, name, payload string) (store.SentWithStart, error) {
	return e.s.EventsSendWithStart(e.ctx, store.EventsSendWithStartParams{
		Run:  store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: ext, Input: []byte(`"in-` + payload + `"`)},
		Name: name, Payload: []byte(payload)})
}

// runsWithExternalID lists the ids of every run (live or not) with ext.
func (e *env) runsWithExternalID(ext string) []uuid.UUID {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT run_id FROM kagzi.workflow_runs WHERE namespace_id = 'ns' AND external_id = $1 ORDER BY run_id`, ext)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// payloads are the payloads of the events of a run, sorted.
func (e *env) payloads(id uuid.UUID) []string {
	e.t.Helper()
	evs, err := e.s.EventsList(e.ctx, "ns", id)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Payload)
	}
	sort.Strings(out)
	return out
}

func TestEventsSendWithStartStartsThenSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, err := e.sws("order-1", "item", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Started || first.RunStatus != store.StatusPending || first.Queue != "q" || first.Woken ||
		first.Name != "item" || string(first.Payload) != "1" || first.ID.Version() != 7 || first.CreatedAt.IsZero() {
		t.Fatalf("first: %+v", first)
	}
	run := e.get("ns", first.RunID)
	if run.Type != "T" || run.ExternalID != "order-1" || string(run.Input) != `"in-1"` || run.Status != store.StatusPending {
		t.Fatalf("started run: %+v", run)
	}
	second, err := e.sws("order-1", "item", "2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Started || second.RunID != first.RunID || second.ID == first.ID {
		t.Fatalf("second: %+v", second)
	}
	// The second call's input was not used: the run had started.
	if run := e.get("ns", first.RunID); string(run.Input) != `"in-1"` {
		t.Fatalf("input after the second call: %s", run.Input)
	}
	if got := e.payloads(first.RunID); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("events: %v", got)
	}
}

func TestEventsSendWithStartConcurrentOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 16
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   [n]store.SentWithStart
		errs  [n]error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = e.sws("race", "item", fmt.Sprintf("%02d", i))
		}()
	}
	close(start)
	wg.Wait()
	started := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if res[i].Started {
			started++
		}
		if res[i].RunID != res[0].RunID {
			t.Fatalf("caller %d sent to run %s, caller 0 to %s", i, res[i].RunID, res[0].RunID)
		}
	}
	if started != 1 {
		t.Fatalf("%d callers started a run, want 1", started)
	}
	if runs := e.runsWithExternalID("race"); len(runs) != 1 || runs[0] != res[0].RunID {
		t.Fatalf("runs with the external id: %v", runs)
	}
	got := e.payloads(res[0].RunID)
	if len(got) != n {
		t.Fatalf("run holds %d events, want %d: %v", len(got), n, got)
	}
	for i, p := range got {
		if p != fmt.Sprintf("%02d", i) {
			t.Fatalf("events: %v", got)
		}
	}
}

func TestEventsSendWithStartOtherTypeConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	live := e.create(store.RunsCreateParams{Type: "Other", ExternalID: "order-2"})
	_, err := e.sws("order-2", "item", "1")
	wantErr(t, err, store.ErrConflict, "workflow type", `"Other"`, live.ID.String())
	if got := e.payloads(live.ID); len(got) != 0 {
		t.Fatalf("the refused event was stored: %v", got)
	}
	if runs := e.runsWithExternalID("order-2"); len(runs) != 1 {
		t.Fatalf("runs with the external id: %v", runs)
	}
}

func TestEventsSendWithStartAfterFinishStartsAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, err := e.sws("order-3", "item", "1")
	if err != nil || !first.Started {
		t.Fatalf("first: %+v %v", first, err)
	}
	c := e.claimOne(claimParams(uuid.New(), 1), first.RunID)
	if err := e.s.RunsComplete(e.ctx, leaseOf(c), []byte("null")); err != nil {
		t.Fatal(err)
	}
	second, err := e.sws("order-3", "item", "2")
	if err != nil || !second.Started || second.RunID == first.RunID || second.RunStatus != store.StatusPending {
		t.Fatalf("after the first finished: %+v %v", second, err)
	}
	if a, b := e.payloads(first.RunID), e.payloads(second.RunID); fmt.Sprint(a) != "[1]" || fmt.Sprint(b) != "[2]" {
		t.Fatalf("events: first %v, second %v", a, b)
	}
}

func TestEventsSendWithStartWakesWaitingRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, err := e.sws("order-4", "other", "x")
	if err != nil {
		t.Fatal(err)
	}
	c := e.claimOne(claimParams(uuid.New(), 1), first.RunID)
	until := time.Now().Add(time.Hour)
	res, err := e.s.EventsReceive(e.ctx, store.EventsReceiveParams{Lease: leaseOf(c), StepID: "w", Attempt: 1, Name: "go",
		Until: &until, Suspend: true})
	if err != nil || res.Status != store.EventWaiting || res.Ready {
		t.Fatalf("wait: %+v %v", res, err)
	}
	ev, err := e.sws("order-4", "go", `"now"`)
	if err != nil || ev.Started || ev.RunID != first.RunID || !ev.Woken || ev.RunStatus != store.StatusSleeping {
		t.Fatalf("send to the waiting run: %+v %v", ev, err)
	}
	if run := e.get("ns", first.RunID); run.AvailableAt == nil || run.AvailableAt.After(e.dbNow()) {
		t.Fatalf("woken run due at %v", run.AvailableAt)
	}
}

// A run finishing while a signal-with-start names its external id: the
// event lands on the run while it is live, or on a new run, never on a
// finished one.
func TestEventsSendWithStartRacingFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 20 {
		ext := fmt.Sprintf("fin-%d", i)
		old := e.create(store.RunsCreateParams{ExternalID: ext, Queue: "fin"})
		cp := claimParams(uuid.New(), 1)
		cp.Queue = "fin"
		c := e.claimOne(cp, old.ID)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			sent    store.SentWithStart
			sendErr error
			doneErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			sent, sendErr = e.sws(ext, "item", "1")
		}()
		go func() {
			defer wg.Done()
			<-start
			doneErr = e.s.RunsComplete(e.ctx, leaseOf(c), []byte("null"))
		}()
		close(start)
		wg.Wait()
		if sendErr != nil || doneErr != nil {
			t.Fatalf("round %d: send %v, complete %v", i, sendErr, doneErr)
		}
		switch {
		case !sent.Started && sent.RunID == old.ID && sent.RunStatus == store.StatusRunning:
		case sent.Started && sent.RunID != old.ID:
		default:
			t.Fatalf("round %d: %+v (old run %s)", i, sent, old.ID)
		}
		if runs := e.runsWithExternalID(ext); len(runs) != 1+b2i(sent.Started) {
			t.Fatalf("round %d: runs %v", i, runs)
		}
		if got := e.payloads(sent.RunID); fmt.Sprint(got) != "[1]" {
			t.Fatalf("round %d: events %v", i, got)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEventsSendWithStartValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.sws("", "item", "1")
	wantErr(t, err, store.ErrInvalidArgument, "external id")
	_, err = e.sws("v", "", "1")
	wantErr(t, err, store.ErrInvalidArgument)
	_, err = e.s.EventsSendWithStart(e.ctx, store.EventsSendWithStartParams{
		Run: store.RunsCreateParams{Namespace: "ns", Queue: "q", ExternalID: "v"}, Name: "item"})
	wantErr(t, err, store.ErrInvalidArgument, "workflow type")
	// A template holding the id is no run to send to.
	tpl := e.insertTemplate("ns", "q", "T")
	e.exec(`UPDATE kagzi.workflow_runs SET external_id = 'tpl' WHERE run_id = $1`, tpl)
	_, err = e.sws("tpl", "item", "1")
	wantErr(t, err, store.ErrConflict, "schedule template")
	if runs := e.runsWithExternalID("v"); len(runs) != 0 {
		t.Fatalf("an invalid call started %v", runs)
	}
}
