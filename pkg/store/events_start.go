package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
)

// EventsSendWithStartParams describe an event for the live run with an
// external id, and the run to start when there is none.
type EventsSendWithStartParams struct {
	// Run is the run to start; its Namespace and ExternalID (required)
	// name the live run the event is for, and its Type must be that run's.
	Run RunsCreateParams
	// Name and Payload are the event's.
	Name    string
	Payload []byte
}

// SentWithStart is the outcome of EventsSendWithStart: the stored event,
// with the status and queue of its run as the event found it (PENDING on
// the run's queue for a run just started).
type SentWithStart struct {
	SentEvent
	// Started reports that the run was started by this call.
	Started bool
}

// eventsWithStartTargetSQL finds and locks the live run holding an external id.
// A concurrent transition to a final status that commits first makes the
// row fail the status check once the lock is granted (Postgres re-checks
// the updated row), so a run found here stays live until the event is in.
var eventsWithStartTargetSQL = stmt("EventsWithStartTarget")

// sendWithStartTries bounds how often the live run of an external id is
// looked for and a start attempted: each round fails only if a run that
// held the id finished between the two, so three rounds failing is a run
// started and ended over and over meanwhile.
const sendWithStartTries = 3

// EventsSendWithStart sends an event to the live run holding an external id
// (as EventsSend does: a run waiting for that name is woken), starting the
// run first (as RunsCreate does) if no live run holds the id, all in one
// transaction: the event is stored on a run that was live when it was
// stored, and callers racing for one id end with one run holding all their
// events. A finished run with the id does not count: a new run starts.
//
// A live run of another workflow type than p.Run.Type is ErrConflict and
// nothing is stored; so is a schedule template. The run's other options
// (queue, version, input, …) apply only to a run this call starts;
// RequireWorker too (ErrNoWorker, nothing stored). The caller's
// transaction, if any, must be READ COMMITTED (the default): a
// concurrent starter's run is found by a later statement's snapshot.
func (s *Store) EventsSendWithStart(ctx context.Context, p EventsSendWithStartParams) (SentWithStart, error) {
	if p.Run.ExternalID == "" {
		return SentWithStart{}, invalidf("signal-with-start needs an external id")
	}
	if p.Run.ScheduleID != nil || p.Run.ParentRunID != nil {
		return SentWithStart{}, invalidf("signal-with-start starts top-level runs only")
	}
	if runstore.Flow(p.Run) {
		return SentWithStart{}, invalidf("signal-with-start takes no debounce or id reuse policy")
	}
	if err := checkEventName(p.Name); err != nil {
		return SentWithStart{}, err
	}
	policy, err := s.validateCreate(ctx, &p.Run)
	if err != nil {
		return SentWithStart{}, err
	}
	if err := s.h.CheckPayload(ctx, "event payload", p.Payload); err != nil {
		return SentWithStart{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return SentWithStart{}, fmt.Errorf("generate event id: %w", err)
	}
	r := p.Run
	what := fmt.Sprintf("signal-with-start of run with external id %q", r.ExternalID)
	var out SentWithStart
	err = s.InTx(ctx, func(tx *Store) error {
		for try := 0; try < sendWithStartTries; try++ {
			found, err := tx.eventsLiveTarget(ctx, r, &out)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if !found {
				// No live run: start one. A concurrent starter's insert
				// that is not committed yet makes this one wait for it on
				// the unique index, then skip the row if it committed; the
				// next round finds its run, now visible, and locks it.
				inserted, err := tx.runsInsert(ctx, []RunsCreateParams{r}, [][]byte{policy}, []int{0})
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				run, ok := inserted[r.RunID]
				if !ok {
					continue
				}
				out.RunID, out.RunStatus, out.Queue, out.Started = run.ID, run.Status, run.Queue, true
			}
			// A new statement: its snapshot sees whatever a wait that held
			// the run's lock before us committed (see EventsSend).
			err = eventsSendSQL.QueryRow(ctx, tx.h.DB,
				pgx.NamedArgs{"event_id": id, "namespace": r.Namespace, "run_id": out.RunID, "name": p.Name, "payload": p.Payload,
					"name_bytes": []byte(p.Name)}).Scan(&out.CreatedAt, &out.Woken)
			return mapErr(what, err)
		}
		return fmt.Errorf("%s: %w: the external id keeps changing hands", what, ErrConflict)
	})
	if err != nil {
		return SentWithStart{}, err
	}
	out.ID, out.Namespace, out.Name, out.Payload = id, r.Namespace, p.Name, p.Payload
	return out, nil
}

// eventsLiveTarget finds and locks the live run holding r's external id and
// checks it can take the event in r's stead; found is false when no live
// run holds the id.
func (s *Store) eventsLiveTarget(ctx context.Context, r RunsCreateParams, out *SentWithStart) (found bool, err error) {
	var typ string
	err = eventsWithStartTargetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": r.Namespace, "external_id": r.ExternalID}).
		Scan(&out.RunID, &out.RunStatus, &out.Queue, &typ)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, mapErr("find run", err)
	}
	switch {
	case out.RunStatus == StatusScheduled || out.RunStatus == StatusPaused:
		return false, fmt.Errorf("%w: run %s holding the external id is a schedule template", ErrConflict, out.RunID)
	case typ != r.Type:
		return false, fmt.Errorf("%w: the live run %s holding the external id is of workflow type %q, not %q",
			ErrConflict, out.RunID, typ, r.Type)
	}
	return true, nil
}
