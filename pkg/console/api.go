package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/httpapi"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// maxBulkRetry bounds one bulk retry request; batchSize is how many runs
// it retries between two checks of the request's context.
const (
	maxBulkRetry = 1000
	batchSize    = 100
)

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", c.staticFS())
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, c.opts.Prefix+"/runs", http.StatusFound)
	})
	// Pages.
	m.HandleFunc("GET /runs", c.page("runs", c.runsData))
	m.HandleFunc("GET /runs/{id}", c.page("run", c.runData))
	m.HandleFunc("GET /dead-letters", c.page("deadletters", c.deadLettersData))
	m.HandleFunc("GET /schedules", c.page("schedules", c.schedulesData))
	m.HandleFunc("GET /workers", c.page("workers", c.workersData))
	m.HandleFunc("GET /queues", c.page("queues", c.queuesData))
	m.HandleFunc("GET /start", c.page("start", func(*http.Request, string) (any, error) { return struct{}{}, nil }))
	// JSON API: the same data as the pages.
	m.HandleFunc("GET /api/v1/namespaces", c.api(func(r *http.Request, _ string) (any, error) {
		ns, err := c.st.Namespaces(r.Context())
		return map[string]any{"namespaces": ns}, err
	}))
	m.HandleFunc("GET /api/v1/csrf", c.csrfHandler)
	m.HandleFunc("GET /api/v1/runs", c.api(c.runsData))
	m.HandleFunc("GET /api/v1/counts", c.api(func(r *http.Request, ns string) (any, error) {
		return c.hub.counts(r.Context(), ns)
	}))
	m.HandleFunc("GET /api/v1/runs/{id}", c.api(c.runData))
	m.HandleFunc("GET /api/v1/runs/{id}/progress", c.serveProgress)
	m.HandleFunc("GET /api/v1/dead-letters", c.api(c.deadLettersData))
	m.HandleFunc("GET /api/v1/schedules", c.api(c.schedulesData))
	m.HandleFunc("GET /api/v1/workers", c.api(c.workersData))
	m.HandleFunc("GET /api/v1/queues", c.api(c.queuesData))
	m.HandleFunc("GET /api/v1/retention", c.api(c.retentionData))
	m.HandleFunc("GET /api/v1/limits", c.api(c.limitsData))
	m.HandleFunc("GET /api/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		ns, err := c.namespace(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		c.hub.serveSSE(w, r, ns)
	})
	// Writes.
	m.HandleFunc("POST /api/v1/runs", c.api(c.startRun))
	m.HandleFunc("POST /api/v1/runs/{id}/cancel", c.api(c.runAction("cancel")))
	m.HandleFunc("POST /api/v1/runs/{id}/terminate", c.api(c.runAction("terminate")))
	m.HandleFunc("POST /api/v1/runs/{id}/retry", c.api(c.runAction("retry")))
	m.HandleFunc("POST /api/v1/runs/{id}/pause", c.api(c.runAction("pause")))
	m.HandleFunc("POST /api/v1/runs/{id}/resume", c.api(c.runAction("resume")))
	m.HandleFunc("POST /api/v1/runs/{id}/retry-step", c.api(c.retryStep))
	m.HandleFunc("POST /api/v1/runs/{id}/events", c.api(c.runAction("event")))
	m.HandleFunc("POST /api/v1/dead-letters/retry", c.api(c.bulkRetry))
	m.HandleFunc("POST /api/v1/runs/{id}/fork", c.api(c.forkRun))
	m.HandleFunc("POST /api/v1/dead-letters/fork", c.api(c.bulkFork))
	m.HandleFunc("POST /api/v1/schedules", c.api(c.createSchedule))
	m.HandleFunc("POST /api/v1/schedules/{id}/{action}", c.api(c.scheduleAction))
	m.HandleFunc("DELETE /api/v1/schedules/{id}", c.api(c.deleteSchedule))
	m.HandleFunc("POST /api/v1/workers/{id}/drain", c.api(c.drainWorker))
	m.HandleFunc("POST /api/v1/limits", c.api(c.setLimit))
	m.HandleFunc("DELETE /api/v1/limits", c.api(c.deleteLimit))
	m.HandleFunc("POST /api/v1/pauses", c.api(c.pauseScope))
	m.HandleFunc("DELETE /api/v1/pauses", c.api(c.resumeScope))
	m.HandleFunc("POST /api/v1/retention", c.api(c.setRetention))
	c.batchRoutes(m)
	c.eventRoutes(m)
	c.mux = m
}

type dataFunc func(r *http.Request, ns string) (any, error)

// namespace is the request's ?ns= (or form/JSON "ns"), else the default.
func (c *Console) namespace(r *http.Request) (string, error) {
	ns := r.URL.Query().Get("ns")
	if ns == "" {
		ns = c.opts.Namespace
	}
	if err := protocol.ValidToken("namespace", ns); err != nil {
		return "", fmt.Errorf("%w: %v", store.ErrInvalidArgument, err)
	}
	return ns, nil
}

func (c *Console) api(fn dataFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, err := c.namespace(r)
		if err == nil {
			var v any
			if v, err = fn(r, ns); err == nil {
				writeJSON(w, http.StatusOK, v)
				return
			}
		}
		writeErr(w, err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	writeJSON(w, httpapi.ErrorStatus(err), map[string]string{"error": err.Error()})
}

// writeArgs reads a write's parameters and the namespace's client, the two
// things every action starts with.
func (c *Console) writeArgs(r *http.Request, ns string) (map[string]string, *client.Client, error) {
	p, err := params(r)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, nil, err
	}
	return p, cl, nil
}

// jsonParam is a parameter holding a JSON payload, null when empty.
func jsonParam(p map[string]string, key string) json.RawMessage {
	if s := strings.TrimSpace(p[key]); s != "" {
		return json.RawMessage(s)
	}
	return json.RawMessage("null")
}

// idClient reads the id an action names in its path and the namespace's
// client.
func (c *Console) idClient(r *http.Request, ns string) (uuid.UUID, *client.Client, error) {
	id, err := pathID(r)
	if err != nil {
		return uuid.Nil, nil, err
	}
	cl, err := c.client(ns)
	return id, cl, err
}

// maxBody bounds a write's request body: one payload of the default limit
// (2 MiB), even quoted as a JSON string, and a few fields. A namespace that
// raised its payload limit above it starts larger runs with the client or
// the CLI.
const maxBody = 4 << 20

// bodyErr types the error of reading a request body: one cut off at
// maxBody is ErrPayloadTooLarge (413), whatever the parser made of it.
func bodyErr(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("%w: the request body is larger than %d bytes", store.ErrPayloadTooLarge, tooBig.Limit)
	}
	return fmt.Errorf("%w: %v", store.ErrInvalidArgument, err)
}

// params reads a write's parameters from a JSON object or a form.
func params(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	r.Body = http.MaxBytesReader(nil, r.Body, maxBody)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, bodyErr(err)
		}
		var m map[string]any
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				return nil, fmt.Errorf("%w: body is not a JSON object: %v", store.ErrInvalidArgument, err)
			}
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				out[k] = v
			case nil:
			default:
				b, _ := json.Marshal(v)
				out[k] = string(b)
			}
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, bodyErr(err)
	}
	for k := range r.PostForm {
		out[k] = r.PostForm.Get(k)
	}
	return out, nil
}

func pathID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: %q is not a run id", store.ErrInvalidArgument, r.PathValue("id"))
	}
	return id, nil
}

func parseTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%w: %q is not a time (RFC 3339 or 2006-01-02T15:04)", store.ErrInvalidArgument, s)
}

func (c *Console) runsData(r *http.Request, ns string) (any, error) {
	q := r.URL.Query()
	f := RunsFilter{Status: q.Get("status"), Type: q.Get("type"), Queue: q.Get("queue"), Schedule: q.Get("schedule"),
		ExternalID: q.Get("external_id"), From: q.Get("from"), To: q.Get("to"), Input: q.Get("input"), Output: q.Get("output"),
		Query: q.Get("query")}
	p := store.RunsSearchParams{Namespace: ns, Type: f.Type, Queue: f.Queue, ExternalID: f.ExternalID,
		InputMatch: f.Input, OutputMatch: f.Output, Query: f.Query}
	for _, s := range strings.Split(f.Status, ",") {
		if s = strings.ToUpper(strings.TrimSpace(s)); s != "" {
			p.Statuses = append(p.Statuses, store.RunStatus(s))
		}
	}
	var err error
	if p.CreatedFrom, err = parseTime(f.From); err != nil {
		return nil, err
	}
	if p.CreatedTo, err = parseTime(f.To); err != nil {
		return nil, err
	}
	if f.Schedule != "" {
		id, err := uuid.Parse(f.Schedule)
		if err != nil {
			return nil, fmt.Errorf("%w: schedule %q is not an id", store.ErrInvalidArgument, f.Schedule)
		}
		p.ScheduleID = &id
	}
	if l := q.Get("limit"); l != "" {
		if p.Limit, err = strconv.Atoi(l); err != nil {
			return nil, fmt.Errorf("%w: limit %q", store.ErrInvalidArgument, l)
		}
	}
	if cur := q.Get("cursor"); cur != "" {
		cc, err := store.ParseCursor(cur)
		if err != nil {
			return nil, err
		}
		p.After = &cc
	}
	runs, next, err := c.st.RunsSearch(r.Context(), p)
	if err != nil {
		return nil, err
	}
	// The JSON answer waits for exact counts; a page shows them when its
	// event stream brings them, rather than wait for a namespace's first
	// count.
	var counts map[string]int64
	if r.Context().Value(ctxPage) != nil {
		counts, err = c.hub.peekCounts(r.Context(), ns)
	} else {
		counts, err = c.hub.counts(r.Context(), ns)
	}
	if err != nil {
		return nil, err
	}
	page := RunsPage{Runs: make([]RunView, len(runs)), Counts: counts, CountsReady: counts != nil, Filter: f}
	for i := range runs {
		page.Runs[i] = runRow(&runs[i])
	}
	if next != nil {
		page.Next = next.String()
	}
	return page, nil
}

func (c *Console) runData(r *http.Request, ns string) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	// Reads go to the store: the detail shows more than client.Run holds
	// (the trace context, the lease).
	got, err := c.st.RunsGet(r.Context(), ns, id)
	if err != nil {
		return nil, err
	}
	run := &got
	steps, err := c.st.StepsList(r.Context(), ns, id)
	if err != nil {
		return nil, err
	}
	events, err := c.st.EventsList(r.Context(), ns, id)
	if err != nil {
		return nil, err
	}
	d := RunDetail{Run: runRow(run), Input: pretty(run.Input), Output: pretty(run.Output),
		Attempts: timeline(run, steps, time.Now()), Events: []EventView{}, TraceID: traceID(run.TraceContext),
		DebounceKey: run.DebounceKey, DebounceStarts: run.DebounceStarts, ConcurrencyKey: run.ConcurrencyKey, RateLimitKey: run.RateLimitKey}
	if p := run.Paused; p != nil {
		d.Paused = &PauseView{By: p.By, Reason: p.Reason, At: p.At}
	}
	for _, e := range events {
		d.Events = append(d.Events, EventView{ID: e.ID, Name: e.Name, Payload: pretty(e.Payload), CreatedAt: e.CreatedAt,
			ConsumedAt: e.ConsumedAt, ConsumedBy: e.ConsumedBy, Unreceived: e.Unreceived})
	}
	if run.Status == store.StatusPending || run.Status == store.StatusSleeping {
		w, ok, err := c.st.RunsWaiting(r.Context(), ns, id)
		if err != nil {
			return nil, err
		}
		if ok {
			d.Waiting = &WaitingView{Reason: string(w.Reason), Until: w.Until, Detail: w.Detail}
		}
	}
	if d.TraceID != "" && c.opts.TraceURL != "" {
		d.TraceURL = strings.ReplaceAll(c.opts.TraceURL, "{trace_id}", d.TraceID)
	}
	if err := c.forkLinks(r.Context(), ns, id, &d); err != nil {
		return nil, err
	}
	d.Children, err = c.children(r.Context(), ns, id, 0)
	return d, err
}

// children reads a run's child tree (three levels, 100 children each).
func (c *Console) children(ctx context.Context, ns string, id uuid.UUID, depth int) ([]ChildView, error) {
	out := []ChildView{}
	if depth >= 3 {
		return out, nil
	}
	runs, _, err := c.st.RunsList(ctx, store.RunsListParams{Namespace: ns, ParentID: &id, Limit: 100})
	if err != nil {
		return nil, err
	}
	for i := range runs {
		kids, err := c.children(ctx, ns, runs[i].ID, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, ChildView{Run: runRow(&runs[i]), Children: kids})
	}
	return out, nil
}

func (c *Console) startRun(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	h, err := cl.Start(r.Context(), p["type"], jsonParam(p, "input"), client.StartOptions{Queue: p["queue"], ExternalID: p["external_id"],
		Version: p["version"]})
	if err != nil {
		return nil, err
	}
	c.hub.note(ns, []uuid.UUID{h.RunID}, false)
	return map[string]any{"run_id": h.RunID, "created": h.Created}, nil
}

func (c *Console) runAction(action string) dataFunc {
	return func(r *http.Request, ns string) (any, error) {
		id, err := pathID(r)
		if err != nil {
			return nil, err
		}
		p, cl, err := c.writeArgs(r, ns)
		if err != nil {
			return nil, err
		}
		var out any = map[string]any{"run_id": id, "ok": true}
		switch action {
		case "cancel":
			err = cl.Cancel(r.Context(), id)
		case "terminate":
			reason := p["reason"]
			if reason == "" {
				reason = "terminated from the console"
			}
			err = cl.Terminate(r.Context(), id, reason)
		case "retry":
			_, err = cl.Retry(r.Context(), id)
		case "pause":
			// Recorded as paused by the console's user (its basic auth or
			// proxy header), else by "console".
			by, _ := r.Context().Value(ctxUser).(string)
			if by == "" {
				by = "console"
			}
			_, err = cl.PauseRun(r.Context(), id, client.PauseOptions{By: by, Reason: p["reason"]})
		case "resume":
			_, err = cl.ResumeRun(r.Context(), id)
		case "event":
			var ev *client.SentEvent
			ev, err = cl.SendEvent(r.Context(), id, p["name"], jsonParam(p, "payload"))
			if err == nil {
				out = ev
			}
		}
		if err != nil {
			return nil, err
		}
		c.hub.note(ns, []uuid.UUID{id}, false)
		return out, nil
	}
}

func (c *Console) deadLettersData(r *http.Request, ns string) (any, error) {
	gs, err := c.st.RunsDeadLetters(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetterView, len(gs))
	for i, g := range gs {
		out[i] = DeadLetterView(g)
	}
	return map[string]any{"groups": out, "scanned_at_most": store.DeadLetterScan}, nil
}

// bulkRetry retries the failed runs of a group (type and fingerprint, each
// optional) through client.Retry: with dry_run it only counts them; else
// it retries at most limit (default and cap maxBulkRetry) in batches of
// batchSize and reports each run's result.
func (c *Console) bulkRetry(r *http.Request, ns string) (any, error) {
	p, err := params(r)
	if err != nil {
		return nil, err
	}
	limit := maxBulkRetry
	if l := p["limit"]; l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 || limit > maxBulkRetry {
			return nil, fmt.Errorf("%w: limit %q must be 1 to %d", store.ErrInvalidArgument, l, maxBulkRetry)
		}
	}
	ids, err := c.st.RunsDeadLetterIDs(r.Context(), ns, p["type"], p["fingerprint"], limit)
	if err != nil {
		return nil, err
	}
	if dry := p["dry_run"]; dry == "true" || dry == "on" || dry == "1" {
		return map[string]any{"dry_run": true, "matched": len(ids)}, nil
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	results := make([]RetryResult, 0, len(ids))
	batches := 0
	for len(ids) > 0 {
		n := min(len(ids), batchSize)
		if err := r.Context().Err(); err != nil {
			break
		}
		for _, id := range ids[:n] {
			res := RetryResult{RunID: id, OK: true}
			if _, err := cl.Retry(r.Context(), id); err != nil {
				res.OK, res.Error = false, err.Error()
			}
			results = append(results, res)
		}
		c.hub.note(ns, ids[:n], false)
		ids = ids[n:]
		batches++
	}
	ok := 0
	for _, res := range results {
		if res.OK {
			ok++
		}
	}
	return map[string]any{"dry_run": false, "batches": batches, "retried": ok, "failed": len(results) - ok,
		"results": results}, nil
}

func (c *Console) schedulesData(r *http.Request, ns string) (any, error) {
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	scs, next, err := cl.ListSchedules(r.Context(), client.ListSchedulesOptions{Limit: 100, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleView, 0, len(scs))
	now := time.Now()
	for _, sc := range scs {
		v := ScheduleView{ID: sc.ID, Type: sc.Type, Queue: sc.Queue, Cron: sc.Cron, Timezone: sc.Timezone,
			Status: string(sc.Status), MaxCatchup: sc.MaxCatchup, LastFiredAt: sc.LastFiredAt, CreatedAt: sc.CreatedAt,
			NextFireAt: sc.NextFireAt, NextFires: []string{}, LastRuns: []RunView{},
			Overlap: string(sc.Overlap), BufferedFireAt: sc.BufferedFireAt}
		if sc.Jitter > 0 {
			v.Jitter = sc.Jitter.String()
		}
		loc, lerr := time.LoadLocation(sc.Timezone)
		if lerr != nil {
			loc = time.UTC
		}
		t := now
		for range 5 {
			n, err := store.NextFireTime(sc.Cron, sc.Timezone, t)
			if err != nil || n == nil {
				break
			}
			v.NextFires = append(v.NextFires, n.In(loc).Format("2006-01-02 15:04:05 MST"))
			t = *n
		}
		hist, err := c.st.SchedulesHistory(r.Context(), ns, sc.ID, 5)
		if err != nil {
			return nil, err
		}
		for i := range hist {
			v.LastRuns = append(v.LastRuns, runRow(&hist[i]))
			if s := hist[i].Status; s == store.StatusPending || s == store.StatusRunning || s == store.StatusSleeping {
				v.Live++
			}
		}
		out = append(out, v)
	}
	return map[string]any{"schedules": out, "next": next}, nil
}

func (c *Console) createSchedule(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	o := client.ScheduleOptions{Cron: p["cron"], Timezone: p["timezone"], Queue: p["queue"]}
	if m := p["max_catchup"]; m != "" {
		if o.MaxCatchup, err = strconv.Atoi(m); err != nil {
			return nil, fmt.Errorf("%w: max_catchup %q", store.ErrInvalidArgument, m)
		}
	}
	if o.Overlap, err = client.ParseOverlapPolicy(p["overlap"]); err != nil {
		return nil, err
	}
	if j := p["jitter"]; j != "" {
		if o.Jitter, err = durations.Parse(j); errors.Is(err, durations.ErrTooLong) {
			return nil, fmt.Errorf("%w: jitter %s is above the maximum %s", store.ErrInvalidArgument, j, durations.Format(client.MaxJitter))
		} else if err != nil {
			return nil, fmt.Errorf("%w: jitter %q: give a duration such as 30s", store.ErrInvalidArgument, j)
		}
	}
	sc, err := cl.CreateSchedule(r.Context(), p["type"], jsonParam(p, "input"), o)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": sc.ID, "next_fire_at": sc.NextFireAt}, nil
}

func (c *Console) scheduleAction(r *http.Request, ns string) (any, error) {
	id, cl, err := c.idClient(r, ns)
	if err != nil {
		return nil, err
	}
	switch a := r.PathValue("action"); a {
	case "pause":
		_, err = cl.PauseSchedule(r.Context(), id)
	case "resume":
		_, err = cl.ResumeSchedule(r.Context(), id)
	case "trigger":
		var h *client.Handle
		if h, err = cl.TriggerSchedule(r.Context(), id); err == nil {
			c.hub.note(ns, []uuid.UUID{h.RunID}, false)
			return map[string]any{"id": id, "run_id": h.RunID}, nil
		}
	default:
		return nil, fmt.Errorf("%w: unknown schedule action %q", store.ErrNotFound, a)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": id, "ok": true}, nil
}

func (c *Console) deleteSchedule(r *http.Request, ns string) (any, error) {
	id, cl, err := c.idClient(r, ns)
	if err != nil {
		return nil, err
	}
	if err := cl.DeleteSchedule(r.Context(), id); err != nil {
		return nil, err
	}
	return map[string]any{"id": id, "ok": true}, nil
}

func (c *Console) workersData(r *http.Request, ns string) (any, error) {
	ws, err := c.st.WorkersList(r.Context(), store.WorkersListParams{Namespace: ns})
	if err != nil {
		return nil, err
	}
	held := map[uuid.UUID]int{}
	ids := make([]uuid.UUID, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	if len(ids) > 0 {
		if held, err = c.st.RunsHeldBy(r.Context(), ns, ids); err != nil {
			return nil, err
		}
	}
	out := make([]WorkerView, len(ws))
	for i, w := range ws {
		types := make([]string, len(w.Types))
		for j, t := range w.Types {
			types[j] = t.Type + "@" + t.Version
		}
		sort.Strings(types)
		out[i] = WorkerView{ID: w.ID, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID, Version: w.Version,
			Status: string(w.Status), LastHeartbeat: w.LastHeartbeatAt, RegisteredAt: w.RegisteredAt,
			DeregisteredAt: w.DeregisteredAt, Types: types, MaxConcurrency: w.MaxConcurrency, Held: held[w.ID]}
	}
	return map[string]any{"workers": out}, nil
}

func (c *Console) drainWorker(r *http.Request, ns string) (any, error) {
	id, cl, err := c.idClient(r, ns)
	if err != nil {
		return nil, err
	}
	w, err := cl.DrainWorker(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": w.ID, "status": w.Status}, nil
}

func (c *Console) queuesData(r *http.Request, ns string) (any, error) {
	stats, err := c.st.RunsQueueStats(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	lv, err := limitsView(r.Context(), cl, stats)
	if err != nil {
		return nil, err
	}
	lim := map[[2]string]int{}
	for _, l := range lv.Concurrency {
		if l.Max >= 0 {
			lim[[2]string{l.Queue, l.Type}] = l.Max
		}
	}
	now := time.Now()
	qs := make([]QueueView, len(stats))
	for i, s := range stats {
		qs[i] = QueueView{Queue: s.Queue, Type: s.Type, Due: s.Due, Running: s.Running, Sleeping: s.Sleeping, OldestDue: s.OldestDue}
		if s.OldestDue != nil {
			qs[i].OldestDueMS = now.Sub(*s.OldestDue).Milliseconds()
		}
		if m, ok := lim[[2]string{s.Queue, s.Type}]; ok {
			qs[i].Limit = &m
		}
	}
	ret, err := cl.Retention(r.Context())
	if err != nil {
		return nil, err
	}
	trends, err := c.hub.trends(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	paused, err := cl.ListPaused(r.Context())
	if err != nil {
		return nil, err
	}
	pv := make([]PausedScopeView, len(paused))
	for i, p := range paused {
		pv[i] = PausedScopeView{Kind: p.Kind, Name: p.Name, PauseView: PauseView{By: p.By, Reason: p.Reason, At: p.At}}
	}
	return map[string]any{"queues": qs, "paused": pv, "limits": lv.Concurrency, "rate_limits": lv.Rate, "top_keys": lv.TopKeys,
		"retention": retentionView(ret), "trends": trends}, nil
}

func (c *Console) setLimit(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	maxRunning, err := strconv.Atoi(p["max"])
	if err != nil {
		return nil, fmt.Errorf("%w: max %q is not a number", store.ErrInvalidArgument, p["max"])
	}
	l, err := cl.SetConcurrencyLimit(r.Context(), p["queue"], p["type"], maxRunning)
	if err != nil {
		return nil, err
	}
	return limitView(*l), nil
}

// pauseScope pauses a queue or a workflow type (kind "queue" or "type",
// name, reason), as the console's user.
func (c *Console) pauseScope(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	by, _ := r.Context().Value(ctxUser).(string)
	if by == "" {
		by = "console"
	}
	o := client.PauseOptions{By: by, Reason: p["reason"]}
	var ps client.PausedScope
	var already bool
	switch p["kind"] {
	case "queue":
		ps, already, err = cl.PauseQueue(r.Context(), p["name"], o)
	case "type":
		ps, already, err = cl.PauseType(r.Context(), p["name"], o)
	default:
		return nil, fmt.Errorf("%w: kind %q: queue or type", store.ErrInvalidArgument, protocol.Echo(p["kind"]))
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"paused": PausedScopeView{Kind: ps.Kind, Name: ps.Name,
		PauseView: PauseView{By: ps.By, Reason: ps.Reason, At: ps.At}}, "already_paused": already}, nil
}

// resumeScope resumes a paused queue or workflow type (?kind=&name=).
func (c *Console) resumeScope(r *http.Request, ns string) (any, error) {
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	switch q.Get("kind") {
	case "queue":
		err = cl.ResumeQueue(r.Context(), q.Get("name"))
	case "type":
		err = cl.ResumeType(r.Context(), q.Get("name"))
	default:
		return nil, fmt.Errorf("%w: kind %q: queue or type", store.ErrInvalidArgument, protocol.Echo(q.Get("kind")))
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"ok": true}, nil
}

func (c *Console) deleteLimit(r *http.Request, ns string) (any, error) {
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if err := cl.RemoveConcurrencyLimit(r.Context(), q.Get("queue"), q.Get("type")); err != nil {
		return nil, err
	}
	return map[string]any{"ok": true}, nil
}
