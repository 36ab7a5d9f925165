package runstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
)

// IDReusePolicy says whether a start's external id may name a new run,
// given the runs that held the id before. Under every policy but
// IDReuseTerminate, a live run holding the id is returned as today
// (created=false): the start is idempotent while the run is live.
type IDReusePolicy string

const (
	// IDReuseAllowDuplicate (the default) starts a new run whenever no
	// live run holds the id, whatever the ended ones did.
	IDReuseAllowDuplicate IDReusePolicy = ""
	// IDReuseFailedOnly starts a new run only if the last run that held
	// the id (and ended within the window) ended FAILED or CANCELLED; one
	// that COMPLETED refuses the start with an *IDReuseError.
	IDReuseFailedOnly IDReusePolicy = "FAILED_ONLY"
	// IDReuseReject refuses the start with an *IDReuseError if any run
	// that held the id ended within the window (0: ever, as long as
	// retention keeps it).
	IDReuseReject IDReusePolicy = "REJECT"
	// IDReuseTerminate terminates the live run holding the id, if any
	// (as RunsTerminate, with the reason naming the new run), and starts
	// the new run, in one transaction. Ended runs do not count.
	IDReuseTerminate IDReusePolicy = "TERMINATE"
)

// ErrIDReused is wrapped by the *IDReuseError of a start its id reuse
// policy refused; it wraps ErrConflict.
var ErrIDReused = fmt.Errorf("%w: the external id was used by a run that ended", ErrConflict)

// IDReuseError refuses a start whose external id an ended run held, under
// its id reuse policy. Nothing was started.
type IDReuseError struct {
	ExternalID string
	Policy     IDReusePolicy
	// ExistingRunID is the run that held the id and ended; Status and
	// FinishedAt say how and when.
	ExistingRunID uuid.UUID
	Status        RunStatus
	FinishedAt    time.Time
}

func (e *IDReuseError) Error() string {
	return fmt.Sprintf("external id %q: run %s ended %s at %s and the id reuse policy is %s: %v",
		e.ExternalID, e.ExistingRunID, e.Status, e.FinishedAt.UTC().Format(time.RFC3339), e.Policy, ErrIDReused)
}

// Unwrap makes errors.Is(err, ErrIDReused) and errors.Is(err, ErrConflict)
// hold.
func (e *IDReuseError) Unwrap() error { return ErrIDReused }

// MaxIDReuseWindow is the longest RunsCreateParams.IDReuseWindow: no run
// is kept longer (MaxKeep), so a longer window would count nothing more.
const MaxIDReuseWindow = MaxKeep

// checkIDReuse checks p's id reuse policy.
func checkIDReuse(p *RunsCreateParams) error {
	switch p.IDReuse {
	case IDReuseAllowDuplicate, IDReuseTerminate:
		if p.IDReuseWindow != 0 {
			return invalidf("id reuse window applies to policies %s and %s only", IDReuseFailedOnly, IDReuseReject)
		}
	case IDReuseFailedOnly, IDReuseReject:
		if p.IDReuseWindow < 0 {
			return invalidf("id reuse window %s is negative", p.IDReuseWindow)
		}
		if p.IDReuseWindow > MaxIDReuseWindow {
			return invalidf("id reuse window %s is above the maximum %s", durations.Format(p.IDReuseWindow), durations.Format(MaxIDReuseWindow))
		}
	default:
		return invalidf("id reuse policy %q is not one of \"\", %s, %s, %s", p.IDReuse, IDReuseFailedOnly, IDReuseReject, IDReuseTerminate)
	}
	if p.IDReuse != IDReuseAllowDuplicate {
		if p.ExternalID == "" {
			return invalidf("id reuse policy %s needs an external id", p.IDReuse)
		}
		if p.ScheduleID != nil || p.ParentRunID != nil {
			return invalidf("id reuse policies apply to top-level starts only")
		}
	}
	return nil
}

// runsReuseLockSQL serialises the starts with an id reuse policy of one
// external id, for their transaction: each reads the runs that hold the id
// and inserts knowing no other such start is between the two. The
// two-key form keeps these locks apart from the single-key locks the
// leaders and the migrator hold; two ids whose hashes meet only wait for
// each other.
var runsReuseLockSQL = stmt("RunsReuseLock")

// reuseLockClass is the first key of runsReuseLockSQL's locks ("kgir").
const reuseLockClass = 0x6b676972

// runsReuseLiveSQL finds the live run holding an external id, as
// runsFindConflict does.
var runsReuseLiveSQL = stmt("RunsReuseLive")

// runsReuseLastEndedSQL finds the run that held an external id and ended last,
// if it ended after @since (NULL: ever), by
// workflow_runs_external_id_finished_idx.
var runsReuseLastEndedSQL = stmt("RunsReuseLastEnded")

// reuseTries bounds the rounds of runsCreateReuse: a round fails only if
// a start without a policy took the id between its look and its insert.
const reuseTries = 3

// runsCreateReuse starts the validated run p under its id reuse policy, in
// one transaction (a savepoint in the caller's): under the lock of its
// external id, it looks for the live run holding the id (returned, or
// under IDReuseTerminate terminated), else checks the last run that held
// it and ended, then inserts.
func (s *Runs) runsCreateReuse(ctx context.Context, p RunsCreateParams, policy []byte) (Run, bool, error) {
	what := fmt.Sprintf("create run with external id %q", p.ExternalID)
	var run Run
	var created bool
	err := s.inTx(ctx, func(tx *Runs) error {
		args := pgx.NamedArgs{"namespace": p.Namespace, "external_id": p.ExternalID}
		lock := pgx.NamedArgs{"class": reuseLockClass, "namespace": p.Namespace, "external_id": p.ExternalID}
		if _, err := runsReuseLockSQL.Exec(ctx, tx.h.DB, lock); err != nil {
			return mapErr(what, err)
		}
		for try := 0; try < reuseTries; try++ {
			var input []byte
			live, err := scanRun(runsReuseLiveSQL.QueryRow(ctx, tx.h.DB, args), &input)
			switch {
			case err == nil && p.IDReuse != IDReuseTerminate:
				live.Input = input
				run = live
				return nil
			case err == nil && (live.Status == StatusScheduled || live.Status == StatusPaused):
				return fmt.Errorf("%s: %w: schedule %s holds the id", what, ErrConflict, live.ID)
			case err == nil:
				// ErrConflict: the run ended meanwhile, and there is nothing
				// to end.
				_, err := tx.RunsTerminate(ctx, p.Namespace, live.ID, "id reuse: replaced by run "+p.RunID.String())
				if err != nil && !errors.Is(err, ErrConflict) {
					return fmt.Errorf("%s: %w", what, err)
				}
			case isNoRows(err):
				if err := tx.reuseCheckEnded(ctx, p); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			default:
				return mapErr(what, err)
			}
			inserted, err := tx.runsInsert(ctx, []RunsCreateParams{p}, [][]byte{policy}, []int{0})
			if err != nil {
				return err
			}
			if r, ok := inserted[p.RunID]; ok {
				r.Input = p.Input
				run, created = r, true
				return nil
			}
		}
		return fmt.Errorf("%s: %w: the external id keeps changing hands", what, ErrConflict)
	})
	if err != nil {
		return Run{}, false, err
	}
	return run, created, nil
}

// reuseCheckEnded refuses p with an *IDReuseError if its policy forbids a
// new run after the last run that held its id and ended.
func (s *Runs) reuseCheckEnded(ctx context.Context, p RunsCreateParams) error {
	if p.IDReuse != IDReuseFailedOnly && p.IDReuse != IDReuseReject {
		return nil
	}
	var window *time.Duration
	if p.IDReuseWindow > 0 {
		window = &p.IDReuseWindow
	}
	e := IDReuseError{ExternalID: p.ExternalID, Policy: p.IDReuse}
	err := runsReuseLastEndedSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "external_id": p.ExternalID,
		"window": window}).Scan(&e.ExistingRunID, &e.Status, &e.FinishedAt)
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return mapErr("find the last run of the id", err)
	}
	if p.IDReuse == IDReuseFailedOnly && e.Status != StatusCompleted {
		return nil
	}
	return &e
}
