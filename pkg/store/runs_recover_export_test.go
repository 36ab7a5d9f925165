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
	return runstore.RecoverWorkerAsPicked(&s.runsPart, ctx, workerID, ids, attempts)
}
