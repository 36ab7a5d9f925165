package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
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
	"github.com/kagzi/kagzi/internal/tracectx"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Options tunes a Dispatcher. Zero fields take the defaults.
type Options struct {
	// Lease is how long a claim holds without heartbeats (default 30 s).
	Lease time.Duration
	// DeliveryTimeout bounds the wait for a worker's ack of a delivery
	// (default 5 s); unacked runs are released at once.
	DeliveryTimeout time.Duration
	// MaxClaim caps the runs one claim takes (default 256).
	MaxClaim int
	// ReportBatch caps the report items applied in one transaction
	// (default 512).
	ReportBatch int
	// ReportWriters is the number of transactions applying reports at once
	// (default 4).
	ReportWriters int
	// BeaconInterval is the time between liveness beacons (default
	// protocol.DefaultBeaconInterval; see beacon.go).
	BeaconInterval time.Duration
	// RelayID, if set, returns the id of the relay this process runs while
	// it relays ("" otherwise); beacons carry it (see beacon.go).
	RelayID func() string
	// Published, if set, is shared with the relay of this process (on the
	// same NATS connection): the run ends the dispatcher announces are not
	// relayed a second time.
	Published *Published
	// PendingLimit is how many messages a subscription may hold unread
	// before NATS drops the next ones (default 1<<20; see drops.go).
	PendingLimit int
	// Hops, if set, records when each claimed run's wakeup arrived, its
	// claim ran and its delivery was published (the dispatch-hop
	// diagnostic, KAGZI_HOPS_DIR).
	Hops *hops.Recorder
	// TracerProvider and MeterProvider default to the otel globals.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

func (c Options) withDefaults() Options {
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = 5 * time.Second
	}
	if c.MaxClaim <= 0 {
		c.MaxClaim = 256
	}
	if c.ReportBatch <= 0 {
		c.ReportBatch = 512
	}
	if c.ReportWriters <= 0 {
		c.ReportWriters = 4
	}
	if c.BeaconInterval <= 0 {
		c.BeaconInterval = protocol.DefaultBeaconInterval
	}
	if c.PendingLimit <= 0 {
		c.PendingLimit = 1 << 20
	}
	return c
}

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
	// woke is the last wakeup's hops (only with Options.Hops).
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
	cfg Options
	st  *store.Store
	nc  *nats.Conn
	log *slog.Logger

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
	payloadReads, runsRefused, reruns                   atomic.Int64
}

// New returns a dispatcher over st and nc; Start runs it.
func New(cfg Options, st *store.Store, nc *nats.Conn, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{
		cfg:     cfg.withDefaults(),
		st:      st,
		nc:      nc,
		log:     log.With("component", "dispatcher"),
		queues:  map[qkey]*queue{},
		reports: make(chan *reportJob, 8192),
		tel:     newInstruments(cfg.TracerProvider, cfg.MeterProvider),
		drops:   natsutil.WatchDrops(nc),
		// Errors: a malformed request or report is a peer's bug.
		malformed: natsutil.NewMalformed("dispatcher", log, slog.LevelError, cfg.MeterProvider),
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
		Reruns: d.reruns.Load(),
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
		_ = sub.SetPendingLimits(d.cfg.PendingLimit, 1<<30)
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
	if err := registerQueueDepth(d.cfg.MeterProvider, d.st, func() context.Context { return d.ctx }); err != nil {
		d.log.Warn("queue depth metric", "err", err)
	}
	for i := 0; i < d.cfg.ReportWriters; i++ {
		d.life.Go(d.reportWriter)
	}
	d.startBeacons()
	d.Resync()
	return nil
}

// Stop unsubscribes, tells workers it left (so they renew the requests it
// held), stops the queue loops and report writers after the reports
// already received are applied, and waits; safe to call twice.
func (d *Dispatcher) Stop() {
	d.life.Stop(func() {
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
	d.life.Go(func() {
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
	})
}

// queueLocked returns the state for key, creating it (and its loop).
func (d *Dispatcher) queueLocked(key qkey) *queue {
	q := d.queues[key]
	if q != nil {
		return q
	}
	q = &queue{key: key, gen: 1, empty: map[string]uint64{}, signal: make(chan struct{}, 1)}
	q.timer = time.AfterFunc(time.Hour, func() { d.onTimer(q) })
	q.timer.Stop()
	d.queues[key] = q
	d.life.Go(func() { d.queueLoop(q) })
	return q
}

func (d *Dispatcher) signal(q *queue) {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// wake records that runs of key are due at at.
func (d *Dispatcher) wake(key qkey, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	q := d.queueLocked(key)
	if !at.After(time.Now()) {
		q.gen++
		d.signal(q)
		return
	}
	d.armLocked(q, at)
}

// armLocked arms q's timer for at unless it already fires earlier.
func (d *Dispatcher) armLocked(q *queue, at time.Time) {
	if !q.timerAt.IsZero() && !q.timerAt.After(at) {
		return
	}
	q.timerAt = at
	q.timer.Reset(time.Until(at))
}

func (d *Dispatcher) onTimer(q *queue) {
	d.mu.Lock()
	q.timerAt = time.Time{}
	q.gen++
	d.signal(q)
	d.mu.Unlock()
}

func (d *Dispatcher) onWakeup(m *nats.Msg) {
	woken := d.cfg.Hops.Now()
	var w protocol.Wakeup
	if err := protocol.Decode(m.Data, &w); err != nil {
		d.dropMalformed(m, err)
		return
	}
	d.wakeups.Add(1)
	if d.handedOver(&w) {
		return
	}
	d.onWakeupAt(&w, woken)
}

func (d *Dispatcher) onWakeupAt(w *protocol.Wakeup, woken int64) {
	if woken != 0 {
		d.mu.Lock()
		if d.ctx.Err() == nil {
			d.queueLocked(qkey{w.Namespace, w.Queue}).woke = wakeHops{w.NotifiedNS, w.RelayedNS, woken}
		}
		d.mu.Unlock()
	}
	d.wake(qkey{w.Namespace, w.Queue}, w.AvailableAt)
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
	for i, old := range q.parked {
		if old.req.WorkerID == req.WorkerID {
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

func (d *Dispatcher) queueLoop(q *queue) {
	defer q.timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-q.signal:
		}
		d.serve(q)
	}
}

// next picks the first parked request that might find work, dropping
// expired ones. Called with d.mu held.
func (d *Dispatcher) nextLocked(q *queue, skip map[string]bool) *parked {
	now := time.Now()
	kept := q.parked[:0]
	var pick *parked
	for _, p := range q.parked {
		if now.After(p.expires) {
			continue
		}
		kept = append(kept, p)
		if pick == nil && !skip[p.sig] && q.empty[p.sig] != q.gen {
			pick = p
		}
	}
	for i := len(kept); i < len(q.parked); i++ {
		q.parked[i] = nil
	}
	q.parked = kept
	return pick
}

func (d *Dispatcher) removeLocked(q *queue, p *parked) {
	for i, x := range q.parked {
		if x == p {
			q.parked = append(q.parked[:i], q.parked[i+1:]...)
			return
		}
	}
}

// serve claims for the parked requests of q until none can be served.
func (d *Dispatcher) serve(q *queue) {
	skip := map[string]bool{}
	for d.ctx.Err() == nil {
		d.mu.Lock()
		p := d.nextLocked(q, skip)
		gen := q.gen
		woke := q.woke
		d.mu.Unlock()
		if p == nil {
			return
		}
		limit := min(p.req.Credits, d.cfg.MaxClaim)
		d.claims.Add(1)
		claimStart := time.Now()
		claiming := d.cfg.Hops.Now()
		runs, flow, err := d.st.RunsClaimStats(d.ctx, store.RunsClaimParams{
			Namespace: q.key.ns, Queue: q.key.queue, WorkerID: p.req.WorkerID,
			Types: p.types, Limit: limit, Lease: d.cfg.Lease, InlineBytes: protocol.InlinePayloadBytes,
		})
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.log.Error("claim failed", "ns", q.key.ns, "queue", q.key.queue, "err", err)
			// Try again shortly rather than spin on a failing database.
			d.mu.Lock()
			d.armLocked(q, time.Now().Add(time.Second))
			d.mu.Unlock()
			return
		}
		if claiming != 0 {
			d.markClaimed(runs, woke, claiming)
		}
		now := time.Now()
		if len(runs) > 0 {
			// The delivery before the telemetry and the next-due read,
			// which nothing waits for.
			d.mu.Lock()
			d.removeLocked(q, p)
			q.recheck = 0
			d.mu.Unlock()
			d.publishClaimed(q.key.ns, runs)
			if !d.life.Go(func() { d.deliver(p, runs) }) {
				// Stopping: the runs go back now, not at lease expiry.
				d.release(runs)
			}
			// Let the delivery run now: it is the goroutine made runnable
			// last (after NATS's flusher), so it takes this processor.
			runtime.Gosched()
		}
		d.claimed.Add(int64(len(runs)))
		d.tel.flow(d.ctx, q.key.ns, q.key.queue, flow)
		d.tel.claimed(d.ctx, q.key.ns, q.key.queue, runs, p.req.WorkerID.String(), claimStart, now)
		for _, r := range runs {
			d.tel.dispatch.Record(d.ctx, float64(now.Sub(r.DueAt))/float64(time.Millisecond), d.tel.queue(r.Namespace, r.Queue))
		}
		if len(runs) < limit {
			// Nothing more is due for this type set: remember it, so renewed
			// requests park without a query, and arm the timer for the
			// earliest future run.
			d.mu.Lock()
			if q.gen == gen {
				q.empty[p.sig] = gen
			}
			d.mu.Unlock()
			skip[p.sig] = true
			d.readNextDue(q)
		}
	}
}

// readNextDue reads when q's next run is due and arms its timer, beside
// the claim loop rather than in it, so that the next wakeup's claim does
// not wait for the read. One read runs per queue at a time; one asked for
// meanwhile runs after it.
func (d *Dispatcher) readNextDue(q *queue) {
	d.mu.Lock()
	if q.nextDue {
		q.nextDueAgain = true
		d.mu.Unlock()
		return
	}
	q.nextDue = true
	d.mu.Unlock()
	if !d.life.Go(func() { d.nextDueLoop(q) }) {
		d.mu.Lock()
		q.nextDue = false
		d.mu.Unlock()
	}
}

func (d *Dispatcher) nextDueLoop(q *queue) {
	for {
		next, pastDue, err := d.st.RunsNextDue(d.ctx, q.key.ns, q.key.queue)
		d.mu.Lock()
		if err == nil {
			if next != nil {
				d.armLocked(q, *next)
			}
			if pastDue {
				// Runs are due that the claim left: of other type sets
				// (claimed when such a worker asks), of a type at its
				// concurrency limit (woken when one of its runs stops
				// running), or held by another transaction for a moment.
				// Look again later, backing off, rather than at once: a run
				// of a type no worker serves must not make the dispatcher
				// spin.
				q.recheck = min(max(2*q.recheck, minRecheck), maxRecheck)
				d.armLocked(q, time.Now().Add(q.recheck))
			}
		}
		again := err == nil && q.nextDueAgain
		q.nextDueAgain = false
		if !again {
			q.nextDue = false
		}
		d.mu.Unlock()
		if err != nil && d.ctx.Err() == nil {
			d.log.Error("next due", "err", err)
		}
		if !again {
			return
		}
	}
}

// deliver hands claimed runs to the worker and releases them at once if it
// does not take them.
func (d *Dispatcher) deliver(p *parked, runs []store.ClaimedRun) {
	limits, err := d.payloadLimits()
	if err != nil {
		d.log.Error("read payload limits; releasing", "err", err)
		d.release(runs)
		d.repark(p)
		return
	}
	msg := protocol.Delivery{WorkerID: p.req.WorkerID, Seq: p.req.Seq, Runs: make([]protocol.DeliveredRun, len(runs)), Limits: limits}
	spans := make([]trace.Span, len(runs))
	for i := range runs {
		msg.Runs[i] = deliveredRun(&runs[i])
		// The attempt the delivery starts is a child of its dispatch span.
		if tp := d.tel.startDispatch(d.ctx, &runs[i], p.req.WorkerID.String(), &spans[i]); tp != "" {
			msg.Runs[i].TraceParent = tp
		}
	}
	data, release, err := d.fit(&msg, p.enc, &runs)
	d.tel.endDispatch(spans[len(runs):], errReleased)
	spans = spans[:len(runs)]
	d.release(release)
	if err != nil {
		d.log.Error("delivery does not encode; releasing", "err", err)
		d.tel.endDispatch(spans, err)
		d.release(runs)
		d.repark(p)
		return
	}
	if data == nil {
		// The one run left cannot be delivered at all; fit failed it.
		d.tel.endDispatch(spans, errUndeliverable)
		d.repark(p)
		return
	}
	// A delivery of one run carries its dispatch span as the W3C header
	// too; several runs are several traces, each in its DeliveredRun.
	hctx := d.ctx
	if len(spans) == 1 && spans[0] != nil {
		hctx = trace.ContextWithSpan(hctx, spans[0])
	}
	if d.cfg.Hops != nil {
		now := d.cfg.Hops.Now()
		for i := range runs {
			d.cfg.Hops.Mark(runs[i].ID, hops.Delivered, now)
		}
	}
	reply, err := d.nc.RequestMsg(tracectx.Msg(hctx, p.reply, data), d.cfg.DeliveryTimeout)
	d.tel.endDispatch(spans, err)
	if err != nil {
		d.log.Warn("delivery not acknowledged; releasing", "worker_id", p.req.WorkerID, "runs", len(runs), "err", err)
		d.release(runs)
		return
	}
	var ack protocol.DeliveryAck
	if err := protocol.Decode(reply.Data, &ack); err != nil {
		d.dropMalformed(reply, err)
		d.release(runs)
		return
	}
	if !ack.Accepted {
		d.release(runs)
		return
	}
	d.deliveries.Add(1)
}

// fit encodes msg within the NATS server's message size: runs that do not
// fit are left out (halving) and returned to be released; a single run
// whose inline payloads do not fit is sent with all of them by size (the
// worker fetches them); a single run whose history does not fit even so is
// failed with a clear error, and fit returns no data. msg.Runs and *runs
// are cut to what is sent.
func (d *Dispatcher) fit(msg *protocol.Delivery, enc protocol.Encoding, runs *[]store.ClaimedRun) (data []byte, release []store.ClaimedRun, err error) {
	limit := d.nc.MaxPayload()
	data, err = protocol.EncodeAs(msg, enc)
	for err == nil && int64(len(data)) > limit && len(msg.Runs) > 1 {
		half := len(msg.Runs) / 2
		release = append(release, (*runs)[half:]...)
		*runs, msg.Runs = (*runs)[:half], msg.Runs[:half]
		data, err = protocol.EncodeAs(msg, enc)
	}
	if err != nil || int64(len(data)) <= limit {
		return data, release, err
	}
	byReference(&msg.Runs[0])
	if data, err = protocol.EncodeAs(msg, enc); err != nil || int64(len(data)) <= limit {
		return data, release, err
	}
	c := &(*runs)[0]
	d.failRun(store.Lease{Namespace: c.Namespace, RunID: c.ID, Token: c.LeaseToken}, c.Type,
		fmt.Sprintf("the run's history cannot be delivered: its %d step records take %d bytes without any payload, "+
			"more than the NATS server's max_payload of %d bytes", len(c.Steps), len(data), limit))
	*runs = nil
	return nil, release, nil
}

// byReference leaves every payload of r out of the delivery, sending its
// size instead.
func byReference(r *protocol.DeliveredRun) {
	if len(r.Input) > 0 {
		r.InputSize, r.Input = len(r.Input), nil
	}
	for i := range r.Steps {
		if s := &r.Steps[i]; len(s.Output) > 0 {
			s.OutputSize, s.Output = len(s.Output), nil
		}
	}
}

// payloadLimits are the limits workers are told: the database's, within
// what one NATS message of this server can carry around one payload.
func (d *Dispatcher) payloadLimits() (protocol.PayloadLimits, error) {
	set, err := d.st.Limits(d.ctx)
	if err != nil {
		return protocol.PayloadLimits{}, err
	}
	max := min(set.PayloadMaxBytes, protocol.MessagePayloadLimit(d.nc.MaxPayload()))
	return protocol.PayloadLimits{MaxBytes: max, WarnBytes: min(set.PayloadWarnBytes, max)}, nil
}

// checkPayloadLimits warns when the NATS server cannot carry payloads as
// large as the database allows: workers are then told the smaller limit.
func (d *Dispatcher) checkPayloadLimits() {
	set, err := d.st.Limits(d.ctx)
	if err != nil {
		d.log.Warn("read payload limits", "err", err)
		return
	}
	if fit := protocol.MessagePayloadLimit(d.nc.MaxPayload()); fit < set.PayloadMaxBytes {
		d.log.Warn("NATS max_payload is smaller than the payload limit: outputs reported by workers are limited to what fits",
			"nats_max_payload", d.nc.MaxPayload(), "payload_max_bytes", set.PayloadMaxBytes, "reportable_bytes", fit)
	}
}

// repark puts back a request whose delivery failed before it reached the
// worker, so the worker is not left waiting for its request to time out.
func (d *Dispatcher) repark(p *parked) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil || time.Now().After(p.expires) {
		return
	}
	q := d.queueLocked(qkey{p.req.Namespace, p.req.Queue})
	for _, x := range q.parked {
		if x.req.WorkerID == p.req.WorkerID {
			return // superseded by a newer request
		}
	}
	q.parked = append(q.parked, p)
	d.signal(q)
}

// failRun ends a run for good with reason, under its lease, and announces
// it.
func (d *Dispatcher) failRun(l store.Lease, typ, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	if err := d.st.RunsFail(ctx, l, reason); err != nil {
		d.log.Error("fail run", "run_id", l.RunID, "reason", reason, "err", err)
		return
	}
	d.log.Warn("run failed by the dispatcher", "run_id", l.RunID, "reason", reason)
	d.tel.finished(d.ctx, l.Namespace, typ, string(store.StatusFailed))
	if data, err := protocol.Encode(&protocol.RunFinished{Namespace: l.Namespace, RunID: l.RunID, Status: string(store.StatusFailed)}); err == nil {
		_ = d.nc.Publish(protocol.SubjectDone(l.Namespace, l.RunID), data)
	}
}

func (d *Dispatcher) release(runs []store.ClaimedRun) {
	if len(runs) == 0 {
		return
	}
	leases := make([]store.Lease, len(runs))
	for i, r := range runs {
		leases[i] = store.Lease{Namespace: r.Namespace, RunID: r.ID, Token: r.LeaseToken}
	}
	// The dispatcher's own context may be ending; the release must still
	// happen or the runs wait for their lease to expire.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	n, err := d.st.RunsReleaseMany(ctx, leases)
	if err != nil {
		d.log.Error("release undelivered runs", "runs", len(runs), "err", err)
		return
	}
	d.released.Add(n)
}

// markClaimed records the hops of claimed runs up to the claim's return;
// the wakeup's are the last one the queue received before the claim.
func (d *Dispatcher) markClaimed(runs []store.ClaimedRun, woke wakeHops, claiming int64) {
	claimed := d.cfg.Hops.Now()
	for i := range runs {
		id := runs[i].ID
		if woke.woken != 0 {
			if woke.notified != 0 {
				d.cfg.Hops.Mark(id, hops.Notified, woke.notified)
				d.cfg.Hops.Mark(id, hops.Relayed, woke.relayed)
			}
			d.cfg.Hops.Mark(id, hops.Woken, woke.woken)
		}
		d.cfg.Hops.Mark(id, hops.Claiming, claiming)
		d.cfg.Hops.Mark(id, hops.Claimed, claimed)
	}
}

// localWakeup is a wakeup handed over in process, awaiting its NATS copy.
type localWakeup struct {
	key qkey
	at  time.Time
}

// maxLocal bounds the wakeups remembered for want of their NATS copy (a
// publish that failed leaves one behind until a later copy passes it).
const maxLocal = 1024

// expectLocal remembers a wakeup the relay of this process is about to
// publish and hand over (wakeLocal); safe on nil. The same wakeup arrives
// from NATS too (other dispatchers and reapers need it): the relay
// publishes in order and NATS keeps one publisher's order, so its copy is
// the oldest one remembered here, and handedOver drops it rather than
// claim a second time for one start. It is remembered before the publish,
// so the copy cannot come first.
func (d *Dispatcher) expectLocal(w *protocol.Wakeup) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if len(d.local) == maxLocal {
		d.local = append(d.local[:0], d.local[1:]...)
	}
	d.local = append(d.local, localWakeup{qkey{w.Namespace, w.Queue}, w.AvailableAt})
	d.mu.Unlock()
}

// wakeLocal takes a wakeup from the relay of this process, after the
// relay published it: the queue loop it wakes is then the goroutine made
// runnable last, the one that runs when the relay waits again (not NATS's
// flusher). Safe on nil.
func (d *Dispatcher) wakeLocal(w *protocol.Wakeup) {
	if d == nil {
		return
	}
	d.onWakeupAt(w, d.cfg.Hops.Now())
}

// handedOver reports whether w is the NATS copy of a wakeup the relay of
// this process handed over already, forgetting it and any older one
// whose copy never came.
func (d *Dispatcher) handedOver(w *protocol.Wakeup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, l := range d.local {
		if l.key.ns == w.Namespace && l.key.queue == w.Queue && l.at.Equal(w.AvailableAt) {
			n := copy(d.local, d.local[i+1:])
			clear(d.local[n:])
			d.local = d.local[:n]
			return true
		}
	}
	return false
}
