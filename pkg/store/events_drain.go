package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// EventsDrainParams describe one drain (workflow.DrainEvents) reaching the
// engine.
type EventsDrainParams struct {
	Lease Lease
	// StepID is the drain's EVENT step (its one attempt is 1).
	StepID string
	// Name is the name of the events to take. An update's request
	// (protocol.UpdateEventPrefix) cannot be drained: it needs an answer.
	Name      string
	StartedAt *time.Time
}

// EventsDrainResult is what a drain's step holds.
type EventsDrainResult struct {
	// Output is the step's output: the JSON array of the payloads of every
	// event the step took, in the order it took them (each as
	// EventsReceive gives one: null for an empty payload, a JSON string
	// for one that is not JSON). Nil when it took none: nothing is
	// recorded.
	Output []byte
	// Events counts the events in Output, Fresh those this call took.
	Events, Fresh int
}

// eventsDrainStepSQL reads the drain step's attempt as recorded: a drain
// that runs again appends to it (a forked run's copied drain step holds
// events of the run it was forked from).
var eventsDrainStepSQL = stmt("EventsDrainStep")

// eventsDrainSQL takes, for the drain step @step_id, the unconsumed events
// of @name, oldest first, at most @max_events of them whose payloads (with
// a comma each) fit in @max_bytes, and returns them in that order. The
// caller holds the run row lock, which every consumer of the run's events
// takes, so no row lock on the events is needed.
var eventsDrainSQL = stmt("EventsDrain")

// eventsDrainGiveBackSQL leaves events a drain took pending again (those
// whose payloads, as JSON, would not fit its output).
var eventsDrainGiveBackSQL = stmt("EventsDrainGiveBack")

// eventsDrainRecordSQL records the drain step COMPLETED with its output,
// or replaces the output of the drain step already recorded (it grows).
// A step of that id that is not this drain is left alone: no row.
var eventsDrainRecordSQL = stmt("EventsDrainRecord")

// EventsDrain takes, under the lease, every unconsumed event of p.Name sent
// to the run, oldest first, for the drain step p.StepID, and returns what
// the step holds: what it held as recorded (a drain replayed at the end of
// a run's history runs again and grows; a forked run's copy holds what the
// original took) and the events taken now. It never waits. A
// drain that takes nothing and holds nothing records nothing, so a replay
// of it runs afresh; otherwise the step is recorded (or its output
// replaced) as the EVENT step p.StepID, attempt 1, COMPLETED, whose output
// is Output. Each event is taken once: its consumed_by names the step.
//
// A step holds at most protocol.MaxDrainEvents events and an output within
// the payload limit: the events beyond stay pending (a later drain takes
// them). It is idempotent as a whole: a retried request takes what came
// since and returns everything the step holds.
func (s *Store) EventsDrain(ctx context.Context, p EventsDrainParams) (EventsDrainResult, error) {
	var res EventsDrainResult
	if err := checkEventName(p.Name); err != nil {
		return res, err
	}
	if strings.HasPrefix(p.Name, protocol.UpdateEventPrefix) {
		return res, invalidf("event %q is an update's request: it is answered by its handler, not drained", p.Name)
	}
	if p.StepID == "" || len(p.StepID) > maxNameLen {
		return res, invalidf("step id must be 1 to %d bytes", maxNameLen)
	}
	if err := checkName("namespace", p.Lease.Namespace, true); err != nil {
		return res, err
	}
	lim, err := s.Limits(ctx)
	if err != nil {
		return res, err
	}
	started := p.StartedAt
	if started == nil {
		now := time.Now()
		started = &now
	}
	what := fmt.Sprintf("drain events %q of run %s", p.Name, p.Lease.RunID)
	err = s.InTx(ctx, func(tx *Store) error {
		var one int
		err := runsWaitLockSQL.QueryRow(ctx, tx.h.DB, leaseArgs(p.Lease, pgx.NamedArgs{})).Scan(&one)
		if isNoRows(err) {
			return tx.leaseCheckDone(ctx, "drain events of run", p.Lease, "")
		}
		if err != nil {
			return mapErr(what, err)
		}
		var held []json.RawMessage
		var kind, status string
		var input, output []byte
		err = eventsDrainStepSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"run_id": p.Lease.RunID, "step_id": p.StepID}).
			Scan(&kind, &status, &input, &output)
		switch {
		case isNoRows(err):
		case err != nil:
			return mapErr(what, err)
		case StepKind(kind) != StepEvent || StepStatus(status) != StepCompleted || string(input) != p.Name ||
			json.Unmarshal(output, &held) != nil:
			return fmt.Errorf("%s: %w: step %q is recorded and is not this drain", what, ErrConflict, p.StepID)
		}
		// What the step holds is kept as recorded, the events taken now
		// appended.
		out := bytes.NewBufferString("[")
		for _, v := range held {
			if res.Events > 0 {
				out.WriteByte(',')
			}
			out.Write(v)
			res.Events++
		}
		rows, err := eventsDrainSQL.Query(ctx, tx.h.DB, pgx.NamedArgs{"run_id": p.Lease.RunID, "name": p.Name, "step_id": p.StepID,
			"max_events": protocol.MaxDrainEvents - res.Events, "max_bytes": lim.PayloadMaxBytes - out.Len() - 1})
		if err != nil {
			return mapErr(what, err)
		}
		var giveBack []uuid.UUID
		for rows.Next() {
			var (
				id      uuid.UUID
				payload []byte
			)
			if err := rows.Scan(&id, &payload); err != nil {
				rows.Close()
				return mapErr(what, err)
			}
			v := jsonPayload(payload)
			// The estimate that chose the events counts raw payloads; one
			// that is not JSON grows when quoted, and must not take the
			// output over the limit.
			if len(giveBack) > 0 || out.Len()+len(v)+2 > lim.PayloadMaxBytes {
				giveBack = append(giveBack, id)
				continue
			}
			if res.Events > 0 {
				out.WriteByte(',')
			}
			out.Write(v)
			res.Events++
			res.Fresh++
		}
		if err := rows.Err(); err != nil {
			return mapErr(what, err)
		}
		if len(giveBack) > 0 {
			if _, err := eventsDrainGiveBackSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"ids": giveBack}); err != nil {
				return mapErr(what, err)
			}
		}
		if res.Events == 0 {
			return nil
		}
		out.WriteByte(']')
		res.Output = out.Bytes()
		if res.Fresh == 0 {
			// Nothing new: the step holds what it held.
			return nil
		}
		err = eventsDrainRecordSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"run_id": p.Lease.RunID, "step_id": p.StepID,
			"name_bytes": []byte(p.Name), "output": res.Output, "started_at": started}).Scan(&one)
		if isNoRows(err) {
			return fmt.Errorf("%s: %w: step %q is recorded and is not this drain", what, ErrConflict, p.StepID)
		}
		return mapErr(what, err)
	})
	if err != nil {
		return EventsDrainResult{}, err
	}
	return res, nil
}
