package client

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// Batch operations (docs/batches.md): one action over many runs, a query's
// or a list's, fixed when the batch is created. The reaper's leader acts
// on the runs at the batch's rate; each run's outcome is recorded with its
// action, so a batch survives the death or freeze of the process working
// on it, and acts on no run twice.

type (
	// BatchAction is what a batch does to each run: BatchCancel,
	// BatchTerminate, BatchSignal, BatchUpdate, BatchPause, BatchResume,
	// BatchRetry, BatchFork, BatchSetAttributes, BatchRemoveAttributes,
	// BatchDelete.
	BatchAction = store.BatchAction
	// BatchState is a batch's state: running, paused, cancelled or
	// completed.
	BatchState = store.BatchState
	// Batch is a batch and its progress.
	Batch = store.Batch
	// BatchRun is one run of a batch and its outcome ("" while pending;
	// "done", "failed" or "skipped" with the reason), with what a done
	// action made (Detail: "fork <run id>", "update <update id>").
	BatchRun = store.BatchRun
)

// The batch actions and states.
const (
	// BatchCancel asks each live run to cancel (as Cancel).
	BatchCancel = store.BatchCancel
	// BatchTerminate ends each live run at once (as Terminate).
	BatchTerminate = store.BatchTerminate
	// BatchSignal sends an event to each live run (as SendEvent).
	BatchSignal = store.BatchSignal
	// BatchUpdate sends an update's request to each live run (as
	// UpdateSend: no validator runs, and the batch does not wait for the
	// answers; each run's outcome names its update's id, which
	// UpdateResult reads).
	BatchUpdate = store.BatchUpdate
	// BatchPause pauses each live run (as PauseRun).
	BatchPause = store.BatchPause
	// BatchResume resumes each paused run (as ResumeRun).
	BatchResume = store.BatchResume
	// BatchRetry gives each FAILED run a fresh start (as Retry).
	BatchRetry = store.BatchRetry
	// BatchFork forks each FAILED run from its failed step (as ForkMany
	// with FromFailedStep): a new run that reuses the steps recorded
	// before it. A run forked from that step before is skipped.
	BatchFork = store.BatchFork
	// BatchSetAttributes sets search attributes (BatchOptions.Attributes)
	// on each run, live or finished, as a workflow's SetAttributes does:
	// a value replaces every value the run held of that name.
	BatchSetAttributes = store.BatchSetAttributes
	// BatchRemoveAttributes removes the attributes named by
	// BatchOptions.AttributeNames from each run, live or finished.
	BatchRemoveAttributes = store.BatchRemoveAttributes
	// BatchDelete deletes each finished run (COMPLETED, FAILED,
	// CANCELLED) with its steps, events and attributes, as retention
	// does. A child whose parent has not finished is skipped.
	BatchDelete = store.BatchDelete

	BatchRunning   = store.BatchRunning
	BatchPaused    = store.BatchPaused
	BatchCancelled = store.BatchCancelled
	BatchCompleted = store.BatchCompleted
)

// The bounds of batches.
const (
	// MaxBatchRuns is the most runs one batch acts on.
	MaxBatchRuns = store.MaxBatchRuns
	// MaxBatchIDs is the most run ids BatchOptions.RunIDs may list.
	MaxBatchIDs = store.MaxBatchIDs
	// MaxBatchRate caps BatchOptions.Rate, in runs per second.
	MaxBatchRate = store.MaxBatchRate
	// DefaultBatchRate is a batch's rate when none is given.
	DefaultBatchRate = store.DefaultBatchRate
)

// BatchOptions describe a batch.
type BatchOptions struct {
	// Action is what the batch does to each run.
	Action BatchAction
	// Query selects the runs (the filter language of List and Count):
	// those it matches when the batch is created and the action takes
	// (live runs; FAILED ones for BatchRetry and BatchFork; finished ones
	// for BatchDelete; any run for the attribute actions). RunIDs lists
	// them instead: give exactly one of the two.
	Query  string
	RunIDs []uuid.UUID
	// Reason goes with BatchTerminate and BatchPause.
	Reason string
	// By is recorded as who created the batch (and who paused, for
	// BatchPause).
	By string
	// EventName and Payload (encoded as JSON) are BatchSignal's event, or
	// BatchUpdate's update name and request.
	EventName string
	Payload   any
	// Attributes are BatchSetAttributes's values by name, checked against
	// the namespace's declarations when the batch is created (as
	// StartOptions.Attributes: ErrAttribute for a name not declared or a
	// value of another kind). AttributeNames are BatchRemoveAttributes's
	// names, each declared.
	Attributes     map[string]any
	AttributeNames []string
	// Rate caps the runs acted on per second (0: DefaultBatchRate; at
	// most MaxBatchRate), so the engine's own work keeps its latency.
	Rate int
}

// StartBatch creates a batch and resolves its runs at once; the reaper
// acts on them from now on. A query that does not parse, names an
// unknown field or matches more than MaxBatchRuns runs is
// ErrInvalidArgument (ErrAttribute, which is one, for attributes that do
// not fit the namespace's declarations); one that matches none is ErrNotFound; a listed id
// that is not a run of the namespace is ErrNotFound, one the action does
// not take (a finished run, for a cancel) ErrConflict. Nothing is created
// on an error.
func (c *Client) StartBatch(ctx context.Context, o BatchOptions) (Batch, error) {
	p := store.BatchCreateParams{Namespace: c.ns, Action: o.Action, Query: o.Query, RunIDs: o.RunIDs, Reason: o.Reason, By: o.By,
		EventName: o.EventName, Attributes: o.Attributes, AttributeNames: o.AttributeNames, Rate: o.Rate}
	if o.Action == BatchSignal || o.Action == BatchUpdate || o.Payload != nil {
		raw, err := encodeInput(o.Payload)
		if err != nil {
			return Batch{}, fmt.Errorf("start batch: %w", err)
		}
		p.Payload = raw
	}
	return c.st.BatchesCreate(ctx, p)
}

// GetBatch reads a batch and its progress.
func (c *Client) GetBatch(ctx context.Context, id uuid.UUID) (Batch, error) {
	return c.st.BatchesGet(ctx, c.ns, id)
}

// ListBatches lists the namespace's batches, newest first, at most limit
// (0: 50; at most 1000).
func (c *Client) ListBatches(ctx context.Context, limit int) ([]Batch, error) {
	return c.st.BatchesList(ctx, c.ns, limit)
}

// BatchRuns lists a batch's runs after the run id after (uuid.Nil: from
// the first), at most limit (1 to 1000), with their outcomes; outcome
// ("done", "failed", "skipped", "pending"; "" for all) filters.
func (c *Client) BatchRuns(ctx context.Context, id uuid.UUID, outcome string, after uuid.UUID, limit int) ([]BatchRun, error) {
	if _, err := c.GetBatch(ctx, id); err != nil {
		return nil, err
	}
	return c.st.BatchRunsList(ctx, id, outcome, after, limit)
}

// PauseBatch stops a running batch after the runs it is acting on now;
// ResumeBatch goes on with the rest. Pausing a paused batch, or resuming
// a running one, changes nothing; a cancelled or completed batch is
// ErrConflict.
func (c *Client) PauseBatch(ctx context.Context, id uuid.UUID) error {
	return c.batchState(ctx, id, "pause", BatchPaused, BatchRunning)
}

// ResumeBatch resumes a paused batch (see PauseBatch).
func (c *Client) ResumeBatch(ctx context.Context, id uuid.UUID) error {
	return c.batchState(ctx, id, "resume", BatchRunning, BatchPaused)
}

// CancelBatch ends a running or paused batch: the runs it has not acted on
// are left as they are. Cancelling a cancelled batch changes nothing; a
// completed one is ErrConflict.
func (c *Client) CancelBatch(ctx context.Context, id uuid.UUID) error {
	return c.batchState(ctx, id, "cancel", BatchCancelled, BatchRunning, BatchPaused)
}

func (c *Client) batchState(ctx context.Context, id uuid.UUID, verb string, to BatchState, from ...BatchState) error {
	was, moved, err := c.st.BatchesSetState(ctx, c.ns, id, to, from...)
	if err != nil || moved || was == to {
		return err
	}
	return fmt.Errorf("%s batch %s: %w: it is %s", verb, id, ErrConflict, was)
}
