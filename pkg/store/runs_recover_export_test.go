package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
)

// RunsRecoverWorkerAsPicked runs RunsRecoverWorker's move as if its pick
// had found the runs ids showing attempts (and the policy they have now),
// for tests of a run that moved on between the two.
func (s *Store) RunsRecoverWorkerAsPicked(ctx context.Context, workerID uuid.UUID, ids []uuid.UUID, attempts []int32) ([]RecoveredRun, error) {
	policies := make([][]byte, len(ids))
	for i, id := range ids {
		if err := s.h.DB.QueryRow(ctx, `SELECT retry_policy FROM kagzi.workflow_runs WHERE run_id = $1`, id).Scan(&policies[i]); err != nil {
			return nil, err
		}
	}
	return runstore.RecoverWorkerAsPicked(&s.runsPart, ctx, workerID, ids, attempts, policies)
}
