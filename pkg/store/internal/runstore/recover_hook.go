package runstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RecoverWorkerAsPicked runs RunsRecoverWorker's move as if its pick
// had found the runs ids showing attempts (and the policy they have now),
// for tests of a run that moved on between the two.
func RecoverWorkerAsPicked(s *Runs, ctx context.Context, workerID uuid.UUID, ids []uuid.UUID, attempts []int32) ([]RecoveredRun, error) {
	var c recoverCandidates
	for i, id := range ids {
		var raw []byte
		if err := s.h.DB.QueryRow(ctx, `SELECT retry_policy FROM kagzi.workflow_runs WHERE run_id = $1`, id).Scan(&raw); err != nil {
			return nil, err
		}
		if err := c.add(id, attempts[i], raw); err != nil {
			return nil, err
		}
	}
	return s.recoverMove(ctx, "recover worker runs", runsRecoverWorkerSQL, pgx.NamedArgs{"error": "worker " + workerID.String() + " lost",
		"worker_id": workerID, "received": []uuid.UUID{}}, &c)
}
