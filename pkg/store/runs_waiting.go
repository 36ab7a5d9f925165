package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// WaitReason names why a run that is not running waits.
type WaitReason string

// The reasons RunsWaiting gives, the first that applies in this order.
const (
	// WaitPaused: the run, its queue or its workflow type is paused
	// (RunsPause, PausesAdd); it is claimed again once resumed (Until is
	// nil: a pause does not end by itself).
	WaitPaused WaitReason = "paused"
	// WaitEvent: the run waits for an event (until its timeout, if any).
	WaitEvent WaitReason = "event"
	// WaitSleeping: the run sleeps (workflow.Sleep) until its wake time.
	WaitSleeping WaitReason = "sleeping"
	// WaitRetry: a step failed and is retried at a time (its backoff), or
	// the run's failed attempt is.
	WaitRetry WaitReason = "retry"
	// WaitChildren: the run waits for child runs to end.
	WaitChildren WaitReason = "children"
	// WaitRateLimited: its rate limit key's windows are full; it is due in
	// the first with room.
	WaitRateLimited WaitReason = "rate_limited"
	// WaitDebounced: an open debounced run, started when no start with its
	// key came for its window (or at its maximum wait).
	WaitDebounced WaitReason = "debounced"
	// WaitScheduled: its start was deferred (StartOptions.StartAt).
	WaitScheduled WaitReason = "scheduled"
	// WaitNoWorker: due, but no live worker serves its type on its queue.
	WaitNoWorker WaitReason = "no_worker"
	// WaitKeyLimit: due, but its concurrency key has as many runs running
	// as its type's per-key limit allows.
	WaitKeyLimit WaitReason = "key_limit"
	// WaitTypeLimit: due, but its type has as many runs running as its
	// concurrency limit allows.
	WaitTypeLimit WaitReason = "type_limit"
	// WaitDue: due, and nothing holds it: a dispatcher claims it when a
	// worker serving it has a free slot.
	WaitDue WaitReason = "due"
)

// Waiting says why a PENDING or SLEEPING run waits, and until when.
type Waiting struct {
	Reason WaitReason
	// Until is when the wait ends by itself (nil when it ends only by
	// something happening: an event, a worker, a free slot).
	Until *time.Time
	// Detail says it in words, with the key, step or event concerned
	// (Until not included).
	Detail string
}

// runsWaitFactsSQL is the statement of RunsWaiting.
var runsWaitFactsSQL = stmt("RunsWaitFacts")

// RunsWaiting says why run id waits; ok is false for a run that does not
// (running or finished). It reads the run, its latest step and its type's
// limits in one statement and, for a run due now, which live workers
// serve it.
func (s *Store) RunsWaiting(ctx context.Context, namespace string, id uuid.UUID) (w Waiting, ok bool, err error) {
	var (
		queue, typ, version              string
		status                           RunStatus
		availableAt, rateDueAt, retryAt  *time.Time
		attempts                         int
		rateKey                          *string
		waitingOn                        []string
		debouncing                       bool
		concurrencyKey, kind, stepStatus string
		stepID                           string
		childID                          *uuid.UUID
		maxRunning, maxPerKey            *int
		running, runningKey              *int64
		paused                           bool
		pausedBy, pausedReason           string
		pausedDueAt                      *time.Time
		scopePaused                      *string
	)
	err = runsWaitFactsSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "id": id}).Scan(
		&queue, &typ, &version, &status, &availableAt, &attempts, &rateKey, &rateDueAt, &waitingOn, &debouncing, &concurrencyKey,
		&kind, &stepStatus, &stepID, &retryAt, &childID, &maxRunning, &maxPerKey, &running, &runningKey,
		&paused, &pausedBy, &pausedReason, &pausedDueAt, &scopePaused)
	if err != nil {
		return Waiting{}, false, mapErr(fmt.Sprintf("read why run %s waits", id), err)
	}
	if status != StatusPending && status != StatusSleeping {
		return Waiting{}, false, nil
	}
	now := time.Now()
	if paused {
		w := Waiting{Reason: WaitPaused, Detail: "paused"}
		if pausedBy != "" {
			w.Detail += " by " + protocol.Echo(pausedBy)
		}
		if pausedReason != "" {
			w.Detail += ": " + protocol.Echo(pausedReason)
		}
		if pausedDueAt != nil {
			w.Detail += "; due " + pausedDueAt.UTC().Format(time.RFC3339) + " once resumed"
		}
		return w, true, nil
	}
	if scopePaused != nil {
		return Waiting{Reason: WaitPaused, Detail: "its " + protocol.Echo(*scopePaused) + " is paused"}, true, nil
	}
	ahead := availableAt != nil && availableAt.After(now)
	at := func(r WaitReason, format string, args ...any) (Waiting, bool, error) {
		w := Waiting{Reason: r, Detail: fmt.Sprintf(format, args...)}
		if ahead {
			w.Until = availableAt
		}
		return w, true, nil
	}
	switch {
	case len(waitingOn) > 0:
		names := make([]string, len(waitingOn))
		for i, n := range waitingOn {
			names[i] = protocol.Echo(n)
		}
		return at(WaitEvent, "waiting for event %s", strings.Join(names, ", "))
	case ahead && StepKind(kind) == StepSleep && StepStatus(stepStatus) == StepCompleted:
		return at(WaitSleeping, "sleeping (step %s)", protocol.Echo(stepID))
	case ahead && StepStatus(stepStatus) == StepFailed && retryAt != nil && !retryAt.Before(*availableAt):
		return at(WaitRetry, "step %s failed and is retried", protocol.Echo(stepID))
	case status == StatusSleeping && availableAt == nil && StepKind(kind) == StepChild:
		if childID != nil {
			return at(WaitChildren, "waiting for child run %s (step %s)", childID, protocol.Echo(stepID))
		}
		return at(WaitChildren, "waiting for a child run (step %s)", protocol.Echo(stepID))
	case status == StatusSleeping && availableAt == nil:
		return at(WaitChildren, "waiting for child runs or events")
	case ahead && rateDueAt != nil && rateKey != nil:
		return at(WaitRateLimited, "held by the rate limit of key %s, whose windows are full", protocol.Echo(*rateKey))
	case ahead && debouncing:
		return at(WaitDebounced, "debounced: another start with its key before then pushes it back")
	case ahead && attempts > 0:
		return at(WaitRetry, "attempt %d failed and the run is retried", attempts)
	case ahead && status == StatusSleeping:
		return at(WaitSleeping, "sleeping")
	case ahead:
		return at(WaitScheduled, "its start is deferred")
	}
	// Due now: what keeps it from being claimed.
	n, err := s.WorkersServing(ctx, namespace, queue, typ, version)
	if err != nil {
		return Waiting{}, false, err
	}
	tv := protocol.Echo(typ)
	if version != "" {
		tv += "@" + protocol.Echo(version)
	}
	switch {
	case n == 0:
		return at(WaitNoWorker, "no live worker serves %s on queue %s; it is claimed when one registers", tv, protocol.Echo(queue))
	case maxPerKey != nil && runningKey != nil && *runningKey >= int64(*maxPerKey):
		return at(WaitKeyLimit, "%d of the %d runs concurrency key %s may run at once are running", *runningKey, *maxPerKey,
			protocol.Echo(concurrencyKey))
	case maxRunning != nil && running != nil && *running >= int64(*maxRunning):
		return at(WaitTypeLimit, "%d of the %d runs of %s its concurrency limit allows are running", *running, *maxRunning, tv)
	}
	return at(WaitDue, "due: claimed when one of the %d live workers serving %s has a free slot", n, tv)
}
