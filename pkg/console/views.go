package console

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// RunView is a run as the console shows it and /api/v1 returns it.
type RunView struct {
	// RunID is the run's id, named as the CLI's JSON and the client name
	// it. ID holds the same, under the name the API gave it first: it is
	// deprecated and goes in the next release.
	RunID           uuid.UUID  `json:"run_id"`
	ID              uuid.UUID  `json:"id"`
	Namespace       string     `json:"namespace"`
	ExternalID      string     `json:"external_id,omitempty"`
	Queue           string     `json:"queue"`
	Type            string     `json:"type"`
	Version         string     `json:"version,omitempty"`
	Status          string     `json:"status"`
	Attempts        int        `json:"attempts"`
	Error           string     `json:"error,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	AvailableAt     *time.Time `json:"available_at,omitempty"`
	DeadlineAt      *time.Time `json:"deadline_at,omitempty"`
	ParentRunID     *uuid.UUID `json:"parent_run_id,omitempty"`
	ScheduleID      *uuid.UUID `json:"schedule_id,omitempty"`
	LockedBy        *uuid.UUID `json:"locked_by,omitempty"`
	Priority        int        `json:"priority"`
	CancelRequested bool       `json:"cancel_requested,omitempty"`
	// Paused is set for a paused run (who and why: the run's detail).
	Paused bool `json:"paused,omitempty"`
}

func runRow(r *store.Run) RunView {
	return RunView{RunID: r.ID, ID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: string(r.Status), Attempts: r.Attempts, Error: r.Error, CreatedAt: r.CreatedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, AvailableAt: r.AvailableAt, DeadlineAt: r.DeadlineAt,
		ParentRunID: r.ParentRunID, ScheduleID: r.ScheduleID, LockedBy: r.LockedBy, Priority: r.Priority,
		CancelRequested: r.CancelRequestedAt != nil, Paused: r.Paused != nil}
}

// RunsPage is the runs view.
type RunsPage struct {
	Runs   []RunView        `json:"runs"`
	Next   string           `json:"next,omitempty"`
	Counts map[string]int64 `json:"counts"`
	// CountsReady is false while the namespace's counts are first read.
	CountsReady bool       `json:"counts_ready"`
	Filter      RunsFilter `json:"filter"`
}

// RunsFilter are the runs view's filters, as query parameters.
type RunsFilter struct {
	Status     string `json:"status,omitempty"`
	Type       string `json:"type,omitempty"`
	Queue      string `json:"queue,omitempty"`
	Schedule   string `json:"schedule,omitempty"`
	ExternalID string `json:"external_id,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	Input      string `json:"input,omitempty"`
	Output     string `json:"output,omitempty"`
	// Query is a query in Kagzi's query language (kagzi run list
	// --query), over built-in fields and search attributes.
	Query string `json:"query,omitempty"`
}

// StepView is one attempt of one step, placed on the run's timeline.
type StepView struct {
	StepID     string     `json:"step_id"`
	Kind       string     `json:"kind"`
	Status     string     `json:"status"`
	Attempt    int        `json:"attempt"`
	RunAttempt int        `json:"run_attempt"`
	Error      string     `json:"error,omitempty"`
	Output     string     `json:"output,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	RetryAt    *time.Time `json:"retry_at,omitempty"`
	ChildRunID *uuid.UUID `json:"child_run_id,omitempty"`
	// QueueMS is the wait before the attempt started, ExecMS its run time.
	QueueMS int64 `json:"queue_ms"`
	ExecMS  int64 `json:"exec_ms"`
	// Left, Wait and Width place the attempt on the timeline (percent).
	Left  float64 `json:"-"`
	Wait  float64 `json:"-"`
	Width float64 `json:"-"`
	Start float64 `json:"-"`
}

// AttemptView groups the step attempts one run attempt made.
type AttemptView struct {
	Number int        `json:"number"`
	Steps  []StepView `json:"steps"`
}

// EventView is an event sent to a run.
type EventView struct {
	ID         uuid.UUID  `json:"id"`
	Name       string     `json:"name"`
	Payload    string     `json:"payload,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ConsumedAt *time.Time `json:"consumed_at,omitempty"`
	ConsumedBy string     `json:"consumed_by,omitempty"`
	// Unreceived: the run ended without receiving the event (it is not
	// consumed and the run is finished; see store.Event.Unreceived).
	Unreceived bool `json:"unreceived,omitempty"`
}

// ChildView is a node of a run's child tree.
type ChildView struct {
	Run      RunView     `json:"run"`
	Children []ChildView `json:"children,omitempty"`
}

// RunDetail is the run detail view.
type RunDetail struct {
	Run      RunView       `json:"run"`
	Input    string        `json:"input,omitempty"`
	Output   string        `json:"output,omitempty"`
	Attempts []AttemptView `json:"attempts"`
	Events   []EventView   `json:"events"`
	Children []ChildView   `json:"children"`
	TraceID  string        `json:"trace_id,omitempty"`
	TraceURL string        `json:"trace_url,omitempty"`
	// ForkedFrom is the run this one was forked from, at ForkedAtStep (""
	// from the start); Forks are the forks made from it.
	ForkedFrom   *uuid.UUID `json:"forked_from,omitempty"`
	ForkedAtStep string     `json:"forked_at_step,omitempty"`
	Forks        []ForkView `json:"forks"`
	// DebounceKey is a debounced run's key and DebounceStarts the number
	// of starts it took in, its first included (client.Debounce).
	DebounceKey    string `json:"debounce_key,omitempty"`
	DebounceStarts int    `json:"debounce_starts,omitempty"`
	// ConcurrencyKey and RateLimitKey are the run's flow control keys.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	RateLimitKey   string `json:"rate_limit_key,omitempty"`
	// Waiting says why a PENDING or SLEEPING run waits.
	Waiting *WaitingView `json:"waiting,omitempty"`
	// Paused says who paused the run, why and when (kagzi run pause);
	// absent for a run that is not paused.
	Paused *PauseView `json:"paused,omitempty"`
}

// PauseView is a run's pause.
type PauseView struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// PausedScopeView is a paused queue or workflow type (Kind "queue" or
// "type").
type PausedScopeView struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	PauseView
}

// WaitingView is why a run waits (store.Waiting).
type WaitingView struct {
	// Reason is one of store's WaitReason values, e.g. rate_limited.
	Reason string     `json:"reason"`
	Until  *time.Time `json:"until,omitempty"`
	Detail string     `json:"detail"`
}

// pretty indents a JSON payload for display; other bytes are shown as is.
func pretty(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") == nil {
		return out.String()
	}
	return string(b)
}

// traceID takes the trace id out of a W3C traceparent.
func traceID(tc string) string {
	for _, line := range strings.Split(tc, "\n") {
		parts := strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "traceparent=")), "-")
		if len(parts) == 4 && len(parts[1]) == 32 {
			return parts[1]
		}
	}
	if strings.HasPrefix(tc, "{") {
		var m map[string]string
		if json.Unmarshal([]byte(tc), &m) == nil && m["traceparent"] != "" {
			return traceID(m["traceparent"])
		}
	}
	return ""
}

// timeline groups steps by run attempt and places each on a shared axis
// from the run's creation to its end (or now).
func timeline(r *store.Run, steps []store.Step, now time.Time) []AttemptView {
	start := r.CreatedAt
	end := now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	for _, s := range steps {
		if _, ended := s.Span(); ended != nil && ended.After(end) && !ended.After(now) {
			end = *ended
		}
	}
	span := float64(end.Sub(start))
	if span <= 0 {
		span = 1
	}
	pct := func(t time.Time) float64 {
		v := float64(t.Sub(start)) / span * 100
		return min(max(v, 0), 100)
	}
	byAttempt := map[int]int{}
	var out []AttemptView
	// A step's row is written when its result is recorded, after it ran, so
	// its wait is measured from the end of what came before it (the previous
	// step, a sleep or retry delay included, or the run's creation), never
	// from its own row; the worker's clock and the database's may differ a
	// little, so a wait never shows below 0.
	prevEnd := start
	for _, s := range steps {
		v := StepView{StepID: s.StepID, Kind: string(s.Kind), Status: string(s.Status), Attempt: s.Attempt,
			RunAttempt: s.RunAttempt, Error: s.Error, Output: pretty(s.Output), CreatedAt: s.CreatedAt,
			StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, RetryAt: s.RetryAt, ChildRunID: s.ChildRunID}
		began, until := s.Span()
		ended := now
		if until != nil && until.Before(now) {
			ended = *until
		}
		from := prevEnd
		if began.Before(from) {
			from = began
		}
		v.QueueMS = max(began.Sub(from), 0).Milliseconds()
		v.ExecMS = max(ended.Sub(began), 0).Milliseconds()
		v.Left = pct(from)
		v.Wait = max(pct(began)-v.Left, 0)
		v.Width = max(pct(ended)-pct(began), 0.5)
		v.Start = v.Left + v.Wait
		if ended.After(prevEnd) {
			prevEnd = ended
		}
		i, ok := byAttempt[s.RunAttempt]
		if !ok {
			i = len(out)
			byAttempt[s.RunAttempt] = i
			out = append(out, AttemptView{Number: s.RunAttempt})
		}
		out[i].Steps = append(out[i].Steps, v)
	}
	return out
}

// DeadLetterView is a group of failed runs.
type DeadLetterView struct {
	Type        string    `json:"type"`
	Fingerprint string    `json:"fingerprint"`
	Example     string    `json:"example"`
	Count       int64     `json:"count"`
	Newest      time.Time `json:"newest"`
	Oldest      time.Time `json:"oldest"`
}

// RetryResult is the outcome of retrying one run of a bulk retry.
type RetryResult struct {
	RunID uuid.UUID `json:"run_id"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// ScheduleView is a schedule with its next fire times.
type ScheduleView struct {
	ID          uuid.UUID  `json:"id"`
	Type        string     `json:"type"`
	Queue       string     `json:"queue"`
	Cron        string     `json:"cron"`
	Timezone    string     `json:"timezone"`
	Status      string     `json:"status"`
	MaxCatchup  int        `json:"max_catchup"`
	LastFiredAt *time.Time `json:"last_fired_at,omitempty"`
	NextFires   []string   `json:"next_fires"`
	LastRuns    []RunView  `json:"last_runs"`
	CreatedAt   time.Time  `json:"created_at"`
	NextFireAt  *time.Time `json:"next_fire_at,omitempty"`
	// Overlap is the schedule's overlap policy (allow-all, skip,
	// buffer-one, cancel-other, terminate-other).
	Overlap string `json:"overlap"`
	// Jitter is the schedule's jitter ("" when none).
	Jitter string `json:"jitter,omitempty"`
	// BufferedFireAt is the fire a buffer-one schedule holds.
	BufferedFireAt *time.Time `json:"buffered_fire_at,omitempty"`
	// Live counts the live runs among LastRuns (the newest five).
	Live int `json:"live"`
}

// WorkerView is a registered worker.
type WorkerView struct {
	ID             uuid.UUID  `json:"id"`
	Queue          string     `json:"queue"`
	Hostname       string     `json:"hostname"`
	PID            int        `json:"pid"`
	Version        string     `json:"version,omitempty"`
	Status         string     `json:"status"`
	LastHeartbeat  time.Time  `json:"last_heartbeat_at"`
	RegisteredAt   time.Time  `json:"registered_at"`
	DeregisteredAt *time.Time `json:"deregistered_at,omitempty"`
	Types          []string   `json:"types"`
	MaxConcurrency int        `json:"max_concurrency"`
	Held           int        `json:"runs_held"`
}

// QueueView is a queue's live runs per type, with limits.
type QueueView struct {
	Queue       string     `json:"queue"`
	Type        string     `json:"type"`
	Due         int64      `json:"due"`
	Running     int64      `json:"running"`
	Sleeping    int64      `json:"sleeping"`
	OldestDueMS int64      `json:"oldest_due_age_ms"`
	OldestDue   *time.Time `json:"oldest_due_at,omitempty"`
	Limit       *int       `json:"limit,omitempty"`
}

// LimitView is a concurrency limit: Max caps the type's RUNNING runs
// (-1, store.NoLimit, when the type has only a per-key limit), MaxPerKey
// the RUNNING runs per concurrency key (0 when none).
type LimitView struct {
	Queue     string `json:"queue"`
	Type      string `json:"type"`
	Max       int    `json:"max"`
	MaxPerKey int    `json:"max_per_key"`
}

func limitView(l client.ConcurrencyLimit) LimitView {
	return LimitView{Queue: l.Queue, Type: l.Type, Max: l.MaxRunning, MaxPerKey: l.MaxPerKey}
}

// LimitUseView is a concurrency limit with its use now: the type's RUNNING
// runs and, under a per-key limit, the busiest keys (at most
// LimitsView.TopKeys) with theirs.
type LimitUseView struct {
	LimitView
	Running int64          `json:"running"`
	Keys    []KeyUsageView `json:"keys"`
}

// KeyUsageView is one concurrency key and its RUNNING runs.
type KeyUsageView struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
}

// RateLimitView is a rate limit with the claims counted in the current
// window, which runs from WindowStart to WindowEnd.
type RateLimitView struct {
	Key         string    `json:"key"`
	Limit       int       `json:"limit"`
	Period      string    `json:"period"`
	PeriodMS    int64     `json:"period_ms"`
	Claims      int       `json:"claims"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
}

// LimitsView is the Limits panel: the namespace's concurrency limits with
// their use now, and its rate limits with their current windows.
type LimitsView struct {
	Concurrency []LimitUseView  `json:"concurrency"`
	Rate        []RateLimitView `json:"rate"`
	// TopKeys is how many of a per-key limit's busiest keys are listed.
	TopKeys int `json:"top_keys"`
}
