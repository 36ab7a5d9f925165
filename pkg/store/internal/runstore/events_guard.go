package runstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// The event guard: a run's end is refused while an event that the ending
// execution could not have seen waits for it. An execution sees the
// events stored before its delivery (its waits and drains take them, or
// leave them by choice) and those its waits and drains took; an event of
// a name it waited for or drained that arrived after the delivery and is
// still unconsumed when it ends is one it did not see. Executing the run
// again, with that event there before the delivery, lets the workflow take
// it (a drain that replays at the end of the history runs again: see
// EventsDrain). A workflow that still leaves it has ignored it, and the run
// ends with it unreceived (Event.Unreceived).
//
// The check costs a run that got no event during its execution nothing: the
// run row counts the events stored while it is RUNNING (event_seq, under
// the row lock every sender takes), the claim returns the count, the end
// names it, and the end's own statement applies only if the count is still
// the same (its row lock, and the re-check of the locked row's newest
// version, make that exact). Only an end whose count moved takes the slow
// path, eventsGuard.

// EventsSeen is what an execution saw of its run's events, given with the
// run's end (RunsCompleteItem.Events, RunsContinueAsNew): the end applies
// only if no event of one of Names (of any name, with All) was stored
// after the delivery of the execution and is still unconsumed. Nil (or no
// name and not All) ends the run without the check, as an older worker's
// report does.
type EventsSeen struct {
	// Seq is the delivery's event count (ClaimedRun.EventSeq).
	Seq int64
	// Names are the event names the execution waited for or drained (at
	// most protocol.MaxEventNames).
	Names []string
	// All checks events of every name (an execution that used more names
	// than a report lists).
	All bool
}

// active reports whether e asks for the check.
func (e *EventsSeen) active() bool { return e != nil && (e.All || len(e.Names) > 0) }

// check validates e.
func (e *EventsSeen) check() error {
	if e == nil {
		return nil
	}
	if e.Seq < 0 {
		return invalidf("event count %d must not be negative", e.Seq)
	}
	if len(e.Names) > protocol.MaxEventNames {
		return invalidf("%d event names, at most %d", len(e.Names), protocol.MaxEventNames)
	}
	for _, n := range e.Names {
		if err := checkEventName(n); err != nil {
			return err
		}
	}
	return nil
}

// seqArg is the parameter of an end's count check: NULL for an end
// without one.
func (e *EventsSeen) seqArg() *int64 {
	if !e.active() {
		return nil
	}
	return &e.Seq
}

// eventsGuardLockSQL locks a run under its lease and reads its event count.
var eventsGuardLockSQL = stmt("EventsGuardLock")

// eventsGuardRequeueSQL makes the run claimable at once, as a release does
// (no attempt counted, the lease token kept for the next claim to move on),
// if an event of the names, stored after @seen, is unconsumed. It runs
// after eventsGuardLockSQL, as a statement of its own: its snapshot is
// taken once the lock is held, so it sees every event stored before, and
// none can be stored until the transaction ends (a sender locks the run
// row first). A subquery of the lock's own statement would not do: its
// snapshot predates the wait for the lock, and the re-check of the newly
// locked row does not refresh it.
var eventsGuardRequeueSQL = stmt("EventsGuardRequeue")

// eventsGuard is the slow path of an end under l whose count check failed
// (or may have): it locks the run under the lease and, if an event the
// execution did not see is there, makes the run claimable again and
// reports refused. held is false when the lease is not current (the caller
// tells a retried report from a lost lease). Otherwise the run stays
// locked, in the caller's transaction, for the end to apply without the
// check. The caller runs it in a transaction.
func (s *Runs) eventsGuard(ctx context.Context, l Lease, seen *EventsSeen) (held, refused bool, err error) {
	var seq int64
	err = eventsGuardLockSQL.QueryRow(ctx, s.h.DB, leaseArgs(l, pgx.NamedArgs{})).Scan(&seq)
	if isNoRows(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, mapErr(fmt.Sprintf("end run %s", l.RunID), err)
	}
	if seq == seen.Seq {
		return true, false, nil
	}
	names := seen.Names
	if names == nil {
		names = []string{}
	}
	tag, err := eventsGuardRequeueSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"run_id": l.RunID, "seen": seen.Seq, "all": seen.All,
		"names": names})
	if err != nil {
		return true, false, mapErr(fmt.Sprintf("end run %s", l.RunID), err)
	}
	return true, tag.RowsAffected() == 1, nil
}

// errEventsArrived is the error of an end refused by the guard.
func errEventsArrived(what string, l Lease) error {
	return fmt.Errorf("%s %s: %w: the run is claimable again to receive them", what, l.RunID, ErrEventsArrived)
}
