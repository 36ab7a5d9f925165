package runstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What package store's events, payloads and schedules share with the
// runs: the checks and statements a run's writes go through, so that an
// event or a schedule writes a run exactly as the runs' own methods do.

// RunsWaitLockSQL locks a run and reads its lease, as RunsWait does.
var RunsWaitLockSQL = runsWaitLockSQL

// LeaseArgs adds l's arguments to args.
func LeaseArgs(l Lease, args pgx.NamedArgs) pgx.NamedArgs { return leaseArgs(l, args) }

// CheckFlowKeys checks a concurrency and a rate-limit key.
func CheckFlowKeys(concurrencyKey, rateKey string) error {
	return checkFlowKeys(concurrencyKey, rateKey)
}

// Flow reports whether p starts a run through a flow (a debounce or an
// id-reuse policy).
func Flow(p RunsCreateParams) bool { return p.flow() }

// LeaseCheckDone is s.leaseCheckDone.
func LeaseCheckDone(s *Runs, ctx context.Context, what string, l Lease, done RunStatus) error {
	return s.leaseCheckDone(ctx, what, l, done)
}

// ValidateStep checks p as StepsRecord does.
func ValidateStep(s *Runs, ctx context.Context, p *StepsRecordParams) error {
	return s.validateStep(ctx, p)
}

// ValidateCreate checks p as RunsCreate does and returns its encoded
// retry policy.
func ValidateCreate(s *Runs, ctx context.Context, p *RunsCreateParams) ([]byte, error) {
	return s.validateCreate(ctx, p, nil)
}

// RunsInsert inserts the runs of ps (see runsInsert).
func RunsInsert(s *Runs, ctx context.Context, ps []RunsCreateParams, policies [][]byte, rows []int) (map[uuid.UUID]Run, error) {
	return s.runsInsert(ctx, ps, policies, rows)
}
