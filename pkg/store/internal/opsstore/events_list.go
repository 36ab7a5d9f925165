package opsstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PublishedEvent is a published event and the runs it started.
type PublishedEvent struct {
	ID          uuid.UUID
	Namespace   string
	Name        string
	Payload     json.RawMessage
	PublishedAt time.Time
	// FannedOutAt is nil until its runs are started (or it is given up).
	FannedOutAt *time.Time
	// FanOutAttempts counts its failed fan-outs, FanOutError is the last
	// one's error; FailedAt is set when it was given up after
	// MaxFanOutAttempts (no run started).
	FanOutAttempts int
	FanOutError    string
	FailedAt       *time.Time
	Firings        []TriggerFiring
}

// TriggerFiring is a run a trigger started for an event.
type TriggerFiring struct {
	TriggerID uuid.UUID
	// Trigger is the trigger's name (empty once it is deleted).
	Trigger string
	RunID   uuid.UUID
	FiredAt time.Time
}

// PublishedEventsListParams select a page of a namespace's published
// events.
type PublishedEventsListParams struct {
	Namespace string
	// Limit is the page size (0: DefaultPageSize, at most MaxPageSize).
	Limit int
	// After continues a previous page (its CreatedAt is the last event's
	// PublishedAt).
	After *Cursor
}

var (
	publishedEventsListSQL    = stmt("PublishedEventsList")
	triggerFiringsOfEventsSQL = stmt("TriggerFiringsOfEvents")
)

// PublishedEventsList lists a namespace's published events newest first,
// each with the runs it started, without payloads (PublishedEventsGet
// reads one whole). next is the cursor of the following page, nil after
// the last.
func (s *Ops) PublishedEventsList(ctx context.Context, p PublishedEventsListParams) (evs []PublishedEvent, next *Cursor, err error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return nil, nil, err
	}
	if p.Limit, err = pageLimit(p.Limit); err != nil {
		return nil, nil, err
	}
	args := pgx.NamedArgs{"namespace": p.Namespace, "limit": p.Limit + 1, "after_published_at": nil, "after_event_id": nil}
	if p.After != nil {
		args["after_published_at"], args["after_event_id"] = p.After.CreatedAt, p.After.ID
	}
	rows, err := publishedEventsListSQL.Query(ctx, s.h.DB, args)
	if err != nil {
		return nil, nil, mapErr("list events", err)
	}
	evs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PublishedEvent, error) {
		var e PublishedEvent
		err := r.Scan(&e.ID, &e.Namespace, &e.Name, &e.PublishedAt, &e.FannedOutAt, &e.FanOutAttempts, &e.FanOutError, &e.FailedAt)
		return e, err
	})
	if err != nil {
		return nil, nil, mapErr("list events", err)
	}
	if len(evs) > p.Limit {
		evs = evs[:p.Limit]
		last := evs[len(evs)-1]
		next = &Cursor{CreatedAt: last.PublishedAt, ID: last.ID}
	}
	if len(evs) == 0 {
		return evs, next, nil
	}
	ids := make([]uuid.UUID, len(evs))
	at := make(map[uuid.UUID]int, len(evs))
	for i, e := range evs {
		ids[i], at[e.ID] = e.ID, i
	}
	rows, err = triggerFiringsOfEventsSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"event_ids": ids})
	if err != nil {
		return nil, nil, mapErr("list firings", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ev uuid.UUID
			f  TriggerFiring
		)
		if err := rows.Scan(&ev, &f.TriggerID, &f.Trigger, &f.RunID, &f.FiredAt); err != nil {
			return nil, nil, mapErr("list firings", err)
		}
		evs[at[ev]].Firings = append(evs[at[ev]].Firings, f)
	}
	return evs, next, mapErr("list firings", rows.Err())
}
