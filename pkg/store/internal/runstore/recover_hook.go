package runstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RecoverWorkerAsPicked runs RunsRecoverWorker's move as if its pick
// had found the runs ids showing attempts and retry policies (as stored,
// JSON), for tests of a run that moved on between the two.
func RecoverWorkerAsPicked(s *Runs, ctx context.Context, workerID uuid.UUID, ids []uuid.UUID, attempts []int32, policies [][]byte) ([]RecoveredRun, error) {
	var c recoverCandidates
	for i, id := range ids {
		if err := c.add(id, attempts[i], policies[i]); err != nil {
			return nil, err
		}
	}
	return s.recoverMove(ctx, "recover worker runs", runsRecoverWorkerSQL, pgx.NamedArgs{"error": "worker " + workerID.String() + " lost",
		"worker_id": workerID, "received": []uuid.UUID{}}, &c)
}
