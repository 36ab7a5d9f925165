package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/filter"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Event triggers (docs/triggers.md): a trigger subscribes a workflow type
// to the events of its namespace whose names match its pattern; an event
// published once (PublishedEventsAdd) starts one run per matching trigger
// (PublishedEventsFanOut, done by the reaper's leader), exactly once per
// (event, trigger), whoever fans it out and however often.

// Limits of triggers and published events.
const (
	// MaxTriggers bounds the triggers of one namespace.
	MaxTriggers = 1000
	// MaxTriggerNameLen bounds a trigger's name (it goes into the external
	// id of the runs it starts, see TriggerExternalID).
	MaxTriggerNameLen = 100
	// MaxEventPatternLen bounds a trigger's pattern and a published
	// event's name.
	MaxEventPatternLen = protocol.MaxNameLen
)

// ErrEventPattern is a malformed event pattern or published event name;
// it is an ErrInvalidArgument.
var ErrEventPattern = core.ErrEventPattern

// ErrTriggerFilter is a trigger filter that does not parse or check (at
// most filter.MaxLength bytes); it is an ErrInvalidArgument.
var ErrTriggerFilter = fmt.Errorf("%w: trigger filter", ErrInvalidArgument)

// Trigger subscribes a workflow type to published events.
type Trigger struct {
	ID        uuid.UUID
	Namespace string
	// Name is unique in the namespace.
	Name string
	// Pattern matches event names: dot-separated tokens, where "*"
	// matches one token and a last ">" one or more.
	Pattern string
	// Type and Queue are the workflow type and queue of the runs it
	// starts.
	Type  string
	Queue string
	// InputPath, if set, is the top-level key of the event's payload
	// whose value is the run's input (null when the payload has none);
	// empty: the whole payload is.
	InputPath string
	// Filter, if set, is a query (package filter) the event's payload must
	// match (filter.Match) for the trigger to fire.
	Filter string
	// Batch, if set, makes each matching event an item of a start batch
	// (docs/batching.md) instead of a run.
	Batch     *StartBatch
	CreatedAt time.Time
}

var (
	triggersCreateSQL               = stmt("TriggersCreate")
	triggersListSQL                 = stmt("TriggersList")
	triggersDeleteSQL               = stmt("TriggersDelete")
	publishedEventsAddSQL           = stmt("PublishedEventsAdd")
	publishedEventsPendingSQL       = stmt("PublishedEventsPending")
	publishedEventsLockSQL          = stmt("PublishedEventsLock")
	publishedEventsGetSQL           = stmt("PublishedEventsGet")
	publishedEventsMarkFannedOutSQL = stmt("PublishedEventsMarkFannedOut")
	triggerFiringsAddSQL            = stmt("TriggerFiringsAdd")
	triggerFiringsListSQL           = stmt("TriggerFiringsList")
)

// Event names and patterns (see core.CheckEventPattern).
var (
	// CheckEventPattern checks a trigger's pattern (ErrEventPattern).
	CheckEventPattern = core.CheckEventPattern
	// CheckPublishedEventName checks a published event's name: dotted
	// tokens without wildcards (ErrEventPattern).
	CheckPublishedEventName = core.CheckPublishedEventName
	// PatternMatches reports whether an event name matches a pattern.
	PatternMatches = core.PatternMatches
)

// TriggersCreate adds a trigger. A name the namespace has already is
// ErrConflict; bad input (ErrEventPattern for the pattern) or a namespace
// at MaxTriggers is ErrInvalidArgument. A refusal stores nothing.
func (s *Store) TriggersCreate(ctx context.Context, t Trigger) (Trigger, error) {
	for _, c := range []struct{ what, v string }{{"namespace", t.Namespace}, {"trigger name", t.Name},
		{"workflow type", t.Type}, {"queue", t.Queue}} {
		if err := protocol.ValidToken(c.what, c.v); err != nil {
			return Trigger{}, invalidf("%v", err)
		}
	}
	if len(t.Name) > MaxTriggerNameLen {
		return Trigger{}, invalidf("trigger name is %d bytes, at most %d", len(t.Name), MaxTriggerNameLen)
	}
	if err := CheckEventPattern(t.Pattern); err != nil {
		return Trigger{}, err
	}
	if t.InputPath != "" {
		if err := protocol.ValidToken("input path", t.InputPath); err != nil {
			return Trigger{}, invalidf("%v", err)
		}
	}
	t.Filter = strings.TrimSpace(t.Filter)
	if !utf8.ValidString(t.Filter) || strings.IndexFunc(t.Filter, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }) >= 0 {
		return Trigger{}, fmt.Errorf("%w: a filter holds text: no control characters but tabs and newlines", ErrTriggerFilter)
	}
	if _, err := parseTriggerFilter(t.Filter); err != nil {
		return Trigger{}, fmt.Errorf("%w: %w", ErrTriggerFilter, err)
	}
	var bk, bs, bw any
	if b := t.Batch; b != nil {
		if err := b.Check(); err != nil {
			return Trigger{}, err
		}
		bk, bs, bw = b.Key, b.MaxSize, b.MaxWait.Milliseconds()
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Trigger{}, fmt.Errorf("generate trigger id: %w", err)
	}
	t.ID = id
	path, flt := &t.InputPath, &t.Filter
	if t.InputPath == "" {
		path = nil
	}
	if t.Filter == "" {
		flt = nil
	}
	err = triggersCreateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"trigger_id": id, "namespace": t.Namespace, "name": t.Name,
		"pattern": t.Pattern, "workflow_type": t.Type, "queue": t.Queue, "input_path": path, "filter": flt, "max_triggers": MaxTriggers,
		"batch_key": bk, "batch_max_size": bs, "batch_max_wait_ms": bw}).Scan(&t.CreatedAt)
	if isNoRows(err) {
		// A name taken, or the namespace full: tell which.
		ts, lerr := s.TriggersList(ctx, t.Namespace)
		if lerr != nil {
			return Trigger{}, lerr
		}
		for _, o := range ts {
			if o.Name == t.Name {
				return Trigger{}, fmt.Errorf("%w: trigger %q exists in namespace %q", ErrConflict, t.Name, t.Namespace)
			}
		}
		return Trigger{}, invalidf("namespace %q has %d triggers, at most %d", t.Namespace, len(ts), MaxTriggers)
	}
	return t, mapErr("create trigger", err)
}

// TriggersList returns the triggers of a namespace by name.
func (s *Store) TriggersList(ctx context.Context, ns string) ([]Trigger, error) {
	rows, err := triggersListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns})
	if err != nil {
		return nil, mapErr("list triggers", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trigger, error) {
		var (
			t Trigger
			b StartBatch
			w int64
		)
		err := r.Scan(&t.ID, &t.Namespace, &t.Name, &t.Pattern, &t.Type, &t.Queue, &t.InputPath, &t.Filter, &t.CreatedAt, &b.Key, &b.MaxSize, &w)
		if b.MaxSize > 0 {
			b.MaxWait, t.Batch = time.Duration(w)*time.Millisecond, &b
		}
		return t, err
	})
	return ts, mapErr("list triggers", err)
}

// TriggersDelete removes a trigger (ErrNotFound if there is none). Events
// published before that are not fanned out yet start no run of it.
func (s *Store) TriggersDelete(ctx context.Context, ns, name string) error {
	tag, err := triggersDeleteSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "name": name})
	if err != nil {
		return mapErr("delete trigger", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("trigger %q in namespace %q: %w", protocol.Echo(name), ns, ErrNotFound)
	}
	return nil
}

// PublishParams are an event to publish.
type PublishParams struct {
	Namespace string
	// ID is the caller's idempotency key; zero: a UUID v7 is made.
	ID      uuid.UUID
	Name    string
	Payload []byte // JSON; empty is null
}

// Published is what PublishedEventsAdd did.
type Published struct {
	ID uuid.UUID
	// Created is false when an event with this id was published already:
	// nothing was added.
	Created bool
}

// PublishedEventsAdd publishes an event: it stores it, to be fanned out to
// the namespace's matching triggers, and notifies. An id published
// already adds nothing and returns Created false, whatever the name and
// payload; an id of another namespace's event, or of one with another
// name, is ErrConflict (a key reused by mistake). Bad input is
// ErrInvalidArgument (ErrEventPattern for the name), a payload above the
// limit ErrPayloadTooLarge; a refusal stores nothing.
func (s *Store) PublishedEventsAdd(ctx context.Context, p PublishParams) (Published, error) {
	if err := protocol.ValidToken("namespace", p.Namespace); err != nil {
		return Published{}, invalidf("%v", err)
	}
	if err := CheckPublishedEventName(p.Name); err != nil {
		return Published{}, err
	}
	if len(p.Payload) == 0 {
		p.Payload = []byte("null")
	}
	if !json.Valid(p.Payload) {
		return Published{}, invalidf("event payload is not JSON")
	}
	if err := s.h.CheckPayload(ctx, "event payload", p.Payload); err != nil {
		return Published{}, err
	}
	if p.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return Published{}, fmt.Errorf("generate event id: %w", err)
		}
		p.ID = id
	}
	var (
		ns, name string
		created  bool
	)
	err := publishedEventsAddSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"event_id": p.ID, "namespace": p.Namespace,
		"name": p.Name, "payload": p.Payload}).Scan(&ns, &name, &created)
	if err != nil {
		return Published{}, mapErr("publish event", err)
	}
	if ns != p.Namespace || name != p.Name {
		return Published{}, fmt.Errorf("%w: event id %s was published as another event", ErrConflict, p.ID)
	}
	return Published{ID: p.ID, Created: created}, nil
}

// PublishedEventsPending returns up to limit events not fanned out yet,
// oldest first.
func (s *Store) PublishedEventsPending(ctx context.Context, limit int) ([]uuid.UUID, error) {
	rows, err := publishedEventsPendingSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return nil, mapErr("read events to fan out", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return ids, mapErr("read events to fan out", err)
}

// PublishedEventsGet returns a published event with its firings.
func (s *Store) PublishedEventsGet(ctx context.Context, ns string, id uuid.UUID) (PublishedEvent, error) {
	var e PublishedEvent
	err := publishedEventsGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "event_id": id}).
		Scan(&e.ID, &e.Namespace, &e.Name, &e.Payload, &e.PublishedAt, &e.FannedOutAt, &e.FanOutAttempts, &e.FanOutError, &e.FailedAt)
	if err != nil {
		return e, mapErr(fmt.Sprintf("get event %s", id), err)
	}
	rows, err := triggerFiringsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"event_id": id})
	if err != nil {
		return e, mapErr("list firings", err)
	}
	e.Firings, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TriggerFiring, error) {
		var f TriggerFiring
		err := r.Scan(&f.TriggerID, &f.Trigger, &f.RunID, &f.FiredAt)
		return f, err
	})
	return e, mapErr("list firings", err)
}

// TriggerExternalID is the external id of the run a trigger starts for an
// event: it links the run back to both, where `kagzi run show` and
// RunsGetByExternalID find it.
func TriggerExternalID(trigger string, event uuid.UUID) string {
	return "trigger:" + trigger + ":" + event.String()
}

// FanOut is what PublishedEventsFanOut did.
type FanOut struct {
	// Started are the runs started now, one per matching trigger not
	// fired before.
	Started []TriggerFiring
	// Done is true when the event was fanned out before: nothing was
	// started.
	Done bool
}

// PublishedEventsFanOut fans out one event, in one transaction: it locks
// the event, and unless it is fanned out already, starts a run
// (RunsCreate) for each trigger of its namespace whose pattern matches the
// event's name and whose filter (if any) its payload, records each firing
// with it, and marks the event fanned out. Fan-outs of one event that race
// wait on the lock, and the firings' primary key refuses a second run for
// an (event, trigger) regardless: a run per pair, exactly once. A trigger whose run is refused (its type or
// queue no longer valid, say) fails the whole fan-out, to be tried again.
func (s *Store) PublishedEventsFanOut(ctx context.Context, id uuid.UUID) (FanOut, error) {
	var out FanOut
	err := s.InTx(ctx, func(tx *Store) error {
		out = FanOut{}
		var (
			ns, name string
			payload  []byte
			done     bool
		)
		err := publishedEventsLockSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"event_id": id}).Scan(&ns, &name, &payload, &done)
		if err != nil {
			return mapErr(fmt.Sprintf("fan out event %s", id), err)
		}
		if done {
			out.Done = true
			return nil
		}
		ts, err := tx.TriggersList(ctx, ns)
		if err != nil {
			return err
		}
		var doc any // the payload, decoded for the first filter
		for _, t := range ts {
			if !PatternMatches(t.Pattern, name) || !filterMatches(t, payload, &doc) {
				continue
			}
			if t.Batch != nil { // an item, once per (event, trigger) by its unique index
				if _, err := tx.StartBatchesAdd(ctx, StartBatchAddParams{Namespace: ns, Queue: t.Queue, Type: t.Type, Batch: *t.Batch,
					Payload: core.TriggerInputAt(payload, t.InputPath), EventID: id, TriggerID: t.ID}); err != nil {
					return fmt.Errorf("fan out event %s to trigger %q: %w", id, t.Name, err)
				}
				continue
			}
			f, err := tx.fire(ctx, t, id, payload)
			if err != nil {
				return fmt.Errorf("fan out event %s to trigger %q: %w", id, t.Name, err)
			}
			out.Started = append(out.Started, f)
		}
		_, err = publishedEventsMarkFannedOutSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"event_id": id})
		return mapErr("mark event fanned out", err)
	})
	if err != nil {
		return FanOut{}, err
	}
	return out, nil
}

// parseTriggerFilter parses and checks a trigger's filter (nil: none).
func parseTriggerFilter(q string) (filter.Expr, error) {
	e, err := filter.Parse(q)
	if err == nil {
		err = filter.CheckJSON(e)
	}
	return e, err
}

// filterMatches reports whether t's filter matches payload, decoded into
// *doc once per event. A filter checked at creation always parses; one
// that no longer does (a grammar changed) matches nothing rather than
// hold the event's fan-out for ever.
func filterMatches(t Trigger, payload []byte, doc *any) bool {
	e, err := parseTriggerFilter(t.Filter)
	if err != nil || e == nil {
		return err == nil
	}
	if *doc == nil {
		if *doc, err = filter.DecodeJSON(payload); err != nil {
			return false
		}
	}
	return filter.Match(e, *doc)
}

// fire starts trigger t's run for an event and records the firing. The
// caller holds the event's lock, and a fan-out that fired marks the event
// in the same transaction, so no firing of the event exists yet; the
// primary key still refuses a second one (the fan-out fails whole). A
// live run that holds the run's external id already (started by hand with
// it) stands for the firing.
func (s *Store) fire(ctx context.Context, t Trigger, event uuid.UUID, payload []byte) (TriggerFiring, error) {
	input := core.TriggerInputAt(payload, t.InputPath)
	run, _, err := s.RunsCreate(ctx, RunsCreateParams{Namespace: t.Namespace, Queue: t.Queue, Type: t.Type,
		ExternalID: TriggerExternalID(t.Name, event), Input: input})
	if err != nil {
		return TriggerFiring{}, err
	}
	f := TriggerFiring{TriggerID: t.ID, Trigger: t.Name, RunID: run.ID}
	err = triggerFiringsAddSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"event_id": event, "trigger_id": t.ID, "run_id": run.ID}).Scan(&f.FiredAt)
	if isNoRows(err) {
		return TriggerFiring{}, fmt.Errorf("%w: trigger %q fired for event %s already", ErrConflict, t.Name, event)
	}
	return f, mapErr("record firing", err)
}
