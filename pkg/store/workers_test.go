package store_test

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

func registerWorker(t *testing.T, s *store.Store, ns, q string) store.Worker {
	t.Helper()
	w, err := s.WorkersRegister(context.Background(), store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: ns, Queue: q,
		Hostname: "host", PID: 42, Version: "1.0", Types: []store.TypeVersion{{Type: "T", Version: "v1"}}, MaxConcurrency: 4})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return w
}

func TestWorkersRegisterAndGet(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	p := store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "ns", Queue: "q", Hostname: "box-1", PID: 1234, Version: "1.2.3",
		Types:          []store.TypeVersion{{Type: "Order", Version: "v2"}, {Type: "Refund", Version: ""}},
		MaxConcurrency: 8, Labels: map[string]string{"zone": "eu-west-1a", "team": "payments"}}
	w, err := s.WorkersRegister(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != p.WorkerID || w.Namespace != "ns" || w.Queue != "q" || w.Hostname != "box-1" || w.PID != 1234 || w.Version != "1.2.3" ||
		!reflect.DeepEqual(w.Types, p.Types) || w.MaxConcurrency != 8 || w.Status != store.WorkerOnline ||
		!reflect.DeepEqual(w.Labels, p.Labels) || w.DeregisteredAt != nil || w.RegisteredAt.IsZero() || w.LastHeartbeatAt.IsZero() {
		t.Fatalf("registered: %+v", w)
	}
	got, err := s.WorkersGet(ctx, "ns", w.ID)
	if err != nil || !reflect.DeepEqual(got, w) {
		t.Fatalf("get: %+v %v\nwant %+v", got, err, w)
	}
	bare, err := s.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "ns", Queue: "q", MaxConcurrency: 1})
	if err != nil || bare.Types == nil || len(bare.Types) != 0 || bare.Labels == nil || len(bare.Labels) != 0 {
		t.Fatalf("bare registration: %+v %v", bare, err)
	}
	if _, err := s.WorkersGet(ctx, "ns", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown worker: %v", err)
	}
}

func TestWorkersReRegister(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	w := registerWorker(t, s, "ns", "q")
	time.Sleep(10 * time.Millisecond)
	// Re-registering a live worker (a reconnect) keeps its registration time.
	again, err := s.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: w.ID, Namespace: "ns", Queue: "q2", MaxConcurrency: 2,
		Types: []store.TypeVersion{{Type: "U", Version: "v9"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !again.RegisteredAt.Equal(w.RegisteredAt) || again.Queue != "q2" || again.MaxConcurrency != 2 || again.Types[0].Type != "U" ||
		!again.LastHeartbeatAt.After(w.LastHeartbeatAt) {
		t.Fatalf("reconnect: %+v\nwas %+v", again, w)
	}
	if _, err := s.WorkersDeregister(ctx, "ns", w.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	// A restart after going offline starts a new registration.
	back, err := s.WorkersRegister(
		ctx,
		store.WorkersRegisterParams{WorkerID: w.ID, Namespace: "ns", Queue: "q", Hostname: "new-host", PID: 7, MaxConcurrency: 3},
	)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != store.WorkerOnline || back.DeregisteredAt != nil || !back.RegisteredAt.After(w.RegisteredAt) ||
		back.Hostname != "new-host" || back.PID != 7 || back.MaxConcurrency != 3 || len(back.Types) != 0 {
		t.Fatalf("restart: %+v", back)
	}
	// Another namespace cannot take the id over.
	_, err = s.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: w.ID, Namespace: "evil", Queue: "q", MaxConcurrency: 1})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("other namespace: want ErrConflict, got %v", err)
	}
	if got, _ := s.WorkersGet(ctx, "ns", w.ID); got.Hostname != "new-host" {
		t.Fatalf("takeover changed the worker: %+v", got)
	}
}

func TestWorkersRegisterValidation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	ok := store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "ns", Queue: "q", MaxConcurrency: 1}
	cases := []struct {
		name, field string
		edit        func(p *store.WorkersRegisterParams)
	}{
		{"no id", "worker id", func(p *store.WorkersRegisterParams) { p.WorkerID = uuid.Nil }},
		{"no namespace", "namespace", func(p *store.WorkersRegisterParams) { p.Namespace = "" }},
		{"no queue", "queue", func(p *store.WorkersRegisterParams) { p.Queue = "" }},
		{"zero concurrency", "max concurrency", func(p *store.WorkersRegisterParams) { p.MaxConcurrency = 0 }},
		{"negative pid", "pid", func(p *store.WorkersRegisterParams) { p.PID = -1 }},
		{"duplicate type", "registered twice", func(p *store.WorkersRegisterParams) {
			p.Types = []store.TypeVersion{{Type: "T", Version: "1"}, {Type: "T", Version: "1"}}
		}},
		{"empty type", "workflow type", func(p *store.WorkersRegisterParams) { p.Types = []store.TypeVersion{{Version: "1"}} }},
		{"empty label key", "label", func(p *store.WorkersRegisterParams) { p.Labels = map[string]string{"": "x"} }},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		_, err := s.WorkersRegister(ctx, p)
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: want ErrInvalidArgument naming %q, got %v", c.name, c.field, err)
		}
	}
	if ws, _ := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns"}); len(ws) != 0 {
		t.Fatalf("invalid registrations stored: %+v", ws)
	}
}

func TestWorkersHeartbeatManyInOneStatement(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	const n = 50
	var beats []store.WorkerBeat
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	ids := map[uuid.UUID]bool{}
	for i := 0; i < n; i++ {
		w := registerWorker(t, s, "ns", "q")
		ids[w.ID] = true
		beats = append(beats, store.WorkerBeat{WorkerID: w.ID, At: at, Draining: i == 0})
	}
	off := registerWorker(t, s, "ns", "q")
	if _, err := s.WorkersDeregister(ctx, "ns", off.ID); err != nil {
		t.Fatal(err)
	}
	beats = append(beats,
		store.WorkerBeat{WorkerID: off.ID, At: at},                              // OFFLINE: must re-register
		store.WorkerBeat{WorkerID: uuid.New(), At: at},                          // unknown
		store.WorkerBeat{WorkerID: beats[1].WorkerID, At: at.Add(-time.Minute)}, // duplicate, older
	)
	touched, err := s.WorkersHeartbeat(ctx, beats)
	if err != nil {
		t.Fatal(err)
	}
	if touched != n {
		t.Fatalf("touched %d, want %d", touched, n)
	}
	ws, err := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	draining := 0
	for _, w := range ws {
		switch {
		case w.ID == off.ID:
			if w.Status != store.WorkerOffline || w.LastHeartbeatAt.Equal(at) {
				t.Fatalf("offline worker was touched: %+v", w)
			}
		case ids[w.ID]:
			if !w.LastHeartbeatAt.Equal(at) {
				t.Fatalf("worker %s heartbeat %v, want %v", w.ID, w.LastHeartbeatAt, at)
			}
			if w.Status == store.WorkerDraining {
				draining++
				if w.ID != beats[0].WorkerID {
					t.Fatalf("wrong worker draining: %s", w.ID)
				}
			}
		}
	}
	if draining != 1 {
		t.Fatalf("%d draining workers, want 1", draining)
	}
	// An older heartbeat does not move the time back, and a beat without
	// the draining flag does not undo draining.
	if _, err := s.WorkersHeartbeat(ctx, []store.WorkerBeat{{WorkerID: beats[0].WorkerID, At: at.Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	w0, _ := s.WorkersGet(ctx, "ns", beats[0].WorkerID)
	if !w0.LastHeartbeatAt.Equal(at) || w0.Status != store.WorkerDraining {
		t.Fatalf("after older beat: %+v", w0)
	}
	// Zero time means now.
	before := time.Now().Add(-time.Second)
	fresh := registerWorker(t, s, "ns", "q")
	if k, err := s.WorkersHeartbeat(ctx, []store.WorkerBeat{{WorkerID: fresh.ID}}); err != nil || k != 1 {
		t.Fatalf("zero-time beat: %d %v", k, err)
	}
	if got, _ := s.WorkersGet(ctx, "ns", fresh.ID); got.LastHeartbeatAt.Before(before) {
		t.Fatalf("zero-time beat set %v", got.LastHeartbeatAt)
	}
	if k, err := s.WorkersHeartbeat(ctx, nil); err != nil || k != 0 {
		t.Fatalf("empty: %d %v", k, err)
	}
}

func TestWorkersMarkStaleOffline(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	a := registerWorker(t, s, "ns", "q")
	b := registerWorker(t, s, "other", "q")
	alive := registerWorker(t, s, "ns", "q")
	gone := registerWorker(t, s, "ns", "q")
	if _, err := s.WorkersDeregister(ctx, "ns", gone.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := s.WorkersHeartbeat(ctx, []store.WorkerBeat{{WorkerID: alive.ID, At: now.Add(2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	oldest, err := s.WorkersOldestHeartbeat(ctx)
	if err != nil || oldest == nil || oldest.After(now) {
		t.Fatalf("oldest heartbeat: %v %v", oldest, err)
	}
	none, err := s.WorkersMarkStaleOffline(ctx, now.Add(-time.Hour))
	if err != nil || len(none) != 0 {
		t.Fatalf("nothing is stale yet: %v %v", none, err)
	}
	stale, err := s.WorkersMarkStaleOffline(ctx, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]bool{}
	for _, id := range stale {
		got[id] = true
	}
	if len(stale) != 2 || !got[a.ID] || !got[b.ID] {
		t.Fatalf("stale: %v, want %s and %s", stale, a.ID, b.ID)
	}
	wa, _ := s.WorkersGet(ctx, "ns", a.ID)
	if wa.Status != store.WorkerOffline || wa.DeregisteredAt != nil {
		t.Fatalf("stale worker: %+v", wa)
	}
	if again, err := s.WorkersMarkStaleOffline(ctx, now.Add(time.Hour)); err != nil || len(again) != 0 {
		t.Fatalf("marked twice: %v %v", again, err)
	}
	if k, _ := s.WorkersHeartbeat(ctx, []store.WorkerBeat{{WorkerID: a.ID}}); k != 0 {
		t.Fatal("a stale worker's heartbeat was accepted without re-registering")
	}
	oldest, err = s.WorkersOldestHeartbeat(ctx)
	if err != nil || oldest == nil || !oldest.After(now.Add(time.Hour)) {
		t.Fatalf("oldest heartbeat after marking: %v %v", oldest, err)
	}
	// Old offline workers can be purged; live ones never are.
	n, err := s.WorkersDeleteOffline(ctx, now.Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("purged %d (%v), want 3", n, err)
	}
	if _, err := s.WorkersGet(ctx, "ns", alive.ID); err != nil {
		t.Fatalf("live worker purged: %v", err)
	}
}

func TestWorkersDrainAndDeregister(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	w := registerWorker(t, s, "ns", "q")
	d, err := s.WorkersDrain(ctx, "ns", w.ID)
	if err != nil || d.Status != store.WorkerDraining {
		t.Fatalf("drain: %+v %v", d, err)
	}
	if d, err := s.WorkersDrain(ctx, "ns", w.ID); err != nil || d.Status != store.WorkerDraining {
		t.Fatalf("drain again: %+v %v", d, err)
	}
	off, err := s.WorkersDeregister(ctx, "ns", w.ID)
	if err != nil || off.Status != store.WorkerOffline || off.DeregisteredAt == nil {
		t.Fatalf("deregister: %+v %v", off, err)
	}
	again, err := s.WorkersDeregister(ctx, "ns", w.ID)
	if err != nil || !again.DeregisteredAt.Equal(*off.DeregisteredAt) {
		t.Fatalf("deregister again: %+v %v", again, err)
	}
	if _, err := s.WorkersDrain(ctx, "ns", w.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("drain offline: want ErrConflict, got %v", err)
	}
	unknown := uuid.New()
	if _, err := s.WorkersDrain(ctx, "ns", unknown); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("drain unknown: %v", err)
	}
	if _, err := s.WorkersDeregister(ctx, "ns", unknown); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deregister unknown: %v", err)
	}
}

func TestWorkersNamespaceIsolation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	w := registerWorker(t, s, "a", "q")
	if _, err := s.WorkersGet(ctx, "b", w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get from b: %v", err)
	}
	if _, err := s.WorkersDrain(ctx, "b", w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("drain from b: %v", err)
	}
	if _, err := s.WorkersDeregister(ctx, "b", w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deregister from b: %v", err)
	}
	if ws, err := s.WorkersList(ctx, store.WorkersListParams{Namespace: "b"}); err != nil || len(ws) != 0 {
		t.Fatalf("list b: %+v %v", ws, err)
	}
	if got, _ := s.WorkersGet(ctx, "a", w.ID); got.Status != store.WorkerOnline {
		t.Fatalf("b changed a's worker: %+v", got)
	}
}

func TestWorkersListAndCount(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	q1a := registerWorker(t, s, "ns", "q1")
	q1b := registerWorker(t, s, "ns", "q1")
	q2 := registerWorker(t, s, "ns", "q2")
	registerWorker(t, s, "other", "q1")
	if _, err := s.WorkersDrain(ctx, "ns", q1b.ID); err != nil {
		t.Fatal(err)
	}
	all, err := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns"})
	if err != nil || len(all) != 3 || all[0].ID != q1a.ID || all[1].ID != q1b.ID || all[2].ID != q2.ID {
		t.Fatalf("list: %+v %v", all, err)
	}
	byQueue, _ := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns", Queue: "q1"})
	if len(byQueue) != 2 {
		t.Fatalf("by queue: %+v", byQueue)
	}
	byStatus, _ := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns", Status: store.WorkerDraining})
	if len(byStatus) != 1 || byStatus[0].ID != q1b.ID {
		t.Fatalf("by status: %+v", byStatus)
	}
	limited, _ := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns", Limit: 2})
	if len(limited) != 2 {
		t.Fatalf("limit: %+v", limited)
	}
	if _, err := s.WorkersList(ctx, store.WorkersListParams{Namespace: "ns", Status: "ASLEEP"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad status: %v", err)
	}
	counts, err := s.WorkersCountOnline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ns/q1": 1, "ns/q2": 1, "other/q1": 1}
	if !reflect.DeepEqual(counts, want) {
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("counts %v (%v), want %v", counts, keys, want)
	}
}

// WorkersServing matches workers as the claim does: live (ONLINE or
// DRAINING), same namespace and queue, the type at the run's version or at
// any version for a run without one; a start that requires a worker is
// refused with ErrNoWorker, creating nothing, unless one serves it.
func TestWorkersServingAndRequireWorker(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	serving := func(ns, q, typ, ver string) int {
		t.Helper()
		n, err := s.WorkersServing(ctx, ns, q, typ, ver)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := func(p store.RunsCreateParams) error {
		t.Helper()
		p.Namespace, p.RequireWorker = "ns", true
		if p.Queue == "" {
			p.Queue = "q"
		}
		_, _, err := s.RunsCreate(ctx, p)
		return err
	}
	if n := serving("ns", "q", "T", ""); n != 0 {
		t.Fatalf("no workers: %d serve", n)
	}
	// The message names type@version, or the type alone without a
	// version (no dangling "@").
	if err := start(store.RunsCreateParams{Type: "T"}); !errors.Is(err, store.ErrNoWorker) || !strings.Contains(err.Error(), "serves T on queue q of namespace ns") {
		t.Fatalf("require a worker with none: %v", err)
	}
	if err := start(store.RunsCreateParams{Type: "T", Version: "v9"}); !errors.Is(err, store.ErrNoWorker) ||
		!strings.Contains(err.Error(), "serves T@v9 on queue q of namespace ns") {
		t.Fatalf("require a worker of a version with none: %v", err)
	}
	a := registerWorker(t, s, "ns", "q") // T@v1
	unversioned, err := s.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: uuid.New(), Namespace: "ns", Queue: "q",
		Types: []store.TypeVersion{{Type: "U"}}, MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	registerWorker(t, s, "other", "q")
	registerWorker(t, s, "ns", "elsewhere")
	for _, c := range []struct {
		ns, q, typ, ver string
		want            int
	}{
		{"ns", "q", "T", "", 1}, {"ns", "q", "T", "v1", 1}, {"ns", "q", "T", "v2", 0},
		{"ns", "q", "U", "", 1}, {"ns", "q", "U", "v1", 0}, {"ns", "q", "V", "", 0},
		{"other", "q", "T", "", 1}, {"ns", "nowhere", "T", "", 0},
	} {
		if n := serving(c.ns, c.q, c.typ, c.ver); n != c.want {
			t.Fatalf("%s/%s %s@%s: %d serve, want %d", c.ns, c.q, c.typ, c.ver, n, c.want)
		}
	}
	if _, err := s.WorkersDrain(ctx, "ns", a.ID); err != nil {
		t.Fatal(err)
	}
	if n := serving("ns", "q", "T", "v1"); n != 1 {
		t.Fatalf("a draining worker: %d serve, want 1", n)
	}
	if err := start(store.RunsCreateParams{Type: "T", Version: "v1", ExternalID: "x"}); err != nil {
		t.Fatalf("require a worker that serves: %v", err)
	}
	if err := start(store.RunsCreateParams{Type: "T", Version: "v2"}); !errors.Is(err, store.ErrNoWorker) {
		t.Fatalf("require a worker for a version nobody registered: %v", err)
	}
	if _, err := s.WorkersDeregister(ctx, "ns", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WorkersDeregister(ctx, "ns", unversioned.ID); err != nil {
		t.Fatal(err)
	}
	if n := serving("ns", "q", "T", "v1"); n != 0 {
		t.Fatalf("an offline worker: %d serve, want 0", n)
	}
	// The check comes first: a repeat of a live external id is refused too.
	if err := start(store.RunsCreateParams{Type: "T", Version: "v1", ExternalID: "x"}); !errors.Is(err, store.ErrNoWorker) {
		t.Fatalf("repeat with no worker left: %v", err)
	}
	// Many: one unserved row refuses the batch.
	_, err = s.RunsCreateMany(ctx, []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T"},
		{Namespace: "ns", Queue: "q", Type: "U", RequireWorker: true},
	})
	if !errors.Is(err, store.ErrNoWorker) {
		t.Fatalf("many with an unserved row: %v", err)
	}
	runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "ns"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after refused starts: %d %v, want the one served start", len(runs), err)
	}
	registerWorker(t, s, "ns", "q")
	res, err := s.RunsCreateMany(ctx, []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T", RequireWorker: true},
		{Namespace: "ns", Queue: "q", Type: "T", Version: "v1", RequireWorker: true},
		{Namespace: "ns", Queue: "q", Type: "U"},
	})
	if err != nil || len(res) != 3 || !res[0].Created || !res[1].Created || !res[2].Created {
		t.Fatalf("many, all served or not required: %+v %v", res, err)
	}
}
