package runstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// runsCreateAttributesSQL is runsCreateSQL with the insert of the runs'
// attributes, written in sql/attributes.sql.
var runsCreateAttributesSQL = stmt("RunsCreateAttributes")

// attributesAdd inserts rows as run id's attributes.
func (s *Runs) attributesAdd(ctx context.Context, id uuid.UUID, rows []core.AttrRow) error {
	return core.AddAttributes(ctx, s.h.DB, id, rows)
}

// RunsAttributesSetParams are a workflow's SetAttributes under the run's
// lease: the step StepID (attempt 1) and the values, a JSON object of
// name to value (null removes the attribute).
type RunsAttributesSetParams struct {
	Lease      Lease
	StepID     string
	Attributes []byte
	StartedAt  *time.Time
}

// RunsAttributesSet sets a run's search attributes from a workflow and
// records the step that did it, in the caller's transaction (the report's).
// Values that do not fit the namespace's declarations, or would take the
// run past its limits, are refused: the step is recorded as failed, not
// to be retried, with refused as its error, and nothing else changes, so
// a replay of the workflow meets the same error. The outcome is the step
// record's (a lost lease, say).
func (s *Runs) RunsAttributesSet(ctx context.Context, p RunsAttributesSetParams) (o StepOutcome, refused error, err error) {
	step := StepsRecordParams{Lease: p.Lease, StepID: p.StepID, Attempt: 1, Kind: StepFunction, Status: StepCompleted,
		Output: p.Attributes, StartedAt: p.StartedAt}
	declared, err := core.AttributeKinds(ctx, s.h.DB, p.Lease.Namespace)
	if err != nil {
		return o, nil, err
	}
	merged, names, refused := core.MergeAttributes(ctx, s.h.DB, p.Lease.Namespace, p.Lease.RunID, p.Attributes, declared)
	if refused != nil && !errors.Is(refused, core.ErrAttribute) {
		return o, nil, refused
	}
	if refused != nil {
		step.Status, step.Output = StepFailed, nil
		step.Error, step.ErrorType, step.NonRetryable = refused.Error(), protocol.AttributesRefused, true
	}
	outs, err := s.StepsRecordBatch(ctx, []StepsRecordParams{step})
	if err != nil || outs[0].Err != nil || refused != nil {
		if err == nil {
			o = outs[0]
		}
		return o, refused, err
	}
	// Recorded: the run's attributes become the merged set (a repeated
	// report writes the same again).
	return outs[0], nil, core.ReplaceAttributes(ctx, s.h.DB, p.Lease.Namespace, p.Lease.RunID, names, merged)
}
