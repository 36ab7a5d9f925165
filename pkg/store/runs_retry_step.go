package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// runsRetryStepNowSQL is the statement of RunsRetryStepNow.
var runsRetryStepNowSQL = stmt("RunsRetryStepNow")

// RetryStepNowResult is what RunsRetryStepNow did.
type RetryStepNowResult struct {
	// Steps are the steps whose next attempt was made due now.
	Steps []string
}

// RunsRetryStepNow makes a run that backs off before a failing step's
// next attempt due now, as Temporal's activity reset does: the attempt is
// made at once, with the attempts counted so far (a paused run's stays
// held until it is resumed). A run that is not backing off (running,
// sleeping, waiting for an event, finished) is ErrConflict; an unknown
// run is ErrNotFound.
//
// A non-nil override gives the step new retry options, as Temporal's
// update of an activity's options does: the fields it sets (MaxAttempts,
// InitialInterval, MaxInterval, BackoffCoefficient; each checked by
// retry.Policy.ValidateOverride, else ErrInvalidArgument) replace the
// code's policy for the step's next attempts in this run attempt, the
// attempts made so far still counted. They are kept with the step's
// latest failed attempt and merged over the step's earlier override in
// the run attempt, if any. A nil override, or one that sets nothing, keeps
// the policy as it is.
func (s *Store) RunsRetryStepNow(ctx context.Context, namespace string, id uuid.UUID, override *retry.Policy) (RetryStepNowResult, error) {
	ov, err := core.EncodeOverride(override)
	if err != nil {
		return RetryStepNowResult{}, fmt.Errorf("retry a step of run %s now: %w", id, err)
	}
	var status RunStatus
	var n int
	var steps string
	var moved bool
	err = runsRetryStepNowSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "run_id": id, "override": ov}).
		Scan(&status, &n, &steps, &moved)
	if err != nil {
		return RetryStepNowResult{}, mapErr(fmt.Sprintf("retry a step of run %s now", id), err)
	}
	if n == 0 {
		return RetryStepNowResult{}, fmt.Errorf("retry a step of run %s now: %w: the run is %s and backs off before no step's next attempt",
			id, ErrConflict, status)
	}
	return RetryStepNowResult{Steps: strings.Split(steps, ",")}, nil
}
