package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrRunFinished is wrapped by the error of an update sent to, or a pause
// of, a run that is finished; it wraps ErrConflict.
var ErrRunFinished = fmt.Errorf("%w: the run is finished", ErrConflict)

// UpdatesSendParams address an update's request to a run. An update is an
// event (protocol.UpdateEventName) answered by a step (see package
// protocol, "update").
type UpdatesSendParams struct {
	Namespace string
	RunID     uuid.UUID
	// Name is the update's name (protocol.ValidUpdateName), not its
	// event's.
	Name    string
	Payload []byte
}

// UpdatesSend stores an update's request as the event
// protocol.UpdateEventName(p.Name) of a live run, and wakes the run if it
// waits for one (see EventsSend). The event's id is the update's id, which
// UpdatesAnswer takes. An unknown run is ErrNotFound; a finished run
// ErrRunFinished (an ErrConflict), a schedule template ErrConflict.
//
// The run's status is read with its row locked, in the transaction that
// inserts the request: a run that finishes concurrently either finishes
// first (and the update is refused) or after the request is stored (and
// UpdatesAnswer reports it finished without an answer). No update is
// swallowed unseen.
func (s *Store) UpdatesSend(ctx context.Context, p UpdatesSendParams) (SentEvent, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return SentEvent{}, err
	}
	if err := protocol.ValidUpdateName(p.Name); err != nil {
		return SentEvent{}, invalidf("%v", err)
	}
	if p.RunID == uuid.Nil {
		return SentEvent{}, invalidf("run id is required")
	}
	if err := s.h.CheckPayload(ctx, "update request", p.Payload); err != nil {
		return SentEvent{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return SentEvent{}, fmt.Errorf("generate update id: %w", err)
	}
	name := protocol.UpdateEventName(p.Name)
	var out SentEvent
	err = s.InTx(ctx, func(tx *Store) error {
		if err := tx.eventTarget(ctx, EventsSendParams{Namespace: p.Namespace, RunID: p.RunID}, &out); err != nil {
			return fmt.Errorf("update %q of run %s: %w", protocol.Echo(p.Name), p.RunID, err)
		}
		switch {
		case out.RunStatus.Terminal():
			return fmt.Errorf("update %q of run %s: %w (%s)", protocol.Echo(p.Name), out.RunID, ErrRunFinished, out.RunStatus)
		case out.RunStatus == StatusScheduled || out.RunStatus == StatusPaused:
			return fmt.Errorf("update %q of run %s: %w: it is a schedule template", protocol.Echo(p.Name), out.RunID, ErrConflict)
		}
		err = eventsSendSQL.QueryRow(ctx, tx.h.DB,
			pgx.NamedArgs{"event_id": id, "namespace": p.Namespace, "run_id": out.RunID, "name": name, "payload": p.Payload,
				"name_bytes": []byte(name)}).Scan(&out.CreatedAt, &out.Woken)
		return mapErr(fmt.Sprintf("update %q of run %s", p.Name, out.RunID), err)
	})
	if err != nil {
		return SentEvent{}, err
	}
	out.ID, out.Namespace, out.Name, out.Payload = id, p.Namespace, name, p.Payload
	return out, nil
}

// UpdateState is what became of an update: whether it was received, and
// its answer.
type UpdateState struct {
	ID    uuid.UUID
	RunID uuid.UUID
	// Name is the update's name.
	Name string
	// RunStatus is the run's status as read with the answer: a finished
	// run without an answer will never answer.
	RunStatus RunStatus
	// ReceivedBy is the EVENT step that received the request ("" while
	// it waits).
	ReceivedBy string
	// Answered: the answer step is recorded; Answer is its output (a
	// protocol.UpdateAnswer).
	Answered bool
	Answer   []byte
}

// updatesAnswerSQL reads an update's request, the step that received it
// and the answer step named after that one (protocol.UpdateStepID).
var updatesAnswerSQL = stmt("UpdatesAnswer")

// UpdatesAnswer reads what became of the update updateID (UpdatesSend's
// event id) of a run: received or not, and its answer once recorded. An
// unknown run, or an update it was not sent, is ErrNotFound.
func (s *Store) UpdatesAnswer(ctx context.Context, namespace string, runID, updateID uuid.UUID) (UpdateState, error) {
	out := UpdateState{ID: updateID, RunID: runID}
	var (
		found bool
		name  string
	)
	err := updatesAnswerSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{
		"namespace": namespace, "run_id": runID, "event_id": updateID,
		"event_prefix": protocol.UpdateEventPrefix, "event_step_prefix": protocol.UpdateEventStepPrefix,
		"step_prefix": protocol.UpdateStepPrefix, "cut": len(protocol.UpdateEventStepPrefix) + 1,
	}).Scan(&out.RunStatus, &found, &name, &out.ReceivedBy, &out.Answered, &out.Answer)
	if err != nil {
		return UpdateState{}, mapErr(fmt.Sprintf("read update %s of run %s", updateID, runID), err)
	}
	if !found {
		return UpdateState{}, fmt.Errorf("read update %s of run %s: %w: no such update", updateID, runID, ErrNotFound)
	}
	out.Name = name[len(protocol.UpdateEventPrefix):]
	return out, nil
}
