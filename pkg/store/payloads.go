package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Payloads read in parts. A claim returns only payloads up to an inline
// size (RunsClaimParams.InlineBytes); the holder of the run's lease reads
// the larger ones here, a part at a time, so neither a claim nor a message
// has to carry a whole history of large payloads at once.

// PayloadsReadParams select part of a payload of a run under its lease:
// the run's input (StepID empty) or the output of attempt Attempt of step
// StepID.
type PayloadsReadParams struct {
	Lease   Lease
	StepID  string
	Attempt int
	// Offset and Length select the bytes, from 0.
	Offset, Length int
}

// PayloadPart is the part of a payload PayloadsRead returns: the bytes from
// the offset (fewer than asked at the end) and the payload's whole size.
type PayloadPart struct {
	Data  []byte
	Total int
}

// payloadsReadOutputSQL and payloadsReadInputSQL read part of a step
// attempt's output and of a run's input, under the run's lease.
var (
	payloadsReadOutputSQL = stmt("PayloadsReadOutput")
	payloadsReadInputSQL  = stmt("PayloadsReadInput")
)

// PayloadsRead returns part of a payload of a run whose lease p.Lease
// still holds (ErrLeaseLost otherwise). A step attempt that does not exist
// is ErrNotFound; a payload that is NULL reads as empty.
func (s *Store) PayloadsRead(ctx context.Context, p PayloadsReadParams) (PayloadPart, error) {
	if err := checkName("namespace", p.Lease.Namespace, true); err != nil {
		return PayloadPart{}, err
	}
	if p.Offset < 0 || p.Length < 1 {
		return PayloadPart{}, invalidf("offset %d and length %d: offset not negative, length positive", p.Offset, p.Length)
	}
	if p.StepID != "" && p.Attempt < 1 {
		return PayloadPart{}, invalidf("step %q: attempt %d must be at least 1", p.StepID, p.Attempt)
	}
	sql, what := payloadsReadOutputSQL, fmt.Sprintf("output of step %q attempt %d", p.StepID, p.Attempt)
	args := leaseArgs(p.Lease, pgx.NamedArgs{"offset": p.Offset, "length": p.Length, "step_id": p.StepID, "attempt": p.Attempt})
	if p.StepID == "" {
		sql, what = payloadsReadInputSQL, "input"
		args = leaseArgs(p.Lease, pgx.NamedArgs{"offset": p.Offset, "length": p.Length})
	}
	var part PayloadPart
	err := sql.QueryRow(ctx, s.h.DB, args).Scan(&part.Data, &part.Total)
	if err == nil {
		return part, nil
	}
	if !isNoRows(err) {
		return PayloadPart{}, mapErr("read "+what, err)
	}
	// No row: the lease is gone, or the step attempt does not exist.
	if err := s.leaseCheckDone(ctx, "read "+what, p.Lease, StatusRunning); err != nil {
		return PayloadPart{}, err
	}
	return PayloadPart{}, fmt.Errorf("read %s of run %s: %w", what, p.Lease.RunID, ErrNotFound)
}
