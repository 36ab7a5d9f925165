package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Batch operations (docs/batches.md) in the console: the batches page
// lists them and starts one, a batch's page shows its progress and its
// failed and skipped runs. Every action goes through pkg/client, as
// `kagzi batch` does. Pages follow a batch's BatchChanged notices through
// the hub's event stream ("batch" events).

// batchListLimit is how many batches the list shows, newest first;
// batchRunsLimit how many runs of one outcome a batch's page or one
// request lists unless told otherwise.
const (
	batchListLimit = 100
	batchRunsLimit = 100
)

// BatchView is a batch as the console shows it and /api/v1 returns it:
// the client's JSON form (that of `kagzi --json batch show`), the runs
// ?runs= asked for, and its progress bar's parts.
type BatchView struct {
	client.BatchJSON
	Runs []BatchRunView `json:"runs,omitempty"`
	// DonePct, FailedPct and SkippedPct size the progress bar's parts
	// (percent of Total).
	DonePct    float64 `json:"-"`
	FailedPct  float64 `json:"-"`
	SkippedPct float64 `json:"-"`
}

// Live says whether the batch may still act (running or paused).
func (b BatchView) Live() bool {
	return b.State == string(client.BatchRunning) || b.State == string(client.BatchPaused)
}

// BatchRunView is one run of a batch and its outcome ("pending" while
// the batch has not acted on it).
type BatchRunView = client.BatchRunJSON

// BatchPage is a batch's page: the batch and its failed and skipped runs.
type BatchPage struct {
	Batch   BatchView      `json:"batch"`
	Failed  []BatchRunView `json:"failed"`
	Skipped []BatchRunView `json:"skipped"`
}

func batchView(b client.Batch) BatchView {
	v := BatchView{BatchJSON: client.NewBatchJSON(b)}
	if b.Total > 0 {
		pct := func(n int) float64 { return float64(n) * 100 / float64(b.Total) }
		v.DonePct, v.FailedPct, v.SkippedPct = pct(b.Done), pct(b.Failed), pct(b.Skipped)
	}
	return v
}

// batchID reads the batch id of the path.
func batchID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: %q is not a batch id", store.ErrInvalidArgument, protocol.Echo(r.PathValue("id")))
	}
	return id, nil
}

// batchesData lists the namespace's batches, newest first.
func (c *Console) batchesData(r *http.Request, ns string) (any, error) {
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	bs, err := cl.ListBatches(r.Context(), batchListLimit)
	if err != nil {
		return nil, err
	}
	out := make([]BatchView, len(bs))
	for i, b := range bs {
		out[i] = batchView(b)
	}
	return map[string]any{"batches": out, "actions": store.BatchActions, "default_rate": client.DefaultBatchRate,
		"max_rate": client.MaxBatchRate}, nil
}

// batchData is a batch with its counters; ?runs= (failed, skipped,
// pending, done or all) lists its runs too, after the run id ?after=, at
// most ?limit= (1 to 1000, default 100).
func (c *Console) batchData(r *http.Request, ns string) (any, error) {
	id, err := batchID(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	outcome, list := q.Get("runs"), q.Has("runs")
	switch outcome {
	case "all":
		outcome = ""
	case "failed", "skipped", "pending", "done":
	default:
		if list {
			return nil, fmt.Errorf("%w: runs %q: want failed, skipped, pending, done or all", store.ErrInvalidArgument, protocol.Echo(outcome))
		}
	}
	limit := batchRunsLimit
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > store.MaxBatchList {
			return nil, fmt.Errorf("%w: limit %q: want 1 to %d", store.ErrInvalidArgument, protocol.Echo(l), store.MaxBatchList)
		}
	}
	after := uuid.Nil
	if a := q.Get("after"); a != "" {
		if after, err = uuid.Parse(a); err != nil {
			return nil, fmt.Errorf("%w: after %q is not a run id", store.ErrInvalidArgument, protocol.Echo(a))
		}
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	b, err := cl.GetBatch(r.Context(), id)
	if err != nil {
		return nil, err
	}
	v := batchView(b)
	if list {
		rs, err := cl.BatchRuns(r.Context(), id, outcome, after, limit)
		if err != nil {
			return nil, err
		}
		v.Runs = client.NewBatchRunsJSON(rs)
	}
	return v, nil
}

// batchPageData is a batch's page: the batch, its failed and its
// skipped runs (the first batchRunsLimit of each).
func (c *Console) batchPageData(r *http.Request, ns string) (any, error) {
	id, err := batchID(r)
	if err != nil {
		return nil, err
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	b, err := cl.GetBatch(r.Context(), id)
	if err != nil {
		return nil, err
	}
	p := BatchPage{Batch: batchView(b), Failed: []BatchRunView{}, Skipped: []BatchRunView{}}
	if b.Failed > 0 {
		rs, err := cl.BatchRuns(r.Context(), id, "failed", uuid.Nil, batchRunsLimit)
		if err != nil {
			return nil, err
		}
		p.Failed = client.NewBatchRunsJSON(rs)
	}
	if b.Skipped > 0 {
		rs, err := cl.BatchRuns(r.Context(), id, "skipped", uuid.Nil, batchRunsLimit)
		if err != nil {
			return nil, err
		}
		p.Skipped = client.NewBatchRunsJSON(rs)
	}
	return p, nil
}

// parseRunIDs reads a batch's run ids: a JSON array of strings, or ids
// separated by commas, spaces or new lines (a form's textarea).
func parseRunIDs(s string) ([]uuid.UUID, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var parts []string
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &parts); err != nil {
			return nil, fmt.Errorf("%w: run_ids: want an array of run ids: %v", store.ErrInvalidArgument, err)
		}
	} else {
		parts = strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	}
	if len(parts) > client.MaxBatchIDs {
		return nil, fmt.Errorf("%w: a batch lists %d run ids, at most %d: give a query instead", store.ErrInvalidArgument, len(parts), client.MaxBatchIDs)
	}
	ids := make([]uuid.UUID, 0, len(parts))
	for _, p := range parts {
		id, err := uuid.Parse(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%w: run_ids: %q is not a run id", store.ErrInvalidArgument, protocol.Echo(p))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// parseAttributes reads a set-attributes batch's attributes: a JSON object
// of name to value. Numbers keep their digits (json.Number), so an int
// attribute takes any 64-bit value; the store checks them against the
// declarations.
func parseAttributes(s string) (map[string]any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil || out == nil {
		return nil, fmt.Errorf("%w: attributes: want a JSON object of attribute names to values", store.ErrInvalidArgument)
	}
	return out, nil
}

// parseNames reads a list of names: a JSON array of strings, or names
// separated by commas or spaces (a form's input).
func parseNames(what, s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []string
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return nil, fmt.Errorf("%w: %s: want an array of names: %v", store.ErrInvalidArgument, what, err)
		}
		return out, nil
	}
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }), nil
}

// startBatch starts a batch (action, query or run_ids, reason, event,
// payload, attributes or attribute_names, rate), created by the console's
// user, else by "console".
func (c *Console) startBatch(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	by, _ := r.Context().Value(ctxUser).(string)
	if by == "" {
		by = "console"
	}
	// The query goes as given: the parser's positions are the user's.
	o := client.BatchOptions{Action: client.BatchAction(p["action"]), Query: p["query"], Reason: p["reason"], By: by,
		EventName: p["event"]}
	if o.RunIDs, err = parseRunIDs(p["run_ids"]); err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(p["rate"]); s != "" {
		if o.Rate, err = strconv.Atoi(s); err != nil || o.Rate < 1 {
			return nil, fmt.Errorf("%w: rate %q: want 1 to %d runs per second", store.ErrInvalidArgument, protocol.Echo(s), client.MaxBatchRate)
		}
	}
	if s := strings.TrimSpace(p["payload"]); s != "" {
		o.Payload = json.RawMessage(s)
	}
	if o.Attributes, err = parseAttributes(p["attributes"]); err != nil {
		return nil, err
	}
	if o.AttributeNames, err = parseNames("attribute_names", p["attribute_names"]); err != nil {
		return nil, err
	}
	b, err := cl.StartBatch(r.Context(), o)
	if err != nil {
		return nil, err
	}
	return batchView(b), nil
}

// batchAction pauses, resumes or cancels a batch and returns it.
func (c *Console) batchAction(action string) dataFunc {
	return func(r *http.Request, ns string) (any, error) {
		id, err := batchID(r)
		if err != nil {
			return nil, err
		}
		cl, err := c.client(ns)
		if err != nil {
			return nil, err
		}
		switch action {
		case "pause":
			err = cl.PauseBatch(r.Context(), id)
		case "resume":
			err = cl.ResumeBatch(r.Context(), id)
		case "cancel":
			err = cl.CancelBatch(r.Context(), id)
		}
		if err != nil {
			return nil, err
		}
		b, err := cl.GetBatch(r.Context(), id)
		if err != nil {
			return nil, err
		}
		return batchView(b), nil
	}
}

// BatchEvent is the stream's "batch" event: a batch moved or made
// progress (protocol.BatchChanged).
type BatchEvent struct {
	BatchID uuid.UUID `json:"batch_id"`
	State   string    `json:"state"`
	Moved   bool      `json:"moved,omitempty"`
}

// onBatch passes a batch's notice to the browsers of its namespace, which
// read the batch again; a message that does not decode is dropped.
func (h *hub) onBatch(m *nats.Msg) {
	var b protocol.BatchChanged
	if protocol.Decode(m.Data, &b) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.ns[b.Namespace]; ok {
		data, _ := json.Marshal(BatchEvent{BatchID: b.BatchID, State: b.State, Moved: b.Moved})
		h.broadcastLocked(st, "batch", data)
	}
}

// batchRoutes adds the batch pages and their JSON API to m.
func (c *Console) batchRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /batches", c.page("batches", c.batchesData))
	m.HandleFunc("GET /batches/{id}", c.page("batch", c.batchPageData))
	m.HandleFunc("GET /api/v1/batches", c.api(c.batchesData))
	m.HandleFunc("GET /api/v1/batches/{id}", c.api(c.batchData))
	m.HandleFunc("POST /api/v1/batches", c.api(c.startBatch))
	m.HandleFunc("POST /api/v1/batches/{id}/pause", c.api(c.batchAction("pause")))
	m.HandleFunc("POST /api/v1/batches/{id}/resume", c.api(c.batchAction("resume")))
	m.HandleFunc("POST /api/v1/batches/{id}/cancel", c.api(c.batchAction("cancel")))
}
