package runstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// runsContinueAsNewSQL is RunsContinueAsNew's statement. The new run's
// trace context is the old one's span context, so the chain is one trace,
// with the W3C random-trace-id flag set (true of Kagzi's and the SDK's
// trace ids, ignored by propagation otherwise) so that a context the store
// gave the chain's first run is no longer taken for one whose root is still
// to be reported (BirthRoot): the dispatcher reports the root once.
var runsContinueAsNewSQL = stmt("RunsContinueAsNew")

// runsContinueAsNewStateSQL reads what became of a run whose continuation
// matched no running lease.
var runsContinueAsNewStateSQL = stmt("RunsContinueAsNewState")

// RunsContinueAsNew ends the run held by l COMPLETED, without output, and
// starts in the same statement the run newID that continues it: the same
// namespace, queue, type, external id, retry policy, priority and trace,
// the input given, an empty history, the type's default version (else
// unpinned, like a start without a version) and no deadline. The ended
// run's continued_as names the new one, so a client waiting on the old id
// follows it. A child run cannot continue as new (its parent waits for
// that run id): ErrInvalidArgument. A repeated report of the same
// continuation succeeds without starting another run. It returns the run's
// workflow type when this call ended it (empty for a repeated report).
//
// With seen, the run continues only if no event the execution did not see
// waits, as a completion (RunsCompleteItem.Events): else it is
// ErrEventsArrived and the run is claimable again. The events a run
// leaves go with it, not to the new run: a workflow drains them before it
// continues.
func (s *Runs) RunsContinueAsNew(ctx context.Context, l Lease, newID uuid.UUID, input []byte, seen *EventsSeen) (string, error) {
	if newID == uuid.Nil {
		return "", invalidf("continue as new: new run id is required")
	}
	if err := s.h.CheckPayload(ctx, "input", input); err != nil {
		return "", err
	}
	if err := seen.check(); err != nil {
		return "", err
	}
	var typ string
	err := runsContinueAsNewSQL.QueryRow(ctx, s.h.DB,
		leaseArgs(l, pgx.NamedArgs{"new_run_id": newID, "input": input, "seen": seen.seqArg()})).Scan(&typ)
	if err == nil {
		return typ, nil
	}
	if !isNoRows(err) {
		return "", mapErr(fmt.Sprintf("continue run %s as new", l.RunID), err)
	}
	if seen.active() {
		var refused, done bool
		err := s.inTx(ctx, func(tx *Runs) error {
			held, r, err := tx.eventsGuard(ctx, l, seen)
			if err != nil || !held {
				return err
			}
			if refused = r; refused {
				return nil
			}
			done = true
			typ, err = tx.RunsContinueAsNew(ctx, l, newID, input, nil)
			return err
		})
		switch {
		case err != nil:
			return "", err
		case refused:
			return "", errEventsArrived("continue run as new", l)
		case done:
			return typ, nil
		}
		// The lease did not hold: a retried report, or a lost lease.
	}
	var (
		st     RunStatus
		tok    int64
		parent *uuid.UUID
		cont   *uuid.UUID
	)
	err = runsContinueAsNewStateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": l.Namespace, "run_id": l.RunID}).Scan(&st, &tok, &parent, &cont)
	if err != nil {
		return "", mapErr(fmt.Sprintf("continue run %s as new", l.RunID), err)
	}
	switch {
	case tok == l.Token && st == StatusCompleted && cont != nil && *cont == newID:
		return "", nil
	case tok == l.Token && st == StatusRunning && parent != nil:
		return "", invalidf("continue run %s as new: a child run cannot continue as new", l.RunID)
	}
	return "", fmt.Errorf("continue run %s as new: %w (run is %s under lease %d, report names lease %d)",
		l.RunID, ErrLeaseLost, st, tok, l.Token)
}
