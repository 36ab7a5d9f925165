package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// The hub turns the engine's NATS messages into browser updates. It keeps,
// per namespace a browser looked at, the status of every live run and the
// count of runs per status, moved by events rather than recounted: a
// RunsChanged or RunFinished names runs, a Wakeup says a queue has new or
// woken runs; at most once per coalescing interval the hub reads those
// rows (by primary key, or the newest few through the listing index),
// updates the counts and broadcasts one event per changed run. Nothing
// happens while nothing changes: no timer, no statement.

// liveLimit caps the live runs of a namespace whose status the hub keeps.
const liveLimit = 1_000_000

// ringSize is how many past events of a namespace a reconnecting browser
// can resume from (Last-Event-ID); older ones get a resync.
const ringSize = 4096

// clientBuffer is how many events a browser may fall behind before it gets
// a resync instead.
const clientBuffer = 256

// createdLag is how far back the search for new runs reaches behind its
// watermark: a transaction that commits late carries an earlier
// created_at than runs already seen.
const createdLag = 5 * time.Second

type event struct {
	seq  uint64
	name string
	data []byte
}

type sseClient struct {
	ch       chan event
	kick     chan struct{}
	overflow bool // guarded by hub.mu
}

// nsState is what the hub keeps for one namespace.
type nsState struct {
	ns         string
	loaded     chan struct{} // closed when the baseline is read
	err        error
	baselineAt time.Time
	counts     map[store.RunStatus]int64
	live       map[uuid.UUID]store.LiveRun
	// trends are the queues' last hour (trends.go).
	trends    map[string]*queueTrend
	recent    map[uuid.UUID]recentRun // runs seen finishing lately
	watermark store.Cursor

	pending map[uuid.UUID]struct{}
	newRuns bool
	armed   bool

	seq     uint64
	ring    []event
	clients map[*sseClient]struct{}
}

type recentRun struct {
	status store.RunStatus
	at     time.Time
}

type hub struct {
	st       *store.Store
	nc       *nats.Conn
	coalesce time.Duration

	mu   sync.Mutex
	ns   map[string]*nsState
	subs []*nats.Subscription
	// unlisten ends the reconnect listener (nil until started).
	unlisten func()
	// ctx is the started console's, nil before; spawn runs the hub's
	// background reads as the console's goroutines and reports false once
	// the console stops.
	ctx   context.Context
	spawn func(func()) bool
	// flushes counts the hub's reads of Postgres (tests check idleness).
	flushes int64
	// runs are the run pages' event streams of state and stream entries
	// (progress.go).
	runs runWaiters
}

func newHub(st *store.Store, nc *nats.Conn, coalesce time.Duration) *hub {
	return &hub{st: st, nc: nc, coalesce: coalesce, ns: map[string]*nsState{}}
}

func (h *hub) start(ctx context.Context, spawn func(func()) bool) error {
	h.mu.Lock()
	h.ctx, h.spawn = ctx, spawn
	h.mu.Unlock()
	if h.nc == nil {
		return nil
	}
	subjects := map[string]nats.MsgHandler{
		protocol.SubjectChangedAll:  h.onChanged,
		protocol.SubjectDoneAll:     h.onDone,
		protocol.SubjectReadyAll:    h.onReady,
		protocol.SubjectScheduleAll: h.onSchedule,
		protocol.SubjectRelayUp:     func(*nats.Msg) { h.resyncAll() },
		protocol.SubjectProgressAll: h.onProgress,
		protocol.SubjectBatchAll:    h.onBatch,
	}
	for subj, fn := range subjects {
		sub, err := h.nc.Subscribe(subj, fn)
		if err != nil {
			h.stop()
			// Pages read their baselines themselves again, as before
			// Start.
			h.mu.Lock()
			h.ctx, h.spawn = nil, nil
			h.mu.Unlock()
			return fmt.Errorf("console: subscribe %s: %w", subj, err)
		}
		// Never drop live updates silently: a browser falls back to resync.
		_ = sub.SetPendingLimits(1<<20, 256<<20)
		h.mu.Lock()
		h.subs = append(h.subs, sub)
		h.mu.Unlock()
	}
	// The connection may be the embedding application's: listen to its
	// reconnects, leaving the application's reconnect handler untouched.
	unlisten := natsutil.OnReconnect(h.nc, h.resyncAll)
	h.mu.Lock()
	h.unlisten = unlisten
	h.mu.Unlock()
	return nil
}

func (h *hub) stop() {
	h.mu.Lock()
	subs, unlisten := h.subs, h.unlisten
	h.subs, h.unlisten = nil, nil
	h.mu.Unlock()
	if unlisten != nil {
		unlisten()
	}
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
}

// ensure returns the namespace's state and, on first use, starts reading
// its baseline: in the background when the console was started (a page
// need not wait for it), else with ctx.
func (h *hub) ensure(ctx context.Context, ns string) *nsState {
	h.mu.Lock()
	st, ok := h.ns[ns]
	if ok {
		h.mu.Unlock()
		return st
	}
	st = &nsState{ns: ns, loaded: make(chan struct{}), pending: map[uuid.UUID]struct{}{},
		recent: map[uuid.UUID]recentRun{}, clients: map[*sseClient]struct{}{}}
	h.ns[ns] = st
	hctx, spawn := h.ctx, h.spawn
	h.mu.Unlock()
	if hctx == nil {
		h.load(ctx, st)
	} else if !spawn(func() { h.load(hctx, st) }) {
		// Stopped: hctx is cancelled, which is what the read would
		// have failed with; settled forgets the namespace.
		st.err = hctx.Err()
		close(st.loaded)
	}
	return st
}

// settled returns the error of a read baseline, forgetting the namespace
// so the next use reads it again.
func (h *hub) settled(st *nsState) error {
	if st.err == nil {
		return nil
	}
	h.mu.Lock()
	if h.ns[st.ns] == st {
		delete(h.ns, st.ns)
	}
	h.mu.Unlock()
	return st.err
}

// track returns the namespace's state once its baseline is read.
func (h *hub) track(ctx context.Context, ns string) (*nsState, error) {
	st := h.ensure(ctx, ns)
	select {
	case <-st.loaded:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := h.settled(st); err != nil {
		return nil, err
	}
	return st, nil
}

// trends returns the namespace's queue trends (trends.go) once its
// baseline is read.
func (h *hub) trends(ctx context.Context, ns string) ([]TrendView, error) {
	st, err := h.track(ctx, ns)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return st.trendsLocked(time.Now()), nil
}

// peekCounts returns the namespace's counts, or nil while its baseline is
// still being read (the page shows them when the event stream sends them).
func (h *hub) peekCounts(ctx context.Context, ns string) (map[string]int64, error) {
	st := h.ensure(ctx, ns)
	select {
	case <-st.loaded:
	default:
		return nil, nil
	}
	if err := h.settled(st); err != nil {
		return nil, err
	}
	return h.counts(ctx, ns)
}

// load reads the baseline: the live runs' statuses, the finished runs'
// counts (once, not per view) and the newest run.
func (h *hub) load(ctx context.Context, st *nsState) {
	defer close(st.loaded)
	at := time.Now()
	newest, err := h.st.RunsNewest(ctx, st.ns)
	if err != nil {
		st.err = err
		return
	}
	live, err := h.st.RunsLiveStatuses(ctx, st.ns, liveLimit)
	if err != nil {
		st.err = err
		return
	}
	all, err := h.st.RunsCount(ctx, st.ns)
	if err != nil {
		st.err = err
		return
	}
	// Runs created just before the baseline are found again by the first
	// search for new runs (it reaches createdLag back): remember the
	// finished ones so they are not counted twice.
	from := newest
	from.CreatedAt = from.CreatedAt.Add(-createdLag)
	lately, err := h.st.RunsCreatedAfter(ctx, st.ns, from, 10000)
	if err != nil {
		st.err = err
		return
	}
	recent := map[uuid.UUID]recentRun{}
	for _, r := range lately {
		if r.Status.Terminal() {
			recent[r.ID] = recentRun{status: r.Status, at: at}
		}
	}
	counts := map[store.RunStatus]int64{}
	for s, n := range all {
		if s.Terminal() {
			counts[s] = n
		}
	}
	for _, r := range live {
		counts[r.Status]++
	}
	h.mu.Lock()
	st.baselineAt, st.counts, st.live, st.watermark, st.recent = at, counts, live, newest, recent
	st.depthsLocked(live, at)
	h.armLocked(st)
	h.mu.Unlock()
}

func (h *hub) note(ns string, ids []uuid.UUID, newRuns bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.ns[ns]
	if !ok {
		return
	}
	for _, id := range ids {
		st.pending[id] = struct{}{}
	}
	st.newRuns = st.newRuns || newRuns
	h.armLocked(st)
}

func (h *hub) armLocked(st *nsState) {
	if st.armed || st.live == nil || (len(st.pending) == 0 && !st.newRuns) || h.ctx == nil {
		return
	}
	st.armed = true
	ctx, spawn := h.ctx, h.spawn
	time.AfterFunc(h.coalesce, func() {
		if !spawn(func() { h.flush(ctx, st) }) {
			// Stopped: no more reads; disarmed as a failed flush is.
			h.mu.Lock()
			st.armed = false
			h.mu.Unlock()
		}
	})
}

func (h *hub) onChanged(m *nats.Msg) {
	var c protocol.RunsChanged
	if protocol.Decode(m.Data, &c) == nil {
		h.note(c.Namespace, c.Runs, false)
	}
}

func (h *hub) onDone(m *nats.Msg) {
	var f protocol.RunFinished
	if protocol.Decode(m.Data, &f) == nil {
		h.note(f.Namespace, []uuid.UUID{f.RunID}, false)
		h.runs.wake(runKey{f.Namespace, f.RunID})
	}
}

func (h *hub) onReady(m *nats.Msg) {
	var w protocol.Wakeup
	if protocol.Decode(m.Data, &w) == nil {
		h.note(w.Namespace, nil, true)
	}
}

func (h *hub) onSchedule(m *nats.Msg) {
	var s protocol.ScheduleChanged
	if protocol.Decode(m.Data, &s) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.ns[s.Namespace]; ok {
		data, _ := json.Marshal(map[string]any{"schedule_id": s.ScheduleID, "next_at": s.NextAt})
		h.broadcastLocked(st, "schedule", data)
	}
}

// resyncAll re-reads every namespace's baseline (NATS reconnected or a
// relay restarted: events may be lost) and tells browsers to reload.
func (h *hub) resyncAll() {
	h.runs.wakeAll()
	h.mu.Lock()
	ctx := h.ctx
	var states []*nsState
	for _, st := range h.ns {
		states = append(states, st)
	}
	h.mu.Unlock()
	if ctx == nil {
		return
	}
	for _, st := range states {
		fresh := &nsState{ns: st.ns, loaded: make(chan struct{})}
		h.load(ctx, fresh)
		h.mu.Lock()
		if fresh.err == nil {
			st.baselineAt, st.counts, st.live, st.watermark = fresh.baselineAt, fresh.counts, fresh.live, fresh.watermark
			st.recent = fresh.recent
			st.depthsLocked(fresh.live, fresh.baselineAt)
		}
		h.broadcastLocked(st, "resync", []byte(`{}`))
		h.mu.Unlock()
	}
}

// flush reads what changed in a namespace and broadcasts it; ctx is the
// started console's.
func (h *hub) flush(ctx context.Context, st *nsState) {
	h.mu.Lock()
	ids := make([]uuid.UUID, 0, len(st.pending))
	for id := range st.pending {
		ids = append(ids, id)
	}
	st.pending = map[uuid.UUID]struct{}{}
	lookNew := st.newRuns
	st.newRuns = false
	wm := st.watermark
	h.flushes++
	h.mu.Unlock()

	var runs []store.Run
	var err error
	if lookNew {
		from := wm
		from.CreatedAt = from.CreatedAt.Add(-createdLag)
		for {
			var page []store.Run
			page, err = h.st.RunsCreatedAfter(ctx, st.ns, from, 500)
			if err != nil {
				break
			}
			runs = append(runs, page...)
			if len(page) < 500 {
				break
			}
			from = store.Cursor{CreatedAt: page[len(page)-1].CreatedAt, ID: page[len(page)-1].ID}
		}
	}
	for len(ids) > 0 && err == nil {
		n := min(len(ids), 1000)
		var page []store.Run
		page, err = h.st.RunsGetMany(ctx, st.ns, ids[:n])
		runs = append(runs, page...)
		ids = ids[n:]
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	st.armed = false
	if err != nil {
		if ctx.Err() == nil {
			h.broadcastLocked(st, "resync", []byte(`{}`))
		}
		return
	}
	now := time.Now()
	changed := false
	sent := map[uuid.UUID]bool{}
	for i := range runs {
		r := &runs[i]
		if r.CronExpr != "" || sent[r.ID] {
			continue
		}
		sent[r.ID] = true
		if r.CreatedAt.After(st.watermark.CreatedAt) {
			st.watermark = store.Cursor{CreatedAt: r.CreatedAt, ID: r.ID}
		}
		if h.applyLocked(st, r, now) {
			changed = true
		}
		data, _ := json.Marshal(runRow(r))
		h.broadcastLocked(st, "run", data)
	}
	for id, rr := range st.recent {
		if now.Sub(rr.at) > 2*time.Minute {
			delete(st.recent, id)
		}
	}
	if changed {
		h.broadcastLocked(st, "counts", countsJSON(st.counts))
	}
	h.armLocked(st)
}

// applyLocked moves the counts for a run read in its current status and
// reports whether they changed. A run leaves a terminal status only by a
// retry of a failed run, which is how an untracked run that is live again
// is read.
func (h *hub) applyLocked(st *nsState, r *store.Run, now time.Time) bool {
	move := func(from, to store.RunStatus) bool {
		if from == to {
			return false
		}
		if from != "" {
			st.counts[from]--
		}
		st.counts[to]++
		st.trendLocked(r.Queue, from, to, now)
		return true
	}
	record := func() {
		if r.Status.Terminal() {
			delete(st.live, r.ID)
			st.recent[r.ID] = recentRun{status: r.Status, at: now}
		} else {
			delete(st.recent, r.ID)
			st.live[r.ID] = store.LiveRun{Status: r.Status, Queue: st.internLocked(r.Queue)}
		}
	}
	defer record()
	if old, ok := st.live[r.ID]; ok {
		return move(old.Status, r.Status)
	}
	if rr, ok := st.recent[r.ID]; ok {
		return move(rr.status, r.Status)
	}
	if !r.CreatedAt.Before(st.baselineAt.Add(-createdLag)) {
		return move("", r.Status)
	}
	if !r.Status.Terminal() {
		return move(store.StatusFailed, r.Status)
	}
	return false
}

func (h *hub) broadcastLocked(st *nsState, name string, data []byte) {
	st.seq++
	ev := event{seq: st.seq, name: name, data: data}
	st.ring = append(st.ring, ev)
	if len(st.ring) > ringSize {
		st.ring = append(st.ring[:0:0], st.ring[len(st.ring)-ringSize:]...)
	}
	for cl := range st.clients {
		if cl.overflow {
			continue
		}
		select {
		case cl.ch <- ev:
		default:
			// A slow browser never holds the others up: it gets a resync.
			cl.overflow = true
			select {
			case cl.kick <- struct{}{}:
			default:
			}
		}
	}
}

func countsJSON(c map[store.RunStatus]int64) []byte {
	out := map[string]int64{}
	for _, s := range []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusSleeping,
		store.StatusCompleted, store.StatusFailed, store.StatusCancelled} {
		out[string(s)] = c[s]
	}
	data, _ := json.Marshal(out)
	return data
}

// counts returns a namespace's current counts.
func (h *hub) counts(ctx context.Context, ns string) (map[string]int64, error) {
	st, err := h.track(ctx, ns)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	data := countsJSON(st.counts)
	h.mu.Unlock()
	var out map[string]int64
	_ = json.Unmarshal(data, &out)
	return out, nil
}

// serveSSE streams a namespace's events to one browser. A reconnect that
// names the last event it saw (Last-Event-ID) gets what it missed, or a
// resync when that is no longer kept.
func (h *hub) serveSSE(w http.ResponseWriter, r *http.Request, ns string) {
	st, err := h.track(r.Context(), ns)
	if err != nil {
		writeErr(w, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	cl := &sseClient{ch: make(chan event, clientBuffer), kick: make(chan struct{}, 1)}
	last, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if v := r.URL.Query().Get("last_event_id"); v != "" && last == 0 {
		last, _ = strconv.ParseUint(v, 10, 64)
	}
	h.mu.Lock()
	var backlog []event
	switch {
	case last == 0:
		backlog = []event{{seq: st.seq, name: "counts", data: countsJSON(st.counts)}}
	case last == st.seq:
	case last < st.seq && len(st.ring) > 0 && st.ring[0].seq <= last+1:
		for _, ev := range st.ring {
			if ev.seq > last {
				backlog = append(backlog, ev)
			}
		}
	default:
		// Too old for the ring, or from before this console started.
		backlog = []event{{seq: st.seq, name: "resync", data: []byte(`{}`)}}
	}
	st.clients[cl] = struct{}{}
	var stopped <-chan struct{} // nil (never) when the console was not started
	if h.ctx != nil {
		stopped = h.ctx.Done()
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(st.clients, cl)
		h.mu.Unlock()
	}()

	write := func(ev event) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.seq, ev.name, ev.data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	_, _ = fmt.Fprint(w, "retry: 1000\n\n")
	for _, ev := range backlog {
		if !write(ev) {
			return
		}
	}
	if len(backlog) == 0 && rc.Flush() != nil {
		return
	}
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev := <-cl.ch:
			if !write(ev) {
				return
			}
		case <-cl.kick:
			h.mu.Lock()
			cl.overflow = false
			seq := st.seq
		drain:
			for {
				select {
				case <-cl.ch:
				default:
					break drain
				}
			}
			h.mu.Unlock()
			if !write(event{seq: seq, name: "resync", data: []byte(`{}`)}) {
				return
			}
		case <-keepalive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-stopped:
			return
		}
	}
}
