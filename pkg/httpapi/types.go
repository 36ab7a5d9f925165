package httpapi

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
)

// StartRequest is the body of POST /v1/runs: client.Start's arguments.
type StartRequest struct {
	// Type is the workflow type (required).
	Type string `json:"type"`
	// Input is the run's input, any JSON (default null).
	Input json.RawMessage `json:"input,omitempty"`
	// Queue overrides the default queue.
	Queue string `json:"queue,omitempty"`
	// Version pins the workflow version.
	Version string `json:"version,omitempty"`
	// ExternalID makes the start idempotent: while a run with this id is
	// live, starting again returns it (200, created false).
	ExternalID string `json:"external_id,omitempty"`
	// IDReusePolicy says whether ExternalID may name a new run once runs
	// that held it ended: "" (allow), "failed-only", "reject", "terminate".
	IDReusePolicy string `json:"id_reuse_policy,omitempty"`
	// IDReuseWindow bounds how long ago such a run ended to count, as a Go
	// duration ("24h").
	IDReuseWindow string `json:"id_reuse_window,omitempty"`
	// Priority: higher is claimed first.
	Priority int `json:"priority,omitempty"`
	// Deadline fails the run if it has not finished by then.
	Deadline *time.Time `json:"deadline,omitempty"`
	// StartAt delays the first execution.
	StartAt *time.Time `json:"start_at,omitempty"`
	// ConcurrencyKey and RateLimitKey are the run's flow control keys.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	RateLimitKey   string `json:"rate_limit_key,omitempty"`
	// RequireWorker refuses the start (409) when no live worker serves
	// the type on the queue.
	RequireWorker bool `json:"require_worker,omitempty"`
	// TraceParent is a W3C traceparent to join the run to.
	TraceParent string `json:"traceparent,omitempty"`
}

// StartResponse is a started run.
type StartResponse struct {
	RunID uuid.UUID `json:"run_id"`
	// Created is false when the start returned the live run of its
	// external id.
	Created bool `json:"created"`
	// Warnings are what a caller should know of the start (no live
	// worker serves the type).
	Warnings []string `json:"warnings,omitempty"`
}

// RunView is a run as the API shows it.
type RunView struct {
	RunID       uuid.UUID       `json:"run_id"`
	Namespace   string          `json:"namespace"`
	Type        string          `json:"type"`
	Queue       string          `json:"queue"`
	Version     string          `json:"version,omitempty"`
	ExternalID  string          `json:"external_id,omitempty"`
	Status      string          `json:"status"`
	Attempts    int             `json:"attempts"`
	Error       string          `json:"error,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	ContinuedAs *uuid.UUID      `json:"continued_as,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
}

func runView(r *client.Run) RunView {
	return RunView{RunID: r.ID, Namespace: r.Namespace, Type: r.Type, Queue: r.Queue, Version: r.Version, ExternalID: r.ExternalID,
		Status: string(r.Status), Attempts: r.Attempts, Error: r.Error, Priority: r.Priority, CreatedAt: r.CreatedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, ContinuedAs: r.ContinuedAs, Input: raw(r.Input), Output: raw(r.Output)}
}

func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// ResultResponse is the answer of a wait for a run's result.
type ResultResponse struct {
	// Done is true when the run finished (COMPLETED, FAILED or
	// CANCELLED) within the wait; false when the wait's timeout passed
	// first (Run is then the run as it is).
	Done bool    `json:"done"`
	Run  RunView `json:"run"`
}

// RunsPage is a page of runs, newest first.
type RunsPage struct {
	Runs []RunView `json:"runs"`
	// Next is the cursor of the next page, "" on the last.
	Next string `json:"next,omitempty"`
}

// EventRequest is the body of POST /v1/runs/{id}/events.
type EventRequest struct {
	// Name is the event's name (required).
	Name string `json:"name"`
	// Payload is any JSON (default null).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventResponse is an event sent to a run.
type EventResponse struct {
	EventID   uuid.UUID `json:"event_id"`
	RunID     uuid.UUID `json:"run_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// Woken is true when the run was waiting for the event and is now
	// claimable at once.
	Woken bool `json:"woken"`
}

// PublishRequest is the body of POST /v1/events.
type PublishRequest struct {
	// Name is the event's dot-separated name (required).
	Name string `json:"name"`
	// Payload is any JSON (default null).
	Payload json.RawMessage `json:"payload,omitempty"`
	// EventID is the idempotency key; absent, one is made.
	EventID *uuid.UUID `json:"event_id,omitempty"`
}

// PublishResponse is a published event.
type PublishResponse struct {
	EventID uuid.UUID `json:"event_id"`
	// Created is false when the id was published before.
	Created bool `json:"created"`
}

// CancelResponse is a cancelled run.
type CancelResponse struct {
	RunID     uuid.UUID `json:"run_id"`
	Cancelled bool      `json:"cancelled"`
}
