package store_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// A default version pins runs started without one (by a start, a batch
// start), not those started with one; removing it unpins again.
func TestDefaultsPinStarts(t *testing.T) {
	e := newEnv(t)
	if got := e.create(store.RunsCreateParams{}); got.Version != "" {
		t.Fatalf("no default: version %q, want empty", got.Version)
	}
	if _, err := e.s.DefaultsSet(e.ctx, "ns", "T", "v2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.DefaultsSet(e.ctx, "ns", "T", ""); err == nil {
		t.Fatal("an empty default version was accepted")
	}
	if got := e.create(store.RunsCreateParams{}); got.Version != "v2" {
		t.Fatalf("default v2: version %q", got.Version)
	}
	if got := e.create(store.RunsCreateParams{Version: "v1"}); got.Version != "v1" {
		t.Fatalf("explicit v1: version %q", got.Version)
	}
	res, err := e.s.RunsCreateMany(
		e.ctx,
		[]store.RunsCreateParams{{Namespace: "ns", Queue: "q", Type: "T"}, {Namespace: "other", Queue: "q", Type: "T"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if v := e.get("ns", res[0].RunID).Version; v != "v2" {
		t.Fatalf("batch start in ns: version %q", v)
	}
	if v := e.get("other", res[1].RunID).Version; v != "" {
		t.Fatalf("batch start in another namespace: version %q", v)
	}
	ds, err := e.s.DefaultsList(e.ctx, "ns")
	if err != nil || len(ds) != 1 || ds[0].Type != "T" || ds[0].Version != "v2" {
		t.Fatalf("defaults %+v %v", ds, err)
	}
	if err := e.s.DefaultsDelete(e.ctx, "ns", "T"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, e.s.DefaultsDelete(e.ctx, "ns", "T"), store.ErrNotFound)
	if got := e.create(store.RunsCreateParams{}); got.Version != "" {
		t.Fatalf("default removed: version %q", got.Version)
	}
}

// A worker serving one type at two versions claims runs of both, and pins
// a run without a version to the first listed.
func TestRunsClaimSeveralVersions(t *testing.T) {
	e := newEnv(t)
	v1 := e.create(store.RunsCreateParams{Version: "v1"})
	v2 := e.create(store.RunsCreateParams{Version: "v2"})
	none := e.create(store.RunsCreateParams{})
	v3 := e.create(store.RunsCreateParams{Version: "v3"})
	got := e.claim(claimParams(uuid.New(), 10, store.TypeVersion{Type: "T", Version: "v2"}, store.TypeVersion{Type: "T", Version: "v1"}))
	if len(got) != 3 {
		t.Fatalf("claimed %d runs, want 3", len(got))
	}
	vers := map[uuid.UUID]string{}
	for _, c := range got {
		vers[c.ID] = c.Version
	}
	if vers[v1.ID] != "v1" || vers[v2.ID] != "v2" || vers[none.ID] != "v2" {
		t.Fatalf("claimed versions %v", vers)
	}
	if _, ok := vers[v3.ID]; ok {
		t.Fatal("a run of a version the worker does not serve was claimed")
	}
}

// Continue-as-new ends the run COMPLETED, naming a new PENDING run of the
// same type, queue and external id with the new input; a repeat is a no-op;
// a child run cannot; a stale lease is refused.
func TestRunsContinueAsNew(t *testing.T) {
	e := newEnv(t)
	r := e.create(store.RunsCreateParams{ExternalID: "loop", Input: []byte(`1`), Priority: 3})
	c := e.claimOne(claimParams(uuid.New(), 1, store.TypeVersion{Type: "T", Version: "v1"}), r.ID)
	next := protocol.ContinuedRunID(r.ID)
	wantErr(
		t,
		second(e.s.RunsContinueAsNew(e.ctx, store.Lease{Namespace: "ns", RunID: r.ID, Token: c.LeaseToken + 1}, next, []byte(`2`), nil)),
		store.ErrLeaseLost,
	)
	// The first report ends the run and names its type; a repeated one
	// changes nothing and names none (it is not counted twice).
	for i, want := range []string{"T", ""} {
		typ, err := e.s.RunsContinueAsNew(e.ctx, leaseOf(c), next, []byte(`2`), nil)
		if err != nil || typ != want {
			t.Fatalf("continue (%d): type %q, %v; want %q", i, typ, err, want)
		}
	}
	old := e.get("ns", r.ID)
	if old.Status != store.StatusCompleted || old.ContinuedAs == nil || *old.ContinuedAs != next || string(old.Output) != "null" {
		t.Fatalf("old run %s continued as %v output %s", old.Status, old.ContinuedAs, old.Output)
	}
	n := e.get("ns", next)
	if n.Status != store.StatusPending || n.ExternalID != "loop" || n.Type != "T" || n.Queue != "q" || n.Priority != 3 ||
		string(n.Input) != "2" || n.Version != "" {
		t.Fatalf("new run %+v", n)
	}
	byExt, err := e.s.RunsGetByExternalID(e.ctx, "ns", "loop")
	if err != nil || byExt.ID != next {
		t.Fatalf("external id names %v, want the new run (%v)", byExt.ID, err)
	}

	// A child cannot continue as new.
	parent := e.create(store.RunsCreateParams{Type: "P"})
	pc := e.claimOne(claimParams(uuid.New(), 1, store.TypeVersion{Type: "P"}), parent.ID)
	if err := e.s.RunsStartChild(e.ctx, store.RunsStartChildParams{Lease: leaseOf(pc), StepID: "c", Attempt: 1,
		ChildRunID: protocol.ChildRunID(parent.ID, "c", 1), Type: "C", Input: []byte(`null`)}); err != nil {
		t.Fatal(err)
	}
	cc := e.claimOne(claimParams(uuid.New(), 1, store.TypeVersion{Type: "C"}), protocol.ChildRunID(parent.ID, "c", 1))
	wantErr(t, second(e.s.RunsContinueAsNew(e.ctx, leaseOf(cc), protocol.ContinuedRunID(cc.ID), []byte(`1`), nil)), store.ErrInvalidArgument, "child")
}

// A schedule without a version fires instances at the type's default
// version, as it is when they fire.
func TestDefaultsPinScheduleFires(t *testing.T) {
	e := newEnv(t)
	sc, err := e.s.SchedulesCreate(e.ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "* * * * *", Input: []byte(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.DefaultsSet(e.ctx, "ns", "T", "v3"); err != nil {
		t.Fatal(err)
	}
	run, fired, err := e.s.SchedulesFire(e.ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: *sc.NextFireAt})
	if err != nil || !fired {
		t.Fatalf("fire: %v %v", fired, err)
	}
	if run.Version != "v3" {
		t.Fatalf("fired instance at version %q, want the default v3", run.Version)
	}
}

// second is the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }
