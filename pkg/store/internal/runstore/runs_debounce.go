package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/internal/durations"
)

// DebounceKeep says which start's input a debounced run keeps.
type DebounceKeep string

const (
	// DebounceLast keeps the input of the latest start (the default).
	DebounceLast DebounceKeep = ""
	// DebounceFirst keeps the input of the start that opened the run.
	DebounceFirst DebounceKeep = "FIRST"
)

// Debounce makes many starts one run. Starts of one workflow type with one
// Key in one namespace merge into the open debounced run of that key: a
// PENDING run no worker has claimed yet. Each start pushes the run's first
// claim to Window after itself (a trailing edge: the run executes once the
// starts have paused for Window), but never to later than MaxWait after
// the start that opened it, so a steady stream of starts still runs; a
// start never moves the run earlier. Keep chooses the input the run gets;
// the window moves the same way for either. A start with no open run
// opens one, claimable Window from now. Once the run is claimed, the next
// start opens a new run. The run's other options (queue, version,
// deadline, retry policy, priority, trace) are those of the start that
// opened it.
type Debounce struct {
	Key     string
	Window  time.Duration
	Keep    DebounceKeep
	MaxWait time.Duration // 0: no cap
}

// Window is at most MaxDebounceWindow and MaxWait at most MaxDebounceWait.

// Bounds of a debounce. A week covers a daily digest that waits out a
// quiet weekend; a longer window would park a run nobody is waiting for.
const (
	// MaxDebounceWindow is the longest Debounce.Window.
	MaxDebounceWindow = 7 * 24 * time.Hour
	// MaxDebounceWait is the longest Debounce.MaxWait.
	MaxDebounceWait = 7 * 24 * time.Hour
)

// checkDebounce checks p's debounce options and what they exclude.
func checkDebounce(p *RunsCreateParams) error {
	d := p.Debounce
	if d == nil {
		return nil
	}
	if err := checkPrintable("debounce key", d.Key); err != nil {
		return err
	}
	switch {
	case d.Key == "":
		return invalidf("debounce key is required")
	case len(d.Key) > maxNameLen:
		return invalidf("debounce key is %d bytes, at most %d", len(d.Key), maxNameLen)
	case d.Window <= 0:
		return invalidf("debounce window %s must be positive", d.Window)
	case d.Window > MaxDebounceWindow:
		return invalidf("debounce window %s is above the maximum %s", durations.Format(d.Window), durations.Format(MaxDebounceWindow))
	case d.MaxWait > MaxDebounceWait:
		return invalidf("debounce max wait %s is above the maximum %s", durations.Format(d.MaxWait), durations.Format(MaxDebounceWait))
	case d.MaxWait < 0 || (d.MaxWait > 0 && d.MaxWait < d.Window):
		return invalidf("debounce max wait %s must be 0 (no cap) or at least the window %s", d.MaxWait, d.Window)
	case d.Keep != DebounceLast && d.Keep != DebounceFirst:
		return invalidf("debounce keep %q is not \"\" (last) or %q", d.Keep, DebounceFirst)
	case p.ExternalID != "":
		return invalidf("a debounced start takes no external id: its debounce key names its run")
	case p.IDReuse != "":
		return invalidf("a debounced start takes no id reuse policy")
	case p.AvailableAt != nil:
		return invalidf("a debounced start takes no start time: its window sets it")
	case p.ScheduleID != nil || p.ParentRunID != nil:
		return invalidf("only top-level starts are debounced")
	}
	return nil
}

// runsDebounceSQL opens a debounced run or merges a start into the open
// one. The open run of a key is the one row of workflow_runs_debounce_idx
// (migration 014_flow_create.sql): the insert meets it and updates it
// instead, under its row lock, so concurrent starts serialise on it; a
// claim that committed first has taken it out of the index (RUNNING,
// started_at set), and the insert then opens a new run. A claim that
// comes while the row is locked skips it (SKIP LOCKED) and finds it on
// its next look, at the due time this statement sets. A merged start
// replaces the open run's input only when @keep_last.
var runsDebounceSQL = stmt("RunsDebounce")

// runsDebounce starts the validated, debounced run p: it opens a run
// (created) or merges into the open one of its key, and returns that run
// as the start left it.
func (s *Runs) runsDebounce(ctx context.Context, p RunsCreateParams, policy []byte) (Run, bool, error) {
	d := p.Debounce
	var pol, trace *string
	if policy != nil {
		v := string(policy)
		pol = &v
	}
	trace = nullText(p.TraceContext)
	var maxWait *time.Duration
	if d.MaxWait > 0 {
		maxWait = &d.MaxWait
	}
	what := fmt.Sprintf("debounced start of %s with key %q", p.Type, d.Key)
	run, err := scanRun(runsDebounceSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{
		"run_id": p.RunID, "namespace": p.Namespace, "queue": p.Queue, "type": p.Type, "version": p.Version,
		"window": d.Window, "max_wait": maxWait, "deadline": p.DeadlineAt, "retry_policy": pol, "priority": int32(p.Priority),
		"trace_context": trace, "key": d.Key, "input": p.Input, "keep_last": d.Keep == DebounceLast,
		"require_worker": p.RequireWorker, "concurrency_key": nullText(p.ConcurrencyKey), "rate_key": nullText(p.RateLimitKey),
	}))
	if err != nil {
		return Run{}, false, mapErr(what, err)
	}
	created := run.ID == p.RunID
	if created || d.Keep == DebounceLast {
		run.Input = p.Input
	}
	run.DebounceKey = d.Key
	return run, created, nil
}
