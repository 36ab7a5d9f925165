package dispatcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The dispatcher's tests run it over a database and a NATS server of
// their own, with workers played by the test: a worker is an inbox that
// receives deliveries and answers them.

const (
	tns    = "ns"
	tqueue = "q"
	ttype  = "T"
)

type env struct {
	t   *testing.T
	ctx context.Context
	st  *store.Store
	nc  *nats.Conn
	d   *Dispatcher
}

// testConfig is the dispatcher's configuration at its defaults, with
// what set changes (set may be nil).
func testConfig(t *testing.T, set func(*Config)) Config {
	t.Helper()
	cfg, err := config.Defaults[Config](context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(&cfg)
	}
	return cfg
}

func newEnv(t *testing.T, set func(*Config), maxPayload int32) *env {
	t.Helper()
	t.Parallel()
	cfg := testConfig(t, set)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := testnats.StartWithMaxPayload(t, maxPayload)
	e := &env{t: t, ctx: ctx, st: testdb.Store(t), nc: srv.Connect(t)}
	e.d = New(cfg, Deps{}, e.st, srv.Connect(t), nil)
	if err := e.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.d.Stop)
	return e
}

// run creates a run of ttype, due at at (nil: now), with input.
func (e *env) run(at *time.Time, input string) uuid.UUID {
	e.t.Helper()
	r, _, err := e.st.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: tns, Queue: tqueue, Type: ttype, Input: []byte(input), AvailableAt: at})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// wakeup publishes what the relay would for a run that became due.
func (e *env) wakeup() {
	e.t.Helper()
	e.publish(protocol.SubjectReady(tns, tqueue), "", &protocol.Wakeup{Namespace: tns, Queue: tqueue, AvailableAt: time.Now()})
}

func (e *env) publish(subject, reply string, m protocol.Message) {
	e.t.Helper()
	e.publishAs(subject, reply, m, protocol.JSON)
}

func (e *env) publishAs(subject, reply string, m protocol.Message, enc protocol.Encoding) {
	e.t.Helper()
	data, err := protocol.EncodeAs(m, enc)
	if err != nil {
		e.t.Fatal(err)
	}
	var err2 error
	if reply == "" {
		err2 = e.nc.Publish(subject, data)
	} else {
		err2 = e.nc.PublishRequest(subject, reply, data)
	}
	if err2 != nil {
		e.t.Fatal(err2)
	}
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// remembersEmpty reports whether the queue remembers that a claim for
// types found nothing since its last wakeup.
func (e *env) remembersEmpty(types ...string) bool {
	tvs := make([]protocol.TypeVersion, len(types))
	for i, t := range types {
		tvs[i] = protocol.TypeVersion{Type: t}
	}
	sig, _ := typeSig(tvs)
	e.d.mu.Lock()
	defer e.d.mu.Unlock()
	q := e.d.queues[qkey{tns, tqueue}]
	return q != nil && q.empty[sig] == q.gen
}

// parkedReplies is the reply subjects of the requests parked on the
// test's queue, joined by spaces.
func (e *env) parkedReplies() string {
	e.d.mu.Lock()
	defer e.d.mu.Unlock()
	q := e.d.queues[qkey{tns, tqueue}]
	if q == nil {
		return ""
	}
	var out []string
	for _, p := range q.parked {
		out = append(out, p.reply)
	}
	return strings.Join(out, " ")
}

// quiet reports whether no read that could wake the test's queue is in
// flight or armed: no backlog read, no next-due read, no timer.
func (e *env) quiet() bool {
	if e.d.backlogReads.Load() != 0 {
		return false
	}
	e.d.mu.Lock()
	defer e.d.mu.Unlock()
	q := e.d.queues[qkey{tns, tqueue}]
	return q != nil && !q.nextDue && q.timerAt.IsZero()
}

// waitFor waits until cond holds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	e.waitStats(what, func(Stats) bool { return cond() })
}

// waitStats waits until cond holds of the dispatcher's counters.
func (e *env) waitStats(what string, cond func(Stats) bool) Stats {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.d.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s: %+v", what, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type received struct {
	d   protocol.Delivery
	at  time.Time
	enc protocol.Encoding
}

type worker struct {
	e          *env
	id         uuid.UUID
	inbox      string
	seq        uint64
	deliveries chan received
	// enc is the encoding of its requests.
	enc protocol.Encoding
}

// ackMode is how a test worker answers a delivery.
type ackMode int

const (
	accept ackMode = iota
	refuse
	silent // never answers: the dispatcher's request times out
)

func (e *env) worker(mode ackMode) *worker {
	e.t.Helper()
	w := &worker{e: e, id: uuid.New(), inbox: nats.NewInbox(), deliveries: make(chan received, 16)}
	sub, err := e.nc.Subscribe(w.inbox, func(m *nats.Msg) {
		var d protocol.Delivery
		if err := protocol.Decode(m.Data, &d); err != nil {
			e.t.Errorf("delivery does not decode: %v", err)
			return
		}
		w.deliveries <- received{d: d, at: time.Now(), enc: protocol.EncodingOf(m.Data)}
		if mode == silent {
			return
		}
		data, _ := protocol.Encode(&protocol.DeliveryAck{Accepted: mode == accept})
		_ = m.Respond(data)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// request asks for up to credits runs, parked for up to a minute.
func (w *worker) request(credits int) {
	w.e.t.Helper()
	w.seq++
	w.e.publishAs(protocol.SubjectWork(tns, tqueue), w.inbox, &protocol.WorkRequest{WorkerID: w.id, Namespace: tns, Queue: tqueue,
		Credits: credits, Types: []protocol.TypeVersion{{Type: ttype}}, Seq: w.seq, WaitMS: 60_000}, w.enc)
}

func (w *worker) next() received {
	w.e.t.Helper()
	select {
	case r := <-w.deliveries:
		return r
	case <-time.After(20 * time.Second):
		w.e.t.Fatal("no delivery")
		return received{}
	}
}

func runIDs(d protocol.Delivery) []uuid.UUID {
	ids := make([]uuid.UUID, len(d.Runs))
	for i, r := range d.Runs {
		ids[i] = r.RunID
	}
	return ids
}

// A request that finds nothing is parked; the claim's empty answer is
// remembered, so the worker's renewed request parks without a query; a
// wakeup forgets it, and the parked request is served, by its latest
// sequence number.
func TestParkedRequestWaitsForAWakeup(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	w := e.worker(accept)
	w.request(2)
	e.waitFor("the first claim's empty answer remembered", func() bool { return e.remembersEmpty(ttype) })

	w.request(2) // renewal: replaces the parked request
	st := e.waitStats("the renewal answered from memory", func(s Stats) bool { return s.EmptySkips == 1 })
	if st.Claims != 1 || st.Parked != 1 {
		t.Fatalf("after the renewal: %d claims, %d parked; want 1 and 1 (no query, the old request replaced)", st.Claims, st.Parked)
	}

	id := e.run(nil, `{}`)
	e.wakeup()
	got := w.next()
	if ids := runIDs(got.d); len(ids) != 1 || ids[0] != id {
		t.Fatalf("delivered %v, want [%s]", ids, id)
	}
	if got.d.Seq != 2 || got.d.WorkerID != w.id {
		t.Fatalf("delivery for worker %s seq %d, want %s seq 2", got.d.WorkerID, got.d.Seq, w.id)
	}
	e.waitStats("the delivery acked", func(s Stats) bool { return s.Deliveries == 1 && s.Parked == 0 && s.Claimed == 1 })
	if len(w.deliveries) != 0 {
		t.Fatal("the replaced request was served too")
	}
}

// A worker's older request that arrives after its newer one (a reconnected
// worker sends one to the queue group and the next addressed, and the two
// subscriptions hand them over in either order) is dropped, not parked
// in its place: the worker waits for the newer one's delivery and would
// refuse the older one's. A request of another process with the same
// worker id (another reply inbox) replaces the parked one whatever its
// number.
func TestOlderRequestDoesNotReplaceANewer(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	w := e.worker(accept)
	w.seq = 5
	w.request(2) // seq 6
	e.waitFor("the first claim's empty answer remembered", func() bool { return e.remembersEmpty(ttype) })
	w.seq = 3
	w.request(2) // seq 4, overtaken
	e.waitStats("the older request dropped", func(s Stats) bool { return s.Overtaken == 1 && s.Parked == 1 })

	id := e.run(nil, `{}`)
	e.wakeup()
	got := w.next()
	if ids := runIDs(got.d); len(ids) != 1 || ids[0] != id || got.d.Seq != 6 {
		t.Fatalf("delivered %v for seq %d, want [%s] for seq 6", ids, got.d.Seq, id)
	}

	// A restarted process of the same id numbers its requests from 1.
	w.request(2) // seq 5 (4+1): parked
	e.waitStats("parked", func(s Stats) bool { return s.Parked == 1 })
	again := e.worker(accept)
	again.id = w.id
	again.request(2) // seq 1, another inbox
	// Each request is answered from the empty-queue memory, no query: by
	// the request itself, or, when it came while the claim that took the
	// last run was still recording that memory (the delivery goes first),
	// by that claim's round, which leaves it parked. Either way the
	// restarted process's request ends parked alone, the queue known
	// empty, and no claim made.
	e.waitFor("the restarted process's request parked in its place", func() bool {
		return e.parkedReplies() == again.inbox && e.remembersEmpty(ttype)
	})
	if st := e.d.Stats(); st.Claims != 2 || st.Overtaken != 1 {
		t.Fatalf("%d claims, %d overtaken; want 2 and 1: a renewed request made a query", st.Claims, st.Overtaken)
	}
	id = e.run(nil, `{}`)
	e.wakeup()
	got = again.next()
	if ids := runIDs(got.d); len(ids) != 1 || ids[0] != id || got.d.Seq != 1 {
		t.Fatalf("delivered %v for seq %d, want [%s] for seq 1", ids, got.d.Seq, id)
	}
	if len(w.deliveries) != 0 {
		t.Fatal("the replaced request was served too")
	}
}

// The empty-queue memory is per type set: a worker serving other types
// still queries, and a wakeup for another queue leaves it in place.
func TestEmptyMemoryIsPerTypeSetAndQueue(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	w := e.worker(accept)
	w.request(1)
	e.waitFor("the first claim's empty answer remembered", func() bool { return e.remembersEmpty(ttype) })

	other := &worker{e: e, id: uuid.New(), inbox: nats.NewInbox()}
	other.seq++
	e.publish(protocol.SubjectWork(tns, tqueue), other.inbox, &protocol.WorkRequest{WorkerID: other.id, Namespace: tns, Queue: tqueue,
		Credits: 1, Types: []protocol.TypeVersion{{Type: "Other"}}, Seq: 1, WaitMS: 60_000})
	e.waitFor("the other type set's empty answer remembered", func() bool { return e.remembersEmpty("Other") })
	if st := e.d.Stats(); st.Claims != 2 || st.Parked != 2 {
		t.Fatalf("%d claims, %d parked; want 2 and 2", st.Claims, st.Parked)
	}

	e.publish(protocol.SubjectReady(tns, "elsewhere"), "", &protocol.Wakeup{Namespace: tns, Queue: "elsewhere", AvailableAt: time.Now()})
	e.waitStats("the other queue's wakeup", func(s Stats) bool { return s.WakeupsSeen == 1 })
	if !e.remembersEmpty(ttype) {
		t.Fatal("another queue's wakeup made this one forget")
	}
	w.request(1)
	st := e.waitStats("the renewal answered from memory", func(s Stats) bool { return s.EmptySkips == 1 })
	if st.Claims != 2 {
		t.Fatalf("%d claims, want 2: another queue's wakeup made this one query", st.Claims)
	}
}

// A run due later arms the queue's timer: the parked request is served
// when it is due, with no wakeup, and not before.
// A dispatcher answers in the encoding of the question, so a worker that
// reads JSON only (an older version) is never sent binary: a delivery in
// its work request's, a report reply in its report's. Its beacons say it
// reads binary.
func TestAnswersInTheQuestionsEncoding(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	beacon := e.probe()
	if h := beacon.Header.Get(protocol.HeaderEncodings); h != protocol.EncodingsBinary {
		t.Fatalf("beacon header %s: %q", protocol.HeaderEncodings, h)
	}
	for _, enc := range []protocol.Encoding{protocol.JSON, protocol.Binary} {
		w := e.worker(accept)
		w.enc = enc
		id := e.run(nil, `{"a":1}`)
		w.request(1)
		got := w.next()
		if ids := runIDs(got.d); len(ids) != 1 || ids[0] != id || got.enc != enc {
			t.Fatalf("encoding %d: delivered %v in encoding %d", enc, ids, got.enc)
		}
		r := got.d.Runs[0]
		report, err := protocol.EncodeAs(&protocol.Report{WorkerID: w.id, Namespace: tns, Items: []protocol.ReportItem{
			{Kind: protocol.ReportRunCompleted, RunID: r.RunID, LeaseToken: r.LeaseToken, Output: []byte(`2`)}}}, enc)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := e.nc.Request(protocol.SubjectReport(tns), report, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var reply protocol.ReportReply
		if err := protocol.Decode(msg.Data, &reply); err != nil || protocol.EncodingOf(msg.Data) != enc ||
			len(reply.Results) != 1 || reply.Results[0].Code != protocol.ResultOK {
			t.Fatalf("encoding %d: reply %+v in encoding %d, %v", enc, reply, protocol.EncodingOf(msg.Data), err)
		}
	}
}

// probe asks the dispatchers for a beacon. Start returns once the server
// knows the dispatcher takes work; its probe subscription follows on the
// same connection, which the server may not have read yet when the
// test's connection asks: no responders then is asked again.
func (e *env) probe() *nats.Msg {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		beacon, err := e.nc.Request(protocol.SubjectDispatcherProbe, mustEncode(e.t, &protocol.DispatcherProbe{WorkerID: uuid.New()}), 10*time.Second)
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return beacon
	}
}

func mustEncode(t *testing.T, m protocol.Message) []byte {
	t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestTimerServesARunWhenDue(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	w := e.worker(accept)
	due := time.Now().Add(700 * time.Millisecond)
	id := e.run(&due, `{}`)
	w.request(1)
	got := w.next()
	if ids := runIDs(got.d); len(ids) != 1 || ids[0] != id {
		t.Fatalf("delivered %v, want [%s]", ids, id)
	}
	if got.at.Before(due) {
		t.Fatalf("delivered %v before the run was due", due.Sub(got.at))
	}
	st := e.waitStats("the delivery acked", func(s Stats) bool { return s.Deliveries == 1 })
	if st.WakeupsSeen != 0 {
		t.Fatalf("%d wakeups seen, want 0: the timer alone served the run", st.WakeupsSeen)
	}
}

// A delivery the worker refuses, or does not answer, is released at once:
// the run is claimable again, with no attempt counted, and the next
// request gets it.
func TestUnacceptedDeliveryIsReleased(t *testing.T) {
	for _, mode := range []ackMode{refuse, silent} {
		t.Run(map[ackMode]string{refuse: "refused", silent: "unanswered"}[mode], func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.DeliveryTimeout = 300 * time.Millisecond }, testnats.MaxPayload)
			id := e.run(nil, `{}`)
			w := e.worker(mode)
			w.request(1)
			if ids := runIDs(w.next().d); len(ids) != 1 || ids[0] != id {
				t.Fatalf("delivered %v, want [%s]", ids, id)
			}
			e.waitStats("the run released", func(s Stats) bool { return s.Released == 1 })
			r, err := e.st.RunsGet(e.ctx, tns, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != store.StatusPending || r.LockedBy != nil {
				t.Fatalf("released run: status %s, locked by %v; want PENDING, nobody", r.Status, r.LockedBy)
			}
			taker := e.worker(accept)
			taker.request(1)
			if ids := runIDs(taker.next().d); len(ids) != 1 || ids[0] != id {
				t.Fatalf("redelivered %v, want [%s]", ids, id)
			}
			e.waitStats("the redelivery acked", func(s Stats) bool { return s.Deliveries == 1 })
		})
	}
}

// Claimed runs that do not fit one NATS message are split: what fits is
// delivered, the rest released at once, and the worker's next request
// gets them. Every run is delivered exactly once.
func TestDeliverySplitsWhatDoesNotFit(t *testing.T) {
	// Room for payloads of 32 KiB: 8 runs with inline inputs of 14 KiB
	// (under protocol.InlinePayloadBytes) do not fit one message, 6 do.
	const maxPayload = 96 << 10
	const runs = 8
	e := newEnv(t, nil, maxPayload)
	input := `"` + strings.Repeat("x", 14<<10) + `"`
	want := map[uuid.UUID]bool{}
	for i := 0; i < runs; i++ {
		want[e.run(nil, input)] = true
	}
	w := e.worker(accept)
	seen := map[uuid.UUID]int{}
	deliveries := 0
	for len(seen) < len(want) && deliveries < runs {
		w.request(runs)
		got := w.next()
		deliveries++
		if n := len(got.d.Runs); n == 0 || n > 6 {
			t.Fatalf("a delivery of %d runs within %d bytes", n, maxPayload)
		}
		for _, id := range runIDs(got.d) {
			if !want[id] {
				t.Fatalf("delivered unknown run %s", id)
			}
			seen[id]++
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("run %s delivered %d times, want once", id, seen[id])
		}
	}
	if deliveries < 2 {
		t.Fatalf("%d deliveries: nothing was split", deliveries)
	}
	st := e.waitStats("every delivery acked", func(s Stats) bool { return s.Deliveries == int64(deliveries) })
	if st.Released == 0 {
		t.Fatal("nothing released: the runs that did not fit stayed claimed")
	}
}

// Stop is safe before Start and twice, with requests parked; a stopped
// dispatcher does not start again.
func TestStopIsSafeTwice(t *testing.T) {
	e := newEnv(t, nil, testnats.MaxPayload)
	New(testConfig(t, nil), Deps{}, e.st, e.nc, nil).Stop()
	w := e.worker(accept)
	w.request(1)
	e.waitFor("the request parked", func() bool { return e.remembersEmpty(ttype) })
	e.d.Stop()
	e.d.Stop()
	if err := e.d.Start(e.ctx); err == nil {
		t.Fatal("a stopped dispatcher started again")
	}
}

// A dispatcher's beacons announce its lease, and the reaper's check
// against it refuses a longer reaper lease with an error naming both.
func TestBeaconAnnouncesTheLease(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Lease.Duration = 20 * time.Second }, testnats.MaxPayload)
	beacon := e.probe()
	lease, ok := protocol.ParseLease(beacon.Header.Get(protocol.HeaderLease))
	if !ok || lease != 20*time.Second {
		t.Fatalf("beacon header %s: %q", protocol.HeaderLease, beacon.Header.Get(protocol.HeaderLease))
	}
	id := e.d.ID().String()
	if err := (config.Lease{Duration: 20 * time.Second}).Check(lease, id); err != nil {
		t.Fatalf("an equal lease: %v", err)
	}
	err := (config.Lease{Duration: 30 * time.Second}).Check(lease, id)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "KAGZI_LEASE 30s") {
		t.Fatalf("a longer reaper lease: %v", err)
	}
}
