package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
)

// The runs' checks and statements that events, payloads and schedules
// write runs through (see runstore's export.go).

var runsWaitLockSQL = runstore.RunsWaitLockSQL

func leaseArgs(l Lease, args pgx.NamedArgs) pgx.NamedArgs { return runstore.LeaseArgs(l, args) }

func checkFlowKeys(concurrencyKey, rateKey string) error {
	return runstore.CheckFlowKeys(concurrencyKey, rateKey)
}

func (s *Store) leaseCheckDone(ctx context.Context, what string, l Lease, done RunStatus) error {
	return runstore.LeaseCheckDone(&s.runsPart, ctx, what, l, done)
}

func (s *Store) validateStep(ctx context.Context, p *StepsRecordParams) error {
	return runstore.ValidateStep(&s.runsPart, ctx, p)
}

func (s *Store) validateCreate(ctx context.Context, p *RunsCreateParams) ([]byte, error) {
	return runstore.ValidateCreate(&s.runsPart, ctx, p)
}

func (s *Store) runsInsert(ctx context.Context, ps []RunsCreateParams, policies [][]byte, rows []int) (map[uuid.UUID]Run, error) {
	return runstore.RunsInsert(&s.runsPart, ctx, ps, policies, rows)
}
