package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/internal/natsutil"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Deps are what a Dispatcher is given besides its Config: its neighbours
// in this process and its telemetry. Zero fields mean none (the otel
// globals for the providers).
type Deps struct {
	// RelayID, if set, returns the id of the relay this process runs while
	// it relays ("" otherwise); beacons carry it (see beacon.go).
	RelayID func() string
	// Published, if set, is shared with the relay of this process (on the
	// same NATS connection): the run ends the dispatcher announces are not
	// relayed a second time.
	Published *Published
	// PendingLimit, if positive, replaces pendingLimit (tests of NATS
	// dropping messages; see drops.go).
	PendingLimit int
	// TracerProvider and MeterProvider default to the otel globals.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// reportBatch caps the report items applied in one transaction.
const reportBatch = 512

// pendingLimit is how many messages a subscription may hold unread
// before NATS drops the next ones (see drops.go).
const pendingLimit = 1 << 20

// Stats are the dispatcher's counters.
type Stats struct {
	Malformed   int64 // messages dropped as malformed
	Claims      int64 // claim statements issued
	Claimed     int64 // runs claimed
	Released    int64 // runs released after a failed delivery
	Reports     int64 // report items applied
	LeaseLost   int64 // report items refused for a stale lease
	Parked      int64 // requests parked now
	EmptySkips  int64 // requests answered from the empty-queue memory, no query
	Resyncs     int64 // backlog reads
	ReportTxs   int64 // report transactions committed
	Deliveries  int64 // deliveries acked by workers
	WakeupsSeen int64 // wakeups received
	Drops       int64 // times NATS dropped messages before they were read (see drops.go)
	// PayloadReads counts parts of payloads served to workers.
	PayloadReads int64
	// RunsRefused counts runs failed because the store refused one of
	// their reports for good (a payload over the limit, a conflicting
	// result).
	RunsRefused int64
	// Reruns counts run ends refused because events the execution had not
	// seen arrived during it: the runs execute again (store.ErrEventsArrived).
	Reruns int64
	// Overtaken counts work requests dropped because a newer one of the
	// same worker process was parked first (see onWorkRequest).
	Overtaken int64
}

type qkey struct{ ns, queue string }

// Bounds of the backoff before claiming again for due runs no claim took.
const (
	minRecheck = 100 * time.Millisecond
	maxRecheck = 30 * time.Second
)

// queue is the dispatcher's state for one namespace/queue, guarded by
// Dispatcher.mu except signal (a channel) and the timer's own goroutine.
type queue struct {
	key    qkey
	parked []*parked
	// gen counts wakeups; empty[sig] == gen means a claim for that type set
	// found nothing and nothing woke the queue since.
	gen    uint64
	empty  map[string]uint64
	signal chan struct{}
	timer  *time.Timer
	// timerAt is when the timer fires (zero: not armed).
	timerAt time.Time
	// recheck is the current backoff before claiming again for runs that
	// were due but that no claim took (see serve).
	recheck time.Duration
	// nextDue: a read of the next due time runs (readNextDue);
	// nextDueAgain: another was asked for meanwhile.
	nextDue, nextDueAgain bool
	// woke is the last wakeup's hops (only with KAGZI_HOPS_DIR).
	woke wakeHops
}

// wakeHops are a wakeup's stamps, in unix nanoseconds: when the relay
// received its NOTIFY and published it, and when it arrived here.
type wakeHops struct{ notified, relayed, woken int64 }

type parked struct {
	req   protocol.WorkRequest
	reply string
	// enc is the request's encoding, which its delivery takes: a worker
	// reads what it writes.
	enc     protocol.Encoding
	expires time.Time
	sig     string
	types   []store.TypeVersion
}

// Dispatcher is the lease service.
type Dispatcher struct {
	cfg  Config
	deps Deps
	// hops is cfg's recorder, if Run opened one (KAGZI_HOPS_DIR): it
	// records when each claimed run's wakeup arrived, its claim ran and
	// its delivery was published.
	hops *hops.Recorder
	st   *store.Store
	nc   *nats.Conn
	log  *slog.Logger

	// announced: the dispatcher takes work requests and beacons (from
	// its first beacon to its last).
	announced atomic.Bool

	mu     sync.Mutex
	queues map[qkey]*queue
	// local are the wakeups the relay of this process handed over
	// directly whose copy from NATS has not arrived yet, oldest first
	// (see wakeLocal); guarded by mu.
	local []localWakeup

	reports chan *reportJob
	tel     *instruments

	// ctx is the running dispatcher's (life.Begin), read by its handlers.
	ctx     context.Context
	life    lifecycle.Base
	subs    []*nats.Subscription
	beacons beacons
	drops   *natsutil.Drops

	malformed                                           *natsutil.Malformed
	claims, claimed, released, applied, leaseLost       atomic.Int64
	emptySkips, resyncs, reportTxs, deliveries, wakeups atomic.Int64
	// backlogReads counts Resync's reads in flight: what they find wakes
	// queues after the Resync itself, which a test must wait out.
	backlogReads                      atomic.Int32
	payloadReads, runsRefused, reruns atomic.Int64
	overtaken                         atomic.Int64
}

// New returns a dispatcher over st and nc, configured by cfg (as
// config.Load or config.Defaults return it: New does not check it again);
// Start runs it.
func New(cfg Config, deps Deps, st *store.Store, nc *nats.Conn, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.PendingLimit <= 0 {
		deps.PendingLimit = pendingLimit
	}
	return &Dispatcher{
		cfg:     cfg,
		deps:    deps,
		hops:    cfg.hops,
		st:      st,
		nc:      nc,
		log:     log.With("component", "dispatcher"),
		queues:  map[qkey]*queue{},
		reports: make(chan *reportJob, 8192),
		tel:     newInstruments(deps.TracerProvider, deps.MeterProvider),
		drops:   natsutil.WatchDrops(nc),
		// Errors: a malformed request or report is a peer's bug.
		malformed: natsutil.NewMalformed("dispatcher", log, slog.LevelError, deps.MeterProvider),
	}
}

// ID is the dispatcher's id, drawn at Start: its beacons carry it, and
// workers address messages to it on protocol.SubjectDirect with it.
func (d *Dispatcher) ID() uuid.UUID { return d.beacons.id }

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	var parkedN int64
	for _, q := range d.queues {
		parkedN += int64(len(q.parked))
	}
	d.mu.Unlock()
	return Stats{
		Malformed: d.malformed.Count(), Claims: d.claims.Load(), Claimed: d.claimed.Load(),
		Released: d.released.Load(), Reports: d.applied.Load(), LeaseLost: d.leaseLost.Load(),
		Parked: parkedN, EmptySkips: d.emptySkips.Load(), Resyncs: d.resyncs.Load(),
		ReportTxs: d.reportTxs.Load(), Deliveries: d.deliveries.Load(), WakeupsSeen: d.wakeups.Load(),
		PayloadReads: d.payloadReads.Load(), RunsRefused: d.runsRefused.Load(), Drops: d.drops.Count(),
		Reruns: d.reruns.Load(), Overtaken: d.overtaken.Load(),
	}
}

// Start subscribes (first) and then reads the backlog (second), so no
// wakeup falls between the two.
func (d *Dispatcher) Start(ctx context.Context) error {
	ctx, err := d.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	d.ctx = ctx
	// The id comes first: the subscription to messages addressed to this
	// dispatcher names it.
	d.beacons.id = uuid.New()
	subs := []struct {
		subject, group string
		h              nats.MsgHandler
	}{
		{protocol.SubjectReadyAll, "", d.onWakeup},
		{protocol.SubjectRelayUp, "", d.onRelayUp},
		{protocol.SubjectWorkAll, protocol.QueueDispatchers, d.onWorkRequest},
		{protocol.SubjectReportAll, protocol.QueueDispatchers, d.onReport},
		{protocol.SubjectPayloadAll, protocol.QueueDispatchers, d.onPayloadRequest},
		{protocol.SubjectDirectTo(d.beacons.id), "", d.onDirect},
	}
	for _, s := range subs {
		var sub *nats.Subscription
		var err error
		if s.group == "" {
			sub, err = d.nc.Subscribe(s.subject, s.h)
		} else {
			sub, err = d.nc.QueueSubscribe(s.subject, s.group, s.h)
		}
		if err != nil {
			d.unsubscribe()
			d.life.Stop(nil)
			return fmt.Errorf("dispatcher: subscribe %s: %w", s.subject, err)
		}
		_ = sub.SetPendingLimits(d.deps.PendingLimit, 1<<30)
		d.watchDrops(s.subject, sub)
		d.subs = append(d.subs, sub)
	}
	if err := d.nc.Flush(); err != nil {
		d.unsubscribe()
		d.life.Stop(nil)
		return fmt.Errorf("dispatcher: flush subscriptions: %w", err)
	}
	// Known to the server as a taker of work requests: now say so (see
	// beacon.go, "Order at start").
	if err := d.announce(); err != nil {
		d.unsubscribe()
		d.life.Stop(nil)
		return err
	}
	d.checkPayloadLimits()
	if err := registerQueueDepth(d.deps.MeterProvider, d.st, func() context.Context { return d.ctx }); err != nil {
		d.log.Warn("queue depth metric", "err", err)
	}
	for i := 0; i < d.cfg.ReportWriters; i++ {
		d.life.Go(d.reportWriter)
	}
	d.startBeacons()
	d.announced.Store(true)
	d.Resync()
	return nil
}

// Reconnected is what the dispatcher does each time its NATS connection
// is back: it reads the backlog (Resync), and asks every worker to renew
// the work request it holds here. While the connection was down, or
// still open to a server that had stopped answering (frozen, or cut off
// from its cluster), what the workers sent here went to a subscription
// that no longer reached the dispatcher and was lost; the workers still
// hear its beacons, so nothing else would tell them, and a request lost
// so would wait for its renewal time (30 s by default) while runs are
// due. A worker renews only a request held here or left to the queue
// group, which costs a live one a round trip.
func (d *Dispatcher) Reconnected() {
	d.Resync()
	if d.announced.Load() {
		d.beacon("", false, true)
	}
}

// Stop unsubscribes, tells workers it left (so they renew the requests it
// held), stops the queue loops and report writers after the reports
// already received are applied, and waits; safe to call twice.
func (d *Dispatcher) Stop() {
	d.life.Stop(func() {
		d.announced.Store(false)
		d.stopBeacons()
		d.unsubscribe()
		d.leave()
	})
}

// onDirect takes a message addressed to this dispatcher (see
// protocol.SubjectDirect) as the one its queue group would have been
// given: the handlers check the subject against the message's namespace
// and queue, which the worker's NATS permissions vouch for in both forms.
func (d *Dispatcher) onDirect(m *nats.Msg) {
	group, _, ok := protocol.Undirect(m.Subject)
	if !ok {
		d.dropMalformed(m, fmt.Errorf("subject %q is not addressed to a dispatcher", m.Subject))
		return
	}
	m.Subject = group
	switch {
	case strings.HasPrefix(group, protocol.Prefix+"work."):
		d.onWorkRequest(m)
	case strings.HasPrefix(group, protocol.Prefix+"report."):
		d.onReport(m)
	case strings.HasPrefix(group, protocol.Prefix+"payload."):
		d.onPayloadRequest(m)
	default:
		d.dropMalformed(m, fmt.Errorf("subject %q: nothing is addressed to a dispatcher there", group))
	}
}

func (d *Dispatcher) unsubscribe() {
	for _, s := range d.subs {
		_ = s.Drain()
	}
}

// Resync forgets which queues are known empty and reads the backlog of due
// runs from Postgres: on start, on NATS reconnect and whenever a relay
// (re)starts, since wakeups may have been lost in between.
func (d *Dispatcher) Resync() {
	d.resyncs.Add(1)
	d.mu.Lock()
	for _, q := range d.queues {
		q.gen++
		d.signal(q)
	}
	d.mu.Unlock()
	d.backlogReads.Add(1)
	if !d.life.Go(func() {
		defer d.backlogReads.Add(-1)
		due, err := d.st.RunsQueuesDue(d.ctx)
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Error("read backlog", "err", err)
			}
			return
		}
		for _, qd := range due {
			d.wake(qkey{qd.Namespace, qd.Queue}, qd.DueAt)
		}
	}) {
		d.backlogReads.Add(-1)
	}
}

func (d *Dispatcher) onRelayUp(m *nats.Msg) {
	var r protocol.RelayUp
	if err := protocol.Decode(m.Data, &r); err != nil {
		d.dropMalformed(m, err)
		return
	}
	d.Resync()
}

func (d *Dispatcher) dropMalformed(m *nats.Msg, err error) {
	d.malformed.Drop(d.ctx, m.Subject, err)
}

func typeSig(tvs []protocol.TypeVersion) (string, []store.TypeVersion) {
	out := make([]store.TypeVersion, len(tvs))
	parts := make([]string, len(tvs))
	for i, tv := range tvs {
		out[i] = store.TypeVersion{Type: tv.Type, Version: tv.Version}
		parts[i] = tv.Type + "@" + tv.Version
	}
	sort.Strings(parts)
	return strings.Join(parts, ","), out
}

func (d *Dispatcher) onWorkRequest(m *nats.Msg) {
	var req protocol.WorkRequest
	if err := protocol.Decode(m.Data, &req); err != nil {
		d.dropMalformed(m, err)
		return
	}
	if m.Reply == "" {
		d.dropMalformed(m, errors.New("work request without a reply subject"))
		return
	}
	if ns, q, err := protocol.ParseWork(m.Subject); err != nil || ns != req.Namespace || q != req.Queue {
		d.dropMalformed(m, fmt.Errorf("subject %q does not match request %s/%s", m.Subject, req.Namespace, req.Queue))
		return
	}
	sig, types := typeSig(req.Types)
	p := &parked{req: req, reply: m.Reply, enc: protocol.EncodingOf(m.Data), sig: sig, types: types,
		expires: time.Now().Add(time.Duration(req.WaitMS) * time.Millisecond)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	q := d.queueLocked(qkey{req.Namespace, req.Queue})
	// A worker has one request outstanding: a newer one replaces the old.
	// Newer is by its sequence number, not by arrival: a worker that
	// reconnects sends one request to the queue group and the next
	// addressed here, and the two subscriptions hand their messages over
	// in either order. An older request from the same worker process (the
	// same reply inbox) is dropped; one from another process of the same
	// id (restarted, its numbering begun again) replaces it.
	for i, old := range q.parked {
		if old.req.WorkerID == req.WorkerID {
			if old.reply == p.reply && old.req.Seq > req.Seq {
				d.overtaken.Add(1)
				return
			}
			q.parked = append(q.parked[:i], q.parked[i+1:]...)
			break
		}
	}
	q.parked = append(q.parked, p)
	if q.empty[sig] == q.gen {
		d.emptySkips.Add(1)
		return
	}
	d.signal(q)
}
