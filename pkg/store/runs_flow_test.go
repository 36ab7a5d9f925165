package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// ---- flow control on the create path: debounce and id reuse ----------------

func debounced(key string, window time.Duration, keep store.DebounceKeep, maxWait time.Duration, input string) store.RunsCreateParams {
	return store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Input: []byte(input),
		Debounce: &store.Debounce{Key: key, Window: window, Keep: keep, MaxWait: maxWait}}
}

// start runs RunsCreate with p's defaults filled as env.create does.
func (e *env) start(p store.RunsCreateParams) (store.Run, bool, error) {
	e.t.Helper()
	if p.Namespace == "" {
		p.Namespace = "ns"
	}
	if p.Queue == "" {
		p.Queue = "q"
	}
	if p.Type == "" {
		p.Type = "T"
	}
	return e.s.RunsCreate(e.ctx, p)
}

func (e *env) mustStart(p store.RunsCreateParams) (store.Run, bool) {
	e.t.Helper()
	r, created, err := e.start(p)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return r, created
}

// makeDue makes a PENDING run claimable now.
func (e *env) makeDue(id uuid.UUID) {
	e.t.Helper()
	e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() WHERE run_id = $1`, id)
}

// claimAlone makes run id due and claims it, alone on its queue.
func (e *env) claimAlone(id uuid.UUID) store.ClaimedRun {
	e.t.Helper()
	e.makeDue(id)
	p := claimParams(uuid.New(), 1)
	p.Queue = e.get("ns", id).Queue
	return e.claimOne(p, id)
}

// finish takes run id to status through the store: a claim and a
// completion or final failure, or a cancel before its start.
func (e *env) finish(id uuid.UUID, status store.RunStatus) {
	e.t.Helper()
	if status == store.StatusCancelled {
		if _, err := e.s.RunsCancel(e.ctx, "ns", id); err != nil {
			e.t.Fatalf("cancel %s: %v", id, err)
		}
		return
	}
	c := e.claimAlone(id)
	var err error
	if status == store.StatusCompleted {
		err = e.s.RunsComplete(e.ctx, leaseOf(c), []byte(`"ok"`))
	} else {
		err = e.s.RunsFail(e.ctx, leaseOf(c), "boom")
	}
	if err != nil {
		e.t.Fatalf("finish %s %s: %v", id, status, err)
	}
	if got := e.get("ns", id).Status; got != status {
		e.t.Fatalf("run %s is %s, want %s", id, got, status)
	}
}

func TestRunsDebounceConcurrentStartsMakeOneRun(t *testing.T) {
	e := newEnv(t)
	const n = 50
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, n)
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, c, err := e.s.RunsCreate(e.ctx, debounced("k", time.Hour, store.DebounceLast, 0, fmt.Sprint(i)))
			ids[i], created[i], errs[i] = r.ID, c, err
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("start %d got run %s, start 0 run %s: want one run", i, ids[i], ids[0])
		}
		if created[i] {
			made++
		}
	}
	if made != 1 {
		t.Fatalf("%d starts report created, want 1", made)
	}
	var runs int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.workflow_runs WHERE debounce_key = 'k'`).Scan(&runs); err != nil || runs != 1 {
		t.Fatalf("%d runs with the key (%v), want 1", runs, err)
	}
	r := e.get("ns", ids[0])
	if r.DebounceKey != "k" || r.DebounceStarts != n {
		t.Fatalf("debounce key %q starts %d, want k and %d", r.DebounceKey, r.DebounceStarts, n)
	}
}

func TestRunsDebounceKeepLastAndFirst(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		keep store.DebounceKeep
		want string
	}{{store.DebounceLast, `"b"`}, {store.DebounceFirst, `"a"`}} {
		t.Run(fmt.Sprintf("keep %q", tc.keep), func(t *testing.T) {
			e := e.with(t)
			key := "key-" + string(tc.keep)
			first, created := e.mustStart(debounced(key, time.Minute, tc.keep, 0, `"a"`))
			if !created {
				t.Fatal("first start did not create")
			}
			within(t, "first due time", first.AvailableAt, e.dbNow().Add(50*time.Second), e.dbNow().Add(time.Minute))
			// The second start pushes the due time to its own window.
			e.exec(`UPDATE kagzi.workflow_runs SET available_at = now() + interval '10 seconds' WHERE run_id = $1`, first.ID)
			second, created := e.mustStart(debounced(key, time.Minute, tc.keep, 0, `"b"`))
			if created || second.ID != first.ID {
				t.Fatalf("second start: created=%v run %s, want merged into %s", created, second.ID, first.ID)
			}
			within(t, "pushed due time", second.AvailableAt, e.dbNow().Add(50*time.Second), e.dbNow().Add(time.Minute))
			got := e.get("ns", first.ID)
			if string(got.Input) != tc.want || got.DebounceStarts != 2 {
				t.Fatalf("input %s starts %d, want %s and 2", got.Input, got.DebounceStarts, tc.want)
			}
		})
	}
}

func TestRunsDebounceWindowNeverMovesEarlier(t *testing.T) {
	e := newEnv(t)
	first, _ := e.mustStart(debounced("k", time.Hour, store.DebounceLast, 0, "1"))
	second, created := e.mustStart(debounced("k", time.Second, store.DebounceLast, 0, "2"))
	if created || !second.AvailableAt.Equal(*first.AvailableAt) {
		t.Fatalf("short window moved the due time from %v to %v (created=%v)", first.AvailableAt, second.AvailableAt, created)
	}
}

func TestRunsDebounceMaxWaitCaps(t *testing.T) {
	e := newEnv(t)
	first, _ := e.mustStart(debounced("k", 10*time.Minute, store.DebounceLast, 15*time.Minute, "1"))
	// The run was opened 10 minutes ago: a start now would push it to
	// now+10m, but the cap is created_at+15m = now+5m.
	e.exec(`UPDATE kagzi.workflow_runs SET created_at = now() - interval '10 minutes' WHERE run_id = $1`, first.ID)
	r, created := e.mustStart(debounced("k", 10*time.Minute, store.DebounceLast, 15*time.Minute, "2"))
	if created || r.ID != first.ID {
		t.Fatalf("created=%v run %s, want merged into %s", created, r.ID, first.ID)
	}
	now := e.dbNow()
	within(t, "capped due time", r.AvailableAt, now.Add(4*time.Minute), now.Add(5*time.Minute))
	// Past the cap, a start leaves the due time at the cap.
	e.exec(`UPDATE kagzi.workflow_runs SET created_at = now() - interval '20 minutes' WHERE run_id = $1`, first.ID)
	r, _ = e.mustStart(debounced("k", 10*time.Minute, store.DebounceLast, 15*time.Minute, "3"))
	if r.AvailableAt.After(e.dbNow()) {
		t.Fatalf("due time %v after the cap of a run opened 20 minutes ago", r.AvailableAt)
	}
}

func TestRunsDebounceClaimedRunOpensNewWindow(t *testing.T) {
	e := newEnv(t)
	first, _ := e.mustStart(debounced("k", time.Hour, store.DebounceLast, 0, "1"))
	// Another type and another key are other runs.
	other, created := e.mustStart(debounced("k2", time.Hour, store.DebounceLast, 0, "x"))
	if !created || other.ID == first.ID {
		t.Fatal("another key merged")
	}
	otherType := debounced("k", time.Hour, store.DebounceLast, 0, "x")
	otherType.Type = "U"
	if r, created := e.mustStart(otherType); !created || r.ID == first.ID {
		t.Fatal("another type merged")
	}
	e.makeDue(first.ID)
	c := e.claimOne(claimParams(uuid.New(), 1), first.ID)
	second, created := e.mustStart(debounced("k", time.Hour, store.DebounceLast, 0, "2"))
	if !created || second.ID == first.ID {
		t.Fatalf("start after the claim: created=%v run %s, want a new run", created, second.ID)
	}
	// A claimed run that goes back to PENDING stays closed.
	if err := e.s.RunsRelease(e.ctx, leaseOf(c)); err != nil {
		t.Fatal(err)
	}
	third, created := e.mustStart(debounced("k", time.Hour, store.DebounceLast, 0, "3"))
	if created || third.ID != second.ID {
		t.Fatalf("third start: created=%v run %s, want merged into %s", created, third.ID, second.ID)
	}
	if got := e.get("ns", first.ID); string(got.Input) != "1" {
		t.Fatalf("claimed run's input changed to %s", got.Input)
	}
}

func TestRunsDebounceValidation(t *testing.T) {
	e := newEnv(t)
	at := time.Now()
	for name, p := range map[string]store.RunsCreateParams{
		"no key":    debounced("", time.Second, "", 0, "1"),
		"no window": debounced("k", 0, "", 0, "1"),
		"short cap": debounced("k", time.Minute, "", time.Second, "1"),
		"bad keep":  debounced("k", time.Second, "MIDDLE", 0, "1"),
		"external id": func() store.RunsCreateParams {
			p := debounced("k", time.Second, "", 0, "1")
			p.ExternalID = "x"
			return p
		}(),
		"start time": func() store.RunsCreateParams {
			p := debounced("k", time.Second, "", 0, "1")
			p.AvailableAt = &at
			return p
		}(),
		"key too long":  debounced(strings.Repeat("k", 300), time.Second, "", 0, "1"),
		"key with nul":  debounced("a\x00b", time.Second, "", 0, "1"),
		"negative wait": debounced("k", time.Second, "", -time.Second, "1"),
	} {
		if _, _, err := e.start(p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.workflow_runs`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d runs after refused starts (%v)", n, err)
	}
}

func TestRunsDebounceRequireWorker(t *testing.T) {
	e := newEnv(t)
	p := debounced("k", time.Second, "", 0, "1")
	p.RequireWorker = true
	_, _, err := e.start(p)
	wantErr(t, err, store.ErrNoWorker)
}

// queueOf is a queue of its own for the runs of external id ext, so a
// claim in one subtest takes no run of another.
func queueOf(ext string) string { return "q-" + strings.ReplaceAll(ext, "_", "-") }

func reuse(ext string, policy store.IDReusePolicy, window time.Duration) store.RunsCreateParams {
	return store.RunsCreateParams{ExternalID: ext, IDReuse: policy, IDReuseWindow: window, Input: []byte(`"in"`)}
}

func TestRunsIDReusePolicies(t *testing.T) {
	e := newEnv(t)
	type outcome int
	const (
		returnsLive outcome = iota // the live run, created=false
		creates                    // a new run
		refuses                    // an *IDReuseError
		replaces                   // the live run terminated, a new run
	)
	for _, tc := range []struct {
		policy store.IDReusePolicy
		prior  store.RunStatus // the last run with the id; "" none, PENDING live
		want   outcome
	}{
		{store.IDReuseAllowDuplicate, "", creates},
		{store.IDReuseAllowDuplicate, store.StatusPending, returnsLive},
		{store.IDReuseAllowDuplicate, store.StatusCompleted, creates},
		{store.IDReuseAllowDuplicate, store.StatusFailed, creates},
		{store.IDReuseFailedOnly, "", creates},
		{store.IDReuseFailedOnly, store.StatusPending, returnsLive},
		{store.IDReuseFailedOnly, store.StatusCompleted, refuses},
		{store.IDReuseFailedOnly, store.StatusFailed, creates},
		{store.IDReuseFailedOnly, store.StatusCancelled, creates},
		{store.IDReuseReject, "", creates},
		{store.IDReuseReject, store.StatusPending, returnsLive},
		{store.IDReuseReject, store.StatusCompleted, refuses},
		{store.IDReuseReject, store.StatusFailed, refuses},
		{store.IDReuseReject, store.StatusCancelled, refuses},
		{store.IDReuseTerminate, "", creates},
		{store.IDReuseTerminate, store.StatusPending, replaces},
		{store.IDReuseTerminate, store.StatusRunning, replaces},
		{store.IDReuseTerminate, store.StatusCompleted, creates},
		{store.IDReuseTerminate, store.StatusFailed, creates},
	} {
		ext := fmt.Sprintf("id-%s-%s", tc.policy, tc.prior)
		t.Run(ext, func(t *testing.T) {
			e := e.with(t)
			var prior store.Run
			if tc.prior != "" {
				prior = e.create(store.RunsCreateParams{ExternalID: ext, Queue: queueOf(ext)})
				switch tc.prior {
				case store.StatusPending:
				case store.StatusRunning:
					e.claimAlone(prior.ID)
				default:
					e.finish(prior.ID, tc.prior)
				}
			}
			p := reuse(ext, tc.policy, 0)
			p.Queue = queueOf(ext)
			r, created, err := e.start(p)
			switch tc.want {
			case returnsLive:
				if err != nil || created || r.ID != prior.ID {
					t.Fatalf("got run %s created=%v err %v, want the live run %s", r.ID, created, err, prior.ID)
				}
			case creates, replaces:
				if err != nil || !created || r.ID == prior.ID {
					t.Fatalf("got run %s created=%v err %v, want a new run", r.ID, created, err)
				}
			case refuses:
				var re *store.IDReuseError
				if !errors.As(err, &re) || !errors.Is(err, store.ErrIDReused) || !errors.Is(err, store.ErrConflict) {
					t.Fatalf("got %v, want an *IDReuseError", err)
				}
				if re.ExistingRunID != prior.ID || re.Status != tc.prior || re.Policy != tc.policy || re.FinishedAt.IsZero() {
					t.Fatalf("error %+v does not name run %s %s", re, prior.ID, tc.prior)
				}
			}
			if tc.want == replaces {
				old := e.get("ns", prior.ID)
				if old.Status != store.StatusCancelled || old.Error != "terminated: id reuse: replaced by run "+r.ID.String() {
					t.Fatalf("replaced run is %s %q", old.Status, old.Error)
				}
			}
			var live int
			if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.workflow_runs WHERE external_id = $1
				AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')`, ext).Scan(&live); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.want == refuses]; live != want {
				t.Fatalf("%d live runs with the id, want %d", live, want)
			}
		})
	}
}

func TestRunsIDReuseWindow(t *testing.T) {
	e := newEnv(t)
	for _, policy := range []store.IDReusePolicy{store.IDReuseReject, store.IDReuseFailedOnly} {
		t.Run(string(policy), func(t *testing.T) {
			e := e.with(t)
			ext := "w-" + string(policy)
			old := e.create(store.RunsCreateParams{ExternalID: ext, Queue: queueOf(ext)})
			e.finish(old.ID, store.StatusCompleted)
			_, _, err := e.start(reuse(ext, policy, time.Hour))
			wantErr(t, err, store.ErrIDReused)
			// Ended two hours ago: outside the window, it no longer counts;
			// without a window it does.
			e.exec(`UPDATE kagzi.workflow_runs SET finished_at = now() - interval '2 hours' WHERE run_id = $1`, old.ID)
			_, _, err = e.start(reuse(ext, policy, 0))
			wantErr(t, err, store.ErrIDReused)
			p := reuse(ext, policy, time.Hour)
			p.Queue = queueOf(ext)
			r, created, err := e.start(p)
			if err != nil || !created {
				t.Fatalf("start after the window: created=%v %v", created, err)
			}
			// FailedOnly looks at the last run only: a later failed run
			// lets a new one start although an earlier one completed.
			if policy == store.IDReuseFailedOnly {
				e.finish(r.ID, store.StatusFailed)
				if _, created, err := e.start(reuse(ext, policy, 0)); err != nil || !created {
					t.Fatalf("start after a failed run: created=%v %v", created, err)
				}
			}
		})
	}
}

func TestRunsIDReuseValidation(t *testing.T) {
	e := newEnv(t)
	for name, p := range map[string]store.RunsCreateParams{
		"no external id":      reuse("", store.IDReuseReject, 0),
		"unknown policy":      reuse("x", "SOMETIMES", 0),
		"window on terminate": reuse("x", store.IDReuseTerminate, time.Hour),
		"window on allow":     reuse("x", store.IDReuseAllowDuplicate, time.Hour),
		"negative window":     reuse("x", store.IDReuseReject, -time.Hour),
	} {
		if _, _, err := e.start(p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestRunsIDReuseTerminateConcurrent(t *testing.T) {
	e := newEnv(t)
	first := e.create(store.RunsCreateParams{ExternalID: "x"})
	e.makeDue(first.ID)
	e.claimOne(claimParams(uuid.New(), 1), first.ID)
	const n = 10
	var wg sync.WaitGroup
	got := make([]uuid.UUID, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, created, err := e.start(reuse("x", store.IDReuseTerminate, 0))
			if err == nil && !created {
				err = fmt.Errorf("created=false for run %s", r.ID)
			}
			got[i], errs[i] = r.ID, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	// Every run but one is CANCELLED, each replaced by one of the starts;
	// the starts form one chain from the first run.
	rows, err := e.pool.Query(e.ctx, `SELECT run_id, status, coalesce(error, '') FROM kagzi.workflow_runs WHERE external_id = 'x'`)
	if err != nil {
		t.Fatal(err)
	}
	replacedBy := map[uuid.UUID]uuid.UUID{}
	var live []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		var st, msg string
		if err := rows.Scan(&id, &st, &msg); err != nil {
			t.Fatal(err)
		}
		if st == "CANCELLED" {
			next, err := uuid.Parse(strings.TrimPrefix(msg, "terminated: id reuse: replaced by run "))
			if err != nil {
				t.Fatalf("run %s: error %q", id, msg)
			}
			replacedBy[id] = next
		} else {
			live = append(live, id)
		}
	}
	if rows.Err() != nil || len(live) != 1 || len(replacedBy) != n {
		t.Fatalf("%d live runs and %d replaced (%v), want 1 and %d", len(live), len(replacedBy), rows.Err(), n)
	}
	cur, steps := first.ID, 0
	for cur != live[0] {
		next, ok := replacedBy[cur]
		if !ok || steps > n {
			t.Fatalf("chain from %s breaks at %s", first.ID, cur)
		}
		cur, steps = next, steps+1
	}
	if steps != n {
		t.Fatalf("chain of %d replacements, want %d", steps, n)
	}
	if !sameSet(got, mapValues(replacedBy)) {
		t.Fatal("starts' runs are not the chain's")
	}
}

func mapValues(m map[uuid.UUID]uuid.UUID) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestRunsCreateManyFlow(t *testing.T) {
	e := newEnv(t)
	old := e.create(store.RunsCreateParams{ExternalID: "done"})
	e.finish(old.ID, store.StatusCompleted)
	ps := []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "x"},
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "x", IDReuse: store.IDReuseTerminate},
		debounced("k", time.Hour, store.DebounceLast, 0, `"1"`),
		debounced("k", time.Hour, store.DebounceLast, 0, `"2"`),
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "x"},
	}
	res, err := e.s.RunsCreateMany(e.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created || !res[1].Created || res[1].RunID == res[0].RunID {
		t.Fatalf("rows 0, 1: %+v %+v, want two runs", res[0], res[1])
	}
	if got := e.get("ns", res[0].RunID); got.Status != store.StatusCancelled {
		t.Fatalf("row 0's run is %s, want CANCELLED by row 1", got.Status)
	}
	if !res[2].Created || res[3].Created || res[3].RunID != res[2].RunID {
		t.Fatalf("rows 2, 3: %+v %+v, want one debounced run", res[2], res[3])
	}
	if got := e.get("ns", res[2].RunID); string(got.Input) != `"2"` {
		t.Fatalf("debounced input %s", got.Input)
	}
	if res[4].Created || res[4].RunID != res[1].RunID {
		t.Fatalf("row 4: %+v, want row 1's live run", res[4])
	}
	// A refused row refuses the batch: nothing of it stays.
	_, err = e.s.RunsCreateMany(e.ctx, []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "y"},
		{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "done", IDReuse: store.IDReuseReject},
	})
	wantErr(t, err, store.ErrIDReused, "row 1")
	if _, err := e.s.RunsGetByExternalID(e.ctx, "ns", "y"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("row 0 of the refused batch: %v, want ErrNotFound", err)
	}
}
