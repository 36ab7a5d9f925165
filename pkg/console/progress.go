package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// A run page shows the run's durable state (the latest value of each key)
// and its streams, appended to live. Its browser follows
// /api/v1/runs/{id}/progress, an event stream of its own: the handler
// registers with the hub first, then reads Postgres, and reads again
// (only what is new) whenever the hub hears of the run's progress
// (progress.<ns>.<run>, which the hub subscribes to for every run) or end,
// or must resync. Nothing is read while the run records nothing.

// runKey names a run across namespaces.
type runKey struct {
	ns string
	id uuid.UUID
}

// runWaiters are the event streams following runs, each woken by a
// channel of one slot (a wakeup that finds the slot full is covered by
// the one already there: the reader reads everything new).
type runWaiters struct {
	mu sync.Mutex
	m  map[runKey]map[chan struct{}]struct{}
}

func (w *runWaiters) add(k runKey) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[runKey]map[chan struct{}]struct{}{}
	}
	if w.m[k] == nil {
		w.m[k] = map[chan struct{}]struct{}{}
	}
	w.m[k][ch] = struct{}{}
	return ch
}

func (w *runWaiters) remove(k runKey, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m[k], ch)
	if len(w.m[k]) == 0 {
		delete(w.m, k)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *runWaiters) wake(k runKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[k] {
		poke(ch)
	}
}

func (w *runWaiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chs := range w.m {
		for ch := range chs {
			poke(ch)
		}
	}
}

func (h *hub) onProgress(m *nats.Msg) {
	var p protocol.RunProgress
	if protocol.Decode(m.Data, &p) == nil {
		h.runs.wake(runKey{p.Namespace, p.RunID})
	}
}

// StateView is one state key of a run as the console shows it.
type StateView struct {
	Key        string          `json:"key"`
	Version    int             `json:"version"`
	Value      json.RawMessage `json:"value"`
	RecordedAt *time.Time      `json:"recorded_at,omitempty"`
}

// StreamEntryView is one stream entry as the console sends it.
type StreamEntryView struct {
	Stream     string          `json:"stream"`
	Index      int             `json:"index"`
	Value      json.RawMessage `json:"value"`
	RecordedAt *time.Time      `json:"recorded_at,omitempty"`
}

// StreamView sums up one stream of a run.
type StreamView struct {
	Name    string `json:"name"`
	Entries int    `json:"entries"`
	Last    int    `json:"last"`
	Closed  bool   `json:"closed"`
}

// ProgressView is a run's state and streams (GET
// /api/v1/runs/{id}/progress without an event stream).
type ProgressView struct {
	Status  string       `json:"status"`
	State   []StateView  `json:"state"`
	Streams []StreamView `json:"streams"`
}

func stateViews(vs []store.StateValue) []StateView {
	out := make([]StateView, len(vs))
	for i, v := range vs {
		out[i] = StateView{Key: v.Key, Version: v.Version, Value: v.Value, RecordedAt: v.RecordedAt}
	}
	return out
}

// serveProgress answers GET /api/v1/runs/{id}/progress: the run's state
// and streams as JSON, or, when the request accepts text/event-stream, a
// live event stream of them: "state" (every key's latest value, whenever
// one changed), "entry" (a stream entry, in order per stream), "end" (a
// stream closed) and "done" (the run ended; the stream ends).
func (c *Console) serveProgress(w http.ResponseWriter, r *http.Request) {
	ns, err := c.namespace(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	ctx := r.Context()
	if r.Header.Get("Accept") != "text/event-stream" {
		sr, err := c.st.StepsState(ctx, store.StepsStateParams{Namespace: ns, RunID: id})
		if err != nil {
			writeErr(w, err)
			return
		}
		streams, err := c.st.StepsStreams(ctx, ns, id)
		if err != nil {
			writeErr(w, err)
			return
		}
		pv := ProgressView{Status: string(sr.Status), State: stateViews(sr.Values), Streams: make([]StreamView, len(streams))}
		for i, s := range streams {
			pv.Streams[i] = StreamView{Name: s.Name, Entries: s.Entries, Last: s.Last, Closed: s.Closed}
		}
		writeJSON(w, http.StatusOK, pv)
		return
	}

	k := runKey{ns, id}
	wake := c.hub.runs.add(k)
	defer c.hub.runs.remove(k, wake)
	c.hub.mu.Lock()
	var stopped <-chan struct{}
	if c.hub.ctx != nil {
		stopped = c.hub.ctx.Done()
	}
	c.hub.mu.Unlock()
	// The first read happens after the registration: whatever is recorded
	// in between wakes this stream.
	sr, err := c.st.StepsState(ctx, store.StepsStateParams{Namespace: ns, RunID: id})
	if err != nil {
		writeErr(w, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(name string, v any) bool {
		data, _ := json.Marshal(v)
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	_, _ = fmt.Fprint(w, "retry: 1000\n\n")
	versions := map[string]int{}
	sent := map[string]int{}
	closed := map[string]bool{}
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for first := true; ; first = false {
		if !first {
			if sr, err = c.st.StepsState(ctx, store.StepsStateParams{Namespace: ns, RunID: id}); err != nil {
				return
			}
		}
		changed := first
		for _, v := range sr.Values {
			if versions[v.Key] != v.Version {
				versions[v.Key], changed = v.Version, true
			}
		}
		if changed && !send("state", stateViews(sr.Values)) {
			return
		}
		streams, err := c.st.StepsStreams(ctx, ns, id)
		if err != nil {
			return
		}
		for _, s := range streams {
			for !closed[s.Name] && s.Last > sent[s.Name] {
				read, err := c.st.StepsStream(ctx, store.StepsStreamParams{Namespace: ns, RunID: id, Name: s.Name, After: sent[s.Name]})
				if err != nil {
					return
				}
				for _, e := range read.Entries {
					if !send("entry", StreamEntryView{Stream: s.Name, Index: e.Index, Value: e.Value, RecordedAt: e.RecordedAt}) {
						return
					}
					sent[s.Name] = e.Index
				}
				if !read.More {
					break
				}
			}
			if s.Closed && !closed[s.Name] && s.Last <= sent[s.Name] {
				closed[s.Name] = true
				if !send("end", map[string]string{"stream": s.Name}) {
					return
				}
			}
		}
		if sr.Status.Terminal() {
			send("done", map[string]string{"status": string(sr.Status)})
			return
		}
		if stopped == nil {
			// Not started: no live updates to wait for.
			return
		}
		select {
		case <-wake:
		case <-keepalive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-stopped:
			return
		}
	}
}
