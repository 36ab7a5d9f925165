package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Event is a message sent to a run, consumed once by a WaitForEvent step.
type Event struct {
	ID         uuid.UUID
	Namespace  string
	RunID      uuid.UUID
	Name       string
	Payload    []byte
	CreatedAt  time.Time
	ConsumedAt *time.Time
	// ConsumedBy is the step id that consumed the event: a wait
	// (workflow.EventStepID) or a drain (workflow.EventDrainStepID).
	ConsumedBy string
	// Unreceived (EventsList only): the run ended without receiving the
	// event. Its workflow never waited for or drained it after it came (a
	// run's end is refused while an event it waits for or drains arrived
	// during the execution ending it; see RunsCompleteBatch). An event not
	// consumed by a live run is pending, not unreceived: a failed run
	// retried (RunsRetry) may still receive it.
	Unreceived bool
}

// eventsTargetByIDSQL, eventsTargetByExternalIDSQL and
// eventsTargetLastByExternalIDSQL find the run an event is sent to (see
// eventTarget).
var (
	eventsTargetByIDSQL             = stmt("EventsTargetByID")
	eventsTargetByExternalIDSQL     = stmt("EventsTargetByExternalID")
	eventsTargetLastByExternalIDSQL = stmt("EventsTargetLastByExternalID")
)

// eventTarget finds and locks the run an event is sent to. An external id
// names its live run (found through the partial unique index); only when
// there is none are finished runs searched, to tell a finished run from an
// unknown one.
func (s *Store) eventTarget(ctx context.Context, p EventsSendParams, out *SentEvent) error {
	var row pgx.Row
	if p.RunID != uuid.Nil {
		row = eventsTargetByIDSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "run_id": p.RunID})
	} else {
		row = eventsTargetByExternalIDSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "external_id": p.ExternalID})
	}
	err := row.Scan(&out.RunID, &out.RunStatus, &out.Queue)
	if isNoRows(err) && p.RunID == uuid.Nil {
		err = eventsTargetLastByExternalIDSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "external_id": p.ExternalID}).Scan(&out.RunID, &out.RunStatus, &out.Queue)
	}
	return mapErr("find run", err)
}

// EventsSendParams address an event to a run, by id or by external id.
type EventsSendParams struct {
	Namespace string
	// RunID or ExternalID names the run (exactly one). An external id names
	// the live run holding it, else the newest run that held it.
	RunID      uuid.UUID
	ExternalID string
	Name       string
	Payload    []byte
}

// SentEvent is a stored event and what it did to its run, so the caller
// can tell the run's queue it has work.
type SentEvent struct {
	Event
	// RunStatus and Queue are the run's, as the event found it.
	RunStatus RunStatus
	Queue     string
	// Woken reports that the run was waiting for this event and is now
	// claimable at once.
	Woken bool
}

// eventsSendSQL stores an event for a run (locked by the caller) and wakes
// the run if a wait of it expects the event. A run that is RUNNING counts
// the event (event_seq, see migration 019) and the event is stamped with the
// new count: it arrived during an execution, which its end must account for
// (RunsCompleteBatch). Any other run is stamped with its count as it is and
// its row is written only to wake it, so an event to a suspended run that
// does not wait for it costs no row version.
var eventsSendSQL = stmt("EventsSend")

// EventsSend stores an event for a run and, if the run is SLEEPING in a
// wait for an event of that name (a wait in progress: see EventsReceive),
// makes it claimable now. A run sleeping for anything else is left alone;
// it finds the event when it next waits for it. An unknown run is
// ErrNotFound; a finished run or a schedule template is ErrConflict.
//
// The run row is locked before anything is read, so a send and a
// concurrent EventsReceive serialise and the wait either sees the event or is
// seen waiting: no wakeup is lost.
func (s *Store) EventsSend(ctx context.Context, p EventsSendParams) (SentEvent, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return SentEvent{}, err
	}
	if err := checkEventName(p.Name); err != nil {
		return SentEvent{}, err
	}
	if (p.RunID == uuid.Nil) == (p.ExternalID == "") {
		return SentEvent{}, invalidf("name the run by run id or by external id, not both or neither")
	}
	if err := checkExternalID(p.ExternalID); err != nil {
		return SentEvent{}, err
	}
	if err := s.h.CheckPayload(ctx, "event payload", p.Payload); err != nil {
		return SentEvent{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return SentEvent{}, fmt.Errorf("generate event id: %w", err)
	}
	target := p.RunID.String()
	if p.RunID == uuid.Nil {
		target = fmt.Sprintf("with external id %q", p.ExternalID)
	}
	var out SentEvent
	err = s.InTx(ctx, func(tx *Store) error {
		if err := tx.eventTarget(ctx, p, &out); err != nil {
			return fmt.Errorf("send event to run %s: %w", target, err)
		}
		switch {
		case out.RunStatus.Terminal():
			return fmt.Errorf("send event to run %s: %w: the run is finished (%s)", out.RunID, ErrConflict, out.RunStatus)
		case out.RunStatus == StatusScheduled || out.RunStatus == StatusPaused:
			return fmt.Errorf("send event to run %s: %w: it is a schedule template; send to the runs it fires", out.RunID, ErrConflict)
		}
		// A new statement: its snapshot sees whatever a wait that held the
		// lock before us committed.
		err = eventsSendSQL.QueryRow(ctx, tx.h.DB,
			pgx.NamedArgs{"event_id": id, "namespace": p.Namespace, "run_id": out.RunID, "name": p.Name, "payload": p.Payload,
				"name_bytes": []byte(p.Name)}).Scan(&out.CreatedAt, &out.Woken)
		return mapErr(fmt.Sprintf("send event to run %s", out.RunID), err)
	})
	if err != nil {
		return SentEvent{}, err
	}
	out.ID, out.Namespace, out.Name, out.Payload = id, p.Namespace, p.Name, p.Payload
	return out, nil
}

// eventsConsumeSQL is EventsConsume's statement.
var eventsConsumeSQL = stmt("EventsConsume")

// EventsConsume consumes, under the lease, the oldest unconsumed event of
// that name sent to the run, for step stepID, and returns it. It is
// idempotent: if stepID already consumed an event of that name, that event
// is returned again and nothing else is consumed. With no event it is
// ErrNotFound.
func (s *Store) EventsConsume(ctx context.Context, l Lease, name, stepID string) (Event, error) {
	if err := checkEventName(name); err != nil {
		return Event{}, err
	}
	if stepID == "" || len(stepID) > maxNameLen {
		return Event{}, invalidf("step id must be 1 to %d bytes", maxNameLen)
	}
	// Concurrent consumers of one run (parallel waits for one name) skip
	// each other's pick instead of queueing on it.
	row := eventsConsumeSQL.QueryRow(ctx, s.h.DB, leaseArgs(l, pgx.NamedArgs{"name": name, "step_id": stepID}))
	var (
		held       bool
		id, runID  *uuid.UUID
		ns, nm, by *string
		payload    []byte
		created    *time.Time
		consumed   *time.Time
		fresh      *time.Time
	)
	if err := row.Scan(&held, &id, &ns, &runID, &nm, &payload, &created, &consumed, &by, &fresh); err != nil {
		return Event{}, mapErr("consume event", err)
	}
	if !held {
		return Event{}, s.leaseCheckDone(ctx, "consume event", l, "")
	}
	if id == nil {
		return Event{}, fmt.Errorf("consume event %q for run %s: %w", protocol.Echo(name), l.RunID, ErrNotFound)
	}
	ev := Event{ID: *id, Namespace: *ns, RunID: *runID, Name: *nm, Payload: payload, CreatedAt: *created, ConsumedAt: consumed}
	if by != nil {
		ev.ConsumedBy = *by
	}
	if fresh != nil {
		// The joined row is the statement's snapshot, from before the
		// update; the update's own values are the truth.
		ev.ConsumedAt, ev.ConsumedBy = fresh, stepID
	}
	return ev, nil
}

// eventsListSQL reads a run's events, joined to the run (one row of NULL
// events for a run without any).
var eventsListSQL = stmt("EventsList")

// EventsList returns every event sent to a run, oldest first, with
// payloads, each marked Unreceived if the run ended without it. An unknown
// run is ErrNotFound.
func (s *Store) EventsList(ctx context.Context, namespace string, runID uuid.UUID) ([]Event, error) {
	// The run is joined so an unknown run is told from one without events
	// in the same round trip, and an unreceived event from a pending one.
	rows, err := eventsListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": runID})
	if err != nil {
		return nil, mapErr("list events", err)
	}
	defer rows.Close()
	found := false
	out := []Event{}
	for rows.Next() {
		found = true
		var (
			id, rid    *uuid.UUID
			ns, nm, by *string
			payload    []byte
			created    *time.Time
			consumed   *time.Time
			unreceived *bool
		)
		if err := rows.Scan(&id, &ns, &rid, &nm, &payload, &created, &consumed, &by, &unreceived); err != nil {
			return nil, mapErr("list events", err)
		}
		if id == nil {
			continue
		}
		out = append(out, Event{ID: *id, Namespace: *ns, RunID: *rid, Name: *nm, Payload: payload,
			CreatedAt: *created, ConsumedAt: consumed, ConsumedBy: *by, Unreceived: unreceived != nil && *unreceived})
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list events", err)
	}
	if !found {
		return nil, fmt.Errorf("list events of run %s: %w", runID, ErrNotFound)
	}
	return out, nil
}

// EventStatus is what EventsReceive found for a wait.
type EventStatus string

// Event wait outcomes.
const (
	// EventReceived: an event was consumed; its payload is the step's output.
	EventReceived EventStatus = "RECEIVED"
	// EventTimedOut: no event came before the wait's timeout; the step
	// attempt is recorded FAILED (error type EventTimeout).
	EventTimedOut EventStatus = "TIMED_OUT"
	// EventWaiting: no event yet; the wait is recorded in progress (and the
	// run suspended, if asked).
	EventWaiting EventStatus = "WAITING"
)

// EventTimeoutType is the error type recorded on a timed-out EVENT step.
const EventTimeoutType = "EventTimeout"

// EventsReceiveParams describe one WaitForEvent reaching the engine.
type EventsReceiveParams struct {
	Lease Lease
	// StepID and Attempt name the EVENT step attempt of the wait.
	StepID  string
	Attempt int
	// Name is the awaited event's name.
	Name string
	// Until is the timeout of a new wait (nil: none). A wait already in
	// progress for this attempt keeps the timeout it was recorded with, so
	// replays do not extend it.
	Until     *time.Time
	StartedAt *time.Time
	// Suspend suspends the run (RunsWait) when there is no event yet.
	Suspend bool
}

// EventsReceiveResult is the outcome of EventsReceive.
type EventsReceiveResult struct {
	Status EventStatus
	// Payload of the received event (JSON; "null" for an empty payload, a
	// JSON string for one that is not JSON).
	Payload []byte
	// Ready: the run was suspended and is claimable at once (an event it
	// waits for arrived meanwhile).
	Ready bool
}

// eventsWaitStateSQL reads the state of a wait's step attempt, and its
// deadline.
var eventsWaitStateSQL = stmt("EventsWaitState")

// eventsReceivedSQL reads the run and the step attempt of a wait whose
// lease matched no run.
var eventsReceivedSQL = stmt("EventsReceived")

// EventsReceive settles a wait for an event under the lease, in one
// transaction (a savepoint inside the caller's): with the run row locked, it
// consumes the oldest unconsumed event of that name for the step and records
// the step attempt COMPLETED with the event's payload; failing that, if the
// wait's timeout passed, records the attempt FAILED (EventTimeoutType);
// failing that, records the wait in progress (the EVENT step attempt
// PENDING, the name as its input, its timeout as retry_at) and, with
// Suspend, suspends the run (RunsWait): EventsSend then wakes it.
//
// It is idempotent: an attempt already settled returns its outcome again,
// also after the run moved on under the same lease (a retried request).
func (s *Store) EventsReceive(ctx context.Context, p EventsReceiveParams) (EventsReceiveResult, error) {
	var res EventsReceiveResult
	if err := checkEventName(p.Name); err != nil {
		return res, err
	}
	sp := StepsRecordParams{Lease: p.Lease, StepID: p.StepID, Attempt: p.Attempt, Kind: StepEvent,
		Input: []byte(p.Name), StartedAt: p.StartedAt, Status: StepPending}
	if err := s.validateStep(ctx, &sp); err != nil {
		return res, err
	}
	if sp.StartedAt == nil {
		now := time.Now()
		sp.StartedAt = &now
	}
	held := true
	err := s.InTx(ctx, func(tx *Store) error {
		var one int
		err := runsWaitLockSQL.QueryRow(ctx, tx.h.DB, leaseArgs(p.Lease, pgx.NamedArgs{})).Scan(&one)
		if isNoRows(err) {
			held = false
			return nil
		}
		if err != nil {
			return mapErr("receive event", err)
		}
		var (
			st       *string
			out      []byte
			deadline *time.Time
			expired  bool
		)
		err = eventsWaitStateSQL.QueryRow(ctx, tx.h.DB,
			pgx.NamedArgs{"run_id": p.Lease.RunID, "step_id": p.StepID, "attempt": p.Attempt, "until": p.Until}).Scan(&st, &out, &deadline, &expired)
		if err != nil {
			return mapErr("receive event", err)
		}
		if st != nil && settled(StepStatus(*st), out, &res) {
			return nil
		}
		ev, err := tx.EventsConsume(ctx, p.Lease, p.Name, p.StepID)
		switch {
		case err == nil:
			res = EventsReceiveResult{Status: EventReceived, Payload: jsonPayload(ev.Payload)}
			done := sp
			done.Status, done.Output = StepCompleted, res.Payload
			return tx.StepsRecord(ctx, done)
		case !errors.Is(err, ErrNotFound):
			return err
		case expired:
			res = EventsReceiveResult{Status: EventTimedOut}
			failed := sp
			failed.Status, failed.ErrorType = StepFailed, EventTimeoutType
			failed.Error = fmt.Sprintf("no event %q before the wait's timeout", p.Name)
			return tx.StepsRecord(ctx, failed)
		}
		res = EventsReceiveResult{Status: EventWaiting}
		waiting := sp
		waiting.RetryAt = deadline
		if err := tx.StepsRecord(ctx, waiting); err != nil {
			return err
		}
		if !p.Suspend {
			return nil
		}
		res.Ready, err = tx.RunsWait(ctx, RunsWaitParams{Lease: p.Lease})
		return err
	})
	if err != nil || held {
		return res, err
	}
	// No running lease: a retry of a request that was applied before the
	// run moved on under the same lease gets the same answer.
	var (
		rst RunStatus
		tok int64
		st  *string
		out []byte
	)
	err = eventsReceivedSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": p.Lease.Namespace, "run_id": p.Lease.RunID, "step_id": p.StepID, "attempt": p.Attempt}).Scan(&rst, &tok, &st, &out)
	if err != nil {
		return res, mapErr(fmt.Sprintf("receive event for run %s", p.Lease.RunID), err)
	}
	if tok == p.Lease.Token && st != nil {
		if settled(StepStatus(*st), out, &res) {
			return res, nil
		}
		if rst == StatusSleeping && p.Suspend {
			return EventsReceiveResult{Status: EventWaiting}, nil
		}
	}
	return res, fmt.Errorf("receive event for run %s: %w (run is %s under lease %d, report names lease %d)",
		p.Lease.RunID, ErrLeaseLost, rst, tok, p.Lease.Token)
}

// settled fills res from an EVENT step attempt that already has an outcome.
func settled(st StepStatus, out []byte, res *EventsReceiveResult) bool {
	switch st {
	case StepCompleted:
		*res = EventsReceiveResult{Status: EventReceived, Payload: jsonPayload(out)}
		return true
	case StepFailed:
		*res = EventsReceiveResult{Status: EventTimedOut}
		return true
	}
	return false
}

// jsonPayload makes an event payload JSON: empty is null, and bytes that
// are not JSON become a JSON string.
func jsonPayload(p []byte) []byte {
	if len(p) == 0 {
		return []byte("null")
	}
	if json.Valid(p) {
		return p
	}
	b, _ := json.Marshal(string(p))
	return b
}
