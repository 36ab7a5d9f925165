package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// The bounds of a wait for a result (GET /v1/runs/{id}/result).
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 60 * time.Second
)

// Param is a path or query parameter of a route.
type Param struct {
	Name string
	// In is "path" or "query".
	In          string
	Description string
}

// Route is one entry of the route table: the mux serves it, the OpenAPI
// document describes it, and its scope is what a token needs.
type Route struct {
	Method, Path string
	// Scope is the scope a token needs; "" for a route without a token.
	Scope   string
	Summary string
	Params  []Param
	// Request and Response are values of the body types (Request nil: no
	// body); Status is the status of success.
	Request, Response any
	Status            int
	// Write refuses the route in read-only mode.
	Write  bool
	handle func(a *API, c *call) (int, any, error)
}

var (
	idParam = Param{Name: "id", In: "path", Description: "the run id"}
	nsParam = Param{Name: "ns", In: "query", Description: "the namespace; optional, must be the token's (403 otherwise)"}
)

// Routes is the route table.
func Routes() []Route {
	return []Route{
		{Method: "GET", Path: "/v1/openapi.json", Summary: "This OpenAPI document (no token needed)", Response: map[string]any{}, Status: http.StatusOK,
			handle: func(a *API, _ *call) (int, any, error) { return http.StatusOK, json.RawMessage(a.doc), nil }},
		{Method: "POST", Path: "/v1/runs", Scope: store.ScopeRunsStart, Summary: "Start a run (201; 200 with created false for the live run of its external id)",
			Params: []Param{nsParam}, Request: StartRequest{}, Response: StartResponse{}, Status: http.StatusCreated, Write: true, handle: startRun},
		{Method: "GET", Path: "/v1/runs", Scope: store.ScopeRunsRead, Summary: "List runs newest first, by a query of the filter language",
			Params: []Param{nsParam,
				{Name: "query", In: "query", Description: "a query, e.g. status = 'FAILED' AND type = 'Charge' (docs/filters.md)"},
				{Name: "status", In: "query", Description: "comma-separated statuses"},
				{Name: "type", In: "query", Description: "the workflow type"},
				{Name: "queue", In: "query", Description: "the queue"},
				{Name: "limit", In: "query", Description: fmt.Sprintf("page size, default %d, at most %d", client.DefaultPageSize, client.MaxPageSize)},
				{Name: "cursor", In: "query", Description: "the next cursor of the previous page"}},
			Response: RunsPage{}, Status: http.StatusOK, handle: listRuns},
		{Method: "GET", Path: "/v1/runs/{id}", Scope: store.ScopeRunsRead, Summary: "Get a run with its input and output",
			Params: []Param{idParam, nsParam}, Response: RunView{}, Status: http.StatusOK, handle: getRun},
		{Method: "GET", Path: "/v1/runs/{id}/result", Scope: store.ScopeRunsRead,
			Summary: "Wait for a run to finish (long poll, woken by the run's end), for at most timeout",
			Params: []Param{idParam, nsParam,
				{Name: "timeout", In: "query", Description: fmt.Sprintf("a Go duration, default %s, at most %s; done is false when it passes first", DefaultWait, MaxWait)}},
			Response: ResultResponse{}, Status: http.StatusOK, handle: waitRun},
		{Method: "POST", Path: "/v1/runs/{id}/events", Scope: store.ScopeEventsSend, Summary: "Send an event to a run",
			Params: []Param{idParam, nsParam}, Request: EventRequest{}, Response: EventResponse{}, Status: http.StatusOK, Write: true, handle: sendEvent},
		{Method: "POST", Path: "/v1/runs/{id}/cancel", Scope: store.ScopeRunsCancel, Summary: "Cancel a live run (409 for a finished one)",
			Params: []Param{idParam, nsParam}, Response: CancelResponse{}, Status: http.StatusOK, Write: true, handle: cancelRun},
		{Method: "POST", Path: "/v1/events", Scope: store.ScopeEventsPublish, Summary: "Publish an event: every matching trigger starts a run (201; 200 for an event id published before)",
			Params: []Param{nsParam}, Request: PublishRequest{}, Response: PublishResponse{}, Status: http.StatusCreated, Write: true, handle: publish},
	}
}

func pathID(c *call) (uuid.UUID, error) {
	id, err := uuid.Parse(c.r.PathValue("id"))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: %q is not a run id", store.ErrInvalidArgument, c.r.PathValue("id"))
	}
	return id, nil
}

// orNull is a JSON value, null when absent.
func orNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}

func startRun(_ *API, c *call) (int, any, error) {
	var req StartRequest
	if err := decode(c, &req); err != nil {
		return 0, nil, err
	}
	o := client.StartOptions{Queue: req.Queue, Version: req.Version, ExternalID: req.ExternalID, Priority: req.Priority,
		ConcurrencyKey: req.ConcurrencyKey, RateLimitKey: req.RateLimitKey, RequireWorker: req.RequireWorker, TraceParent: req.TraceParent}
	var err error
	if o.IDReusePolicy, err = client.ParseIDReusePolicy(req.IDReusePolicy); err != nil {
		return 0, nil, err
	}
	if req.IDReuseWindow != "" {
		if o.IDReuseWindow, err = time.ParseDuration(req.IDReuseWindow); err != nil {
			return 0, nil, fmt.Errorf("%w: id_reuse_window %q is not a duration", store.ErrInvalidArgument, req.IDReuseWindow)
		}
	}
	if req.Deadline != nil {
		o.Deadline = *req.Deadline
	}
	if req.StartAt != nil {
		o.StartAt = *req.StartAt
	}
	h, err := c.cl.Start(c.r.Context(), req.Type, orNull(req.Input), o)
	if err != nil {
		return 0, nil, err
	}
	code := http.StatusCreated
	if !h.Created {
		code = http.StatusOK
	}
	return code, StartResponse{RunID: h.RunID, Created: h.Created, Warnings: h.Warnings}, nil
}

func getRun(_ *API, c *call) (int, any, error) {
	id, err := pathID(c)
	if err != nil {
		return 0, nil, err
	}
	r, err := c.cl.Get(c.r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, runView(r), nil
}

// waitRun waits for the run's end with client.Wait, which subscribes to
// the run's finish event and reads Postgres only when woken; a run that
// continued as new is followed, as Handle.Result does.
func waitRun(_ *API, c *call) (int, any, error) {
	id, err := pathID(c)
	if err != nil {
		return 0, nil, err
	}
	wait := DefaultWait
	if s := c.r.URL.Query().Get("timeout"); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait <= 0 || wait > MaxWait {
			return 0, nil, fmt.Errorf("%w: timeout %q: a duration above 0 and at most %s", store.ErrInvalidArgument, s, MaxWait)
		}
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), wait)
	defer cancel()
	r, err := c.cl.Wait(ctx, id)
	for err == nil && r.Status == client.StatusCompleted && r.ContinuedAs != nil {
		r, err = c.cl.Wait(ctx, *r.ContinuedAs)
	}
	if errors.Is(err, context.DeadlineExceeded) && c.r.Context().Err() == nil {
		if r == nil {
			r = &client.Run{ID: id}
		}
		cur, gerr := c.cl.Get(c.r.Context(), r.ID)
		if gerr != nil {
			return 0, nil, gerr
		}
		return http.StatusOK, ResultResponse{Done: false, Run: runView(cur)}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ResultResponse{Done: true, Run: runView(r)}, nil
}

func listRuns(_ *API, c *call) (int, any, error) {
	q := c.r.URL.Query()
	o := client.ListOptions{Query: q.Get("query"), Type: q.Get("type"), Queue: q.Get("queue"), Cursor: q.Get("cursor")}
	for _, s := range strings.Split(q.Get("status"), ",") {
		if s = strings.ToUpper(strings.TrimSpace(s)); s != "" {
			o.Statuses = append(o.Statuses, client.RunStatus(s))
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > client.MaxPageSize {
			return 0, nil, fmt.Errorf("%w: limit %q: from 1 to %d", store.ErrInvalidArgument, l, client.MaxPageSize)
		}
		o.Limit = n
	}
	runs, next, err := c.cl.List(c.r.Context(), o)
	if err != nil {
		return 0, nil, err
	}
	page := RunsPage{Runs: make([]RunView, len(runs)), Next: next}
	for i := range runs {
		page.Runs[i] = runView(&runs[i])
	}
	return http.StatusOK, page, nil
}

func sendEvent(_ *API, c *call) (int, any, error) {
	id, err := pathID(c)
	if err != nil {
		return 0, nil, err
	}
	var req EventRequest
	if err := decode(c, &req); err != nil {
		return 0, nil, err
	}
	ev, err := c.cl.SendEvent(c.r.Context(), id, req.Name, orNull(req.Payload))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, EventResponse{EventID: ev.ID, RunID: ev.RunID, Name: ev.Name, CreatedAt: ev.CreatedAt, Woken: ev.Woken}, nil
}

func cancelRun(_ *API, c *call) (int, any, error) {
	id, err := pathID(c)
	if err != nil {
		return 0, nil, err
	}
	if err := c.cl.Cancel(c.r.Context(), id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, CancelResponse{RunID: id, Cancelled: true}, nil
}

func publish(_ *API, c *call) (int, any, error) {
	var req PublishRequest
	if err := decode(c, &req); err != nil {
		return 0, nil, err
	}
	var o client.PublishOptions
	if req.EventID != nil {
		o.EventID = *req.EventID
	}
	p, err := c.cl.Publish(c.r.Context(), req.Name, orNull(req.Payload), o)
	if err != nil {
		return 0, nil, err
	}
	code := http.StatusCreated
	if !p.Created {
		code = http.StatusOK
	}
	return code, PublishResponse{EventID: p.EventID, Created: p.Created}, nil
}
