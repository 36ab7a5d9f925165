package client

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/kagzitype"
	"github.com/kagzi/kagzi/pkg/store"
)

// The overlap policies (docs/workflows.md, "Schedules").
const (
	// OverlapAllowAll starts every fire, however many runs are live: what
	// every schedule did before policies existed, and the default.
	OverlapAllowAll = kagzitype.OverlapAllowAll
	// OverlapSkip starts nothing while a run is live.
	OverlapSkip = kagzitype.OverlapSkip
	// OverlapBufferOne holds one fire while a run is live and starts it
	// as soon as the run ends (the scheduler is told by the run's end, not
	// by polling); further fires while one is held are dropped.
	OverlapBufferOne = kagzitype.OverlapBufferOne
	// OverlapCancelOther asks the live runs to cancel (as CancelRun) and
	// starts the new run at once.
	OverlapCancelOther = kagzitype.OverlapCancelOther
	// OverlapTerminateOther terminates the live runs (as TerminateRun)
	// and starts the new run.
	OverlapTerminateOther = kagzitype.OverlapTerminateOther
)

// ParseOverlapPolicy reads a policy's name ("" is OverlapAllowAll); an
// unknown name is ErrInvalidArgument.
func ParseOverlapPolicy(s string) (OverlapPolicy, error) {
	return store.ParseOverlap(s)
}

// MaxBackfill bounds how many fire times one BackfillSchedule may cover.
const MaxBackfill = store.MaxBackfill

// MaxJitter bounds ScheduleOptions.Jitter.
const MaxJitter = store.MaxJitter

// BackfillResult is what BackfillSchedule did.
type BackfillResult struct {
	// FireTimes are the schedule's fire times in the range, oldest first.
	FireTimes []time.Time
	// Runs are the runs it started, oldest fire time first.
	Runs []Run
	// Existing are the fire times that had a run already: nothing started.
	Existing []time.Time
	// Dropped are the fire times the overlap policy started nothing for.
	Dropped []time.Time
	// Buffered is the fire time a buffer-one schedule holds afterwards.
	Buffered *time.Time
	// Stopped are the live runs cancelled or terminated.
	Stopped []uuid.UUID
}

// BackfillSchedule starts the runs of the schedule's fire times in
// [from, to) that it did not fire, paused or not, as if they came one
// after the other now under overlap ("": the schedule's own policy; pass
// OverlapAllowAll to start them all). A fire time starts at most once
// however often it is backfilled, so repeating a backfill starts nothing
// new (under skip and buffer-one it may start a time the first one
// dropped, once nothing is live). The schedule's next fire time does not
// move. A range of more than MaxBackfill fire times, an empty one or one
// ending in the future is ErrInvalidArgument; an unknown schedule
// ErrNotFound.
func (c *Client) BackfillSchedule(ctx context.Context, scheduleID uuid.UUID, from, to time.Time, overlap OverlapPolicy) (*BackfillResult, error) {
	r, err := c.st.SchedulesBackfill(ctx, store.SchedulesBackfillParams{Namespace: c.ns, ScheduleID: scheduleID,
		From: from, To: to, Overlap: overlap, Now: time.Now()})
	if err != nil {
		return nil, err
	}
	out := &BackfillResult{FireTimes: r.FireTimes, Existing: r.Existing, Dropped: r.Dropped, Buffered: r.Buffered,
		Stopped: r.Stopped, Runs: nonNil(r.Runs)}
	return out, nil
}

// scheduleOverlapParams checks a ScheduleOptions' policy (the store
// checks the jitter, for every caller).
func scheduleOverlapParams(o ScheduleOptions) (store.OverlapPolicy, error) {
	return store.ParseOverlap(string(o.Overlap))
}
