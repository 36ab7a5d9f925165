package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kagzi/kagzi/pkg/store"
)

// Flow control on the create path (docs/flow-control.md): a start may be
// debounced (StartOptions.Debounce) or carry an id reuse policy
// (StartOptions.IDReusePolicy).

// DebounceKeep says which start's input a debounced run keeps.
type DebounceKeep string

const (
	// DebounceLast keeps the input of the latest start (the default).
	DebounceLast DebounceKeep = ""
	// DebounceFirst keeps the input of the start that opened the run.
	DebounceFirst DebounceKeep = "first"
)

// Debounce makes many starts one run. Starts of one workflow type with one
// Key merge into the open debounced run of that key, a run no worker has
// claimed yet: each start pushes its first execution to Window after
// itself (so it runs once the starts have paused for Window), never to
// later than MaxWait after the start that opened it (0: no cap; else at
// least Window), and never earlier than a previous start put it. Keep
// chooses the input (the latest start's by default); the window moves the
// same way for either. A start that finds no open run opens one, executing
// Window from now; once the run is claimed, the next start opens a new
// one. The merged start's Handle has Created false and the open run's id.
// The run's other options are those of the start that opened it. A
// debounced start takes no ExternalID, IDReusePolicy or StartAt. Window
// is at most MaxDebounceWindow and MaxWait at most MaxDebounceWait (7
// days each); more is ErrInvalidArgument.
type Debounce struct {
	Key     string
	Window  time.Duration
	Keep    DebounceKeep
	MaxWait time.Duration
}

// Bounds of the flow control options of a start.
const (
	// MaxDebounceWindow is the longest Debounce.Window.
	MaxDebounceWindow = store.MaxDebounceWindow
	// MaxDebounceWait is the longest Debounce.MaxWait.
	MaxDebounceWait = store.MaxDebounceWait
	// MaxIDReuseWindow is the longest StartOptions.IDReuseWindow, the
	// longest retention period: no ended run is kept longer.
	MaxIDReuseWindow = store.MaxIDReuseWindow
)

// IDReusePolicy says whether a start's ExternalID may name a new run given
// the runs that held it before. Under every policy but TerminateIfRunning
// a live run (PENDING, RUNNING, SLEEPING) holding the id is returned, with
// Handle.Created false, as without a policy.
type IDReusePolicy string

const (
	// AllowDuplicate (the default): a new run whenever no live run holds
	// the id, whatever the ended ones did.
	AllowDuplicate IDReusePolicy = ""
	// AllowDuplicateFailedOnly: a new run only if the last run that held
	// the id (and ended within IDReuseWindow, if set) ended FAILED or
	// CANCELLED; after a COMPLETED one the start is refused with an
	// *IDReuseError.
	AllowDuplicateFailedOnly IDReusePolicy = "failed-only"
	// RejectDuplicate: a run that held the id and ended within
	// IDReuseWindow (0: ever, as long as retention keeps it) refuses the
	// start with an *IDReuseError.
	RejectDuplicate IDReusePolicy = "reject"
	// TerminateIfRunning: the live run holding the id, if any, is
	// terminated (CANCELLED, "terminated: id reuse: replaced by run
	// <new id>") and the new run started, in one transaction. Ended runs
	// do not count.
	TerminateIfRunning IDReusePolicy = "terminate"
)

// ParseIDReusePolicy reads a policy as the CLI spells it: allow,
// failed-only, reject or terminate.
func ParseIDReusePolicy(s string) (IDReusePolicy, error) {
	switch s {
	case "allow", "":
		return AllowDuplicate, nil
	case string(AllowDuplicateFailedOnly), string(RejectDuplicate), string(TerminateIfRunning):
		return IDReusePolicy(s), nil
	}
	return "", fmt.Errorf("%w: id reuse policy %q is not allow, failed-only, reject or terminate", ErrInvalidArgument, s)
}

// ErrIDReused is wrapped by the *IDReuseError of a start that its id reuse
// policy refused; it wraps ErrConflict.
var ErrIDReused = store.ErrIDReused

// IDReuseError refuses a start whose ExternalID a run that ended held,
// under the start's IDReusePolicy. Nothing was started.
type IDReuseError struct {
	ExternalID string
	Policy     IDReusePolicy
	// ExistingRunID is the run that held the id; Status and FinishedAt
	// say how and when it ended.
	ExistingRunID uuid.UUID
	Status        RunStatus
	FinishedAt    time.Time
}

func (e *IDReuseError) Error() string {
	return fmt.Sprintf("external id %q: run %s ended %s at %s and the id reuse policy is %s: %v",
		e.ExternalID, e.ExistingRunID, e.Status, e.FinishedAt.UTC().Format(time.RFC3339), e.Policy, ErrIDReused)
}

// Unwrap makes errors.Is(err, ErrIDReused) and errors.Is(err, ErrConflict)
// hold.
func (e *IDReuseError) Unwrap() error { return ErrIDReused }

var storeIDReuse = map[IDReusePolicy]store.IDReusePolicy{
	AllowDuplicate:           store.IDReuseAllowDuplicate,
	AllowDuplicateFailedOnly: store.IDReuseFailedOnly,
	RejectDuplicate:          store.IDReuseReject,
	TerminateIfRunning:       store.IDReuseTerminate,
}

// flowParams puts o's debounce and id reuse options on p; the store checks
// them.
func flowParams(p *store.RunsCreateParams, o StartOptions) error {
	pol, ok := storeIDReuse[o.IDReusePolicy]
	if !ok {
		return fmt.Errorf("%w: id reuse policy %q is not one of the client's", ErrInvalidArgument, o.IDReusePolicy)
	}
	p.IDReuse, p.IDReuseWindow = pol, o.IDReuseWindow
	if d := o.Debounce; d != nil {
		keep := store.DebounceLast
		switch d.Keep {
		case DebounceLast:
		case DebounceFirst:
			keep = store.DebounceFirst
		default:
			return fmt.Errorf("%w: debounce keep %q is not %q or %q", ErrInvalidArgument, d.Keep, DebounceLast, DebounceFirst)
		}
		p.Debounce = &store.Debounce{Key: d.Key, Window: d.Window, Keep: keep, MaxWait: d.MaxWait}
	}
	return nil
}

// flowError gives a store's *IDReuseError in err the client's form.
func flowError(err error) error {
	var se *store.IDReuseError
	if !errors.As(err, &se) {
		return err
	}
	pol := AllowDuplicate
	for k, v := range storeIDReuse {
		if v == se.Policy {
			pol = k
		}
	}
	return &IDReuseError{ExternalID: se.ExternalID, Policy: pol, ExistingRunID: se.ExistingRunID,
		Status: se.Status, FinishedAt: se.FinishedAt}
}

// countDebounced counts n starts merged into open debounced runs.
func (c *Client) countDebounced(ctx context.Context, n int64, queue, typ string) {
	c.debounced.Add(ctx, n, metric.WithAttributes(attribute.String("namespace", c.ns), attribute.String("queue", queue),
		attribute.String("workflow_type", typ)))
}
