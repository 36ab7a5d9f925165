package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// print writes v as indented JSON with --json, else calls table with a
// tabwriter over the command's output (flushed afterwards).
func (a *app) print(cmd *cobra.Command, v any, table func(w io.Writer)) error {
	out := cmd.OutOrStdout()
	if a.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// parseUUID is uuid.Parse without its leniency about braces: it takes any
// two characters around a 36-character UUID as braces, so a quoted id, or
// an external id that wraps a UUID, would name that run.
func parseUUID(s string) (uuid.UUID, error) {
	if len(s) == 38 && (s[0] != '{' || s[37] != '}') {
		return uuid.Nil, errors.New("invalid UUID format")
	}
	return uuid.Parse(s)
}

// parseID parses a UUID argument; a bad one is a usage error.
func parseID(what, s string) (uuid.UUID, error) {
	id, err := parseUUID(s)
	if err != nil {
		return uuid.Nil, usagef("%s %q is not a UUID (like 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e): %v", what, s, err)
	}
	return id, nil
}

// readJSON reads a JSON flag value: inline JSON, @FILE to read a file, or
// - to read standard input. Empty means absent (nil). Invalid JSON, or
// JSON that is not UTF-8, is a usage error naming the flag.
func readJSON(cmd *cobra.Command, flag, v string) ([]byte, error) {
	var b []byte
	switch {
	case v == "":
		return nil, nil
	case v == "-":
		var err error
		if b, err = io.ReadAll(cmd.InOrStdin()); err != nil {
			return nil, fmt.Errorf("--%s -: read standard input: %w", flag, err)
		}
	case strings.HasPrefix(v, "@"):
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, usagef("--%s %s: %v", flag, v, err)
		}
	default:
		b = []byte(v)
	}
	if !json.Valid(b) {
		var x any
		err := json.Unmarshal(b, &x)
		return nil, usagef("--%s is not valid JSON (%v); quote it for the shell, e.g. --%s '{\"key\": \"value\"}'", flag, err, flag)
	}
	// JSON text is UTF-8; a decoder would read each bad byte as U+FFFD.
	if !utf8.Valid(b) {
		return nil, usagef("--%s is not UTF-8: JSON text must be (convert it, e.g. with iconv)", flag)
	}
	return b, nil
}

// parseStatuses reads a list of run statuses, case-insensitive.
func parseStatuses(in []string) ([]store.RunStatus, error) {
	var out []store.RunStatus
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		st := store.RunStatus(strings.ToUpper(s))
		if !st.Valid() {
			return nil, usagef("--status %q is not a run status; use PENDING, RUNNING, SLEEPING, COMPLETED, FAILED, CANCELLED, SCHEDULED or PAUSED", s)
		}
		out = append(out, st)
	}
	return out, nil
}

// payload makes a stored JSON payload printable as JSON.
func payload(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// runJSON is a run as the CLI prints it with --json.
type runJSON struct {
	RunID          uuid.UUID       `json:"run_id"`
	Namespace      string          `json:"namespace"`
	ExternalID     string          `json:"external_id,omitempty"`
	Queue          string          `json:"queue"`
	Type           string          `json:"type"`
	Version        string          `json:"version,omitempty"`
	Status         store.RunStatus `json:"status"`
	Attempts       int             `json:"attempts"`
	Priority       int             `json:"priority"`
	Error          string          `json:"error,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	AvailableAt    *time.Time      `json:"available_at,omitempty"`
	DeadlineAt     *time.Time      `json:"deadline_at,omitempty"`
	LockedBy       *uuid.UUID      `json:"locked_by,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	ParentRunID    *uuid.UUID      `json:"parent_run_id,omitempty"`
	ParentStepID   string          `json:"parent_step_id,omitempty"`
	ScheduleID     *uuid.UUID      `json:"schedule_id,omitempty"`
	ScheduleFireAt *time.Time      `json:"schedule_fire_at,omitempty"`
	RetryPolicy    *retry.Policy   `json:"retry_policy,omitempty"`
	// DebounceKey is a debounced run's key and DebounceStarts the starts
	// it took in; ConcurrencyKey and RateLimitKey are its flow control
	// keys. Each is set by run show only, and absent when empty.
	DebounceKey    string `json:"debounce_key,omitempty"`
	DebounceStarts int    `json:"debounce_starts,omitempty"`
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	RateLimitKey   string `json:"rate_limit_key,omitempty"`
	// TraceID is the run's trace in the OpenTelemetry backend.
	TraceID string          `json:"trace_id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// traceID is the trace id of a W3C traceparent ("" if it is not one).
func traceID(tc string) string {
	parts := strings.Split(tc, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

func toRunJSON(r store.Run) runJSON {
	return runJSON{
		RunID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: r.Status, Attempts: r.Attempts, Priority: r.Priority, Error: r.Error,
		CreatedAt: r.CreatedAt.UTC(), StartedAt: utc(r.StartedAt), FinishedAt: utc(r.FinishedAt),
		AvailableAt: utc(r.AvailableAt), DeadlineAt: utc(r.DeadlineAt), LockedBy: r.LockedBy,
		LeaseExpiresAt: utc(r.LeaseExpiresAt), ParentRunID: r.ParentRunID, ParentStepID: r.ParentStepID,
		ScheduleID: r.ScheduleID, ScheduleFireAt: utc(r.ScheduleFireAt), RetryPolicy: r.RetryPolicy,
		TraceID: traceID(r.TraceContext), Input: payload(r.Input), Output: payload(r.Output),
		DebounceKey: r.DebounceKey, DebounceStarts: r.DebounceStarts, ConcurrencyKey: r.ConcurrencyKey, RateLimitKey: r.RateLimitKey,
	}
}

// clientRunJSON prints a run as the client returns it (without lease).
func clientRunJSON(r client.Run) runJSON {
	return toRunJSON(store.Run{ID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: store.RunStatus(r.Status), Attempts: r.Attempts, Priority: r.Priority, Error: r.Error,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, DeadlineAt: r.DeadlineAt,
		ParentRunID: r.ParentRunID, ParentStepID: r.ParentStepID, ScheduleID: r.ScheduleID, RetryPolicy: r.RetryPolicy,
		Input: r.Input, Output: r.Output, DebounceKey: r.DebounceKey, DebounceStarts: r.DebounceStarts,
		ConcurrencyKey: r.ConcurrencyKey, RateLimitKey: r.RateLimitKey})
}

func toRunsJSON(rs []store.Run) []runJSON {
	out := make([]runJSON, len(rs))
	for i, r := range rs {
		out[i] = toRunJSON(r)
	}
	return out
}

// Event states as `run show` prints them.
const (
	eventReceived   = "RECEIVED"
	eventPending    = "PENDING"
	eventUnreceived = "UNRECEIVED"
)

// eventState is what became of an event: received (by its consumed_by
// step), pending (its run may still receive it), or unreceived (its run
// ended without it).
func eventState(e store.Event) string {
	switch {
	case e.ConsumedAt != nil:
		return eventReceived
	case e.Unreceived:
		return eventUnreceived
	}
	return eventPending
}

// runEventJSON is an event sent to a run as `run show --json` prints it.
type runEventJSON struct {
	EventID uuid.UUID `json:"event_id"`
	Name    string    `json:"name"`
	// State is RECEIVED, PENDING or UNRECEIVED (eventState).
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"created_at"`
	ConsumedAt *time.Time      `json:"consumed_at,omitempty"`
	ConsumedBy string          `json:"consumed_by,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

func toRunEventJSON(e store.Event) runEventJSON {
	return runEventJSON{EventID: e.ID, Name: e.Name, State: eventState(e), CreatedAt: e.CreatedAt.UTC(),
		ConsumedAt: utc(e.ConsumedAt), ConsumedBy: e.ConsumedBy, Payload: payload(e.Payload)}
}

// stepJSON is one step attempt as printed with --json.
type stepJSON struct {
	StepID     string           `json:"step_id"`
	Kind       store.StepKind   `json:"kind"`
	Attempt    int              `json:"attempt"`
	Status     store.StepStatus `json:"status"`
	Latest     bool             `json:"latest"`
	CreatedAt  time.Time        `json:"created_at"`
	StartedAt  *time.Time       `json:"started_at,omitempty"`
	FinishedAt *time.Time       `json:"finished_at,omitempty"`
	DurationMS *int64           `json:"duration_ms,omitempty"`
	RetryAt    *time.Time       `json:"retry_at,omitempty"`
	ChildRunID *uuid.UUID       `json:"child_run_id,omitempty"`
	Error      string           `json:"error,omitempty"`
	Input      json.RawMessage  `json:"input,omitempty"`
	Output     json.RawMessage  `json:"output,omitempty"`
}

func toStepJSON(s store.Step) stepJSON {
	j := stepJSON{StepID: s.StepID, Kind: s.Kind, Attempt: s.Attempt, Status: s.Status, Latest: s.IsLatest,
		CreatedAt: s.CreatedAt.UTC(), StartedAt: utc(s.StartedAt), FinishedAt: utc(s.FinishedAt),
		RetryAt: utc(s.RetryAt), ChildRunID: s.ChildRunID, Error: s.Error,
		Input: payload(s.Input), Output: payload(s.Output)}
	if s.StartedAt != nil && s.FinishedAt != nil {
		ms := s.FinishedAt.Sub(*s.StartedAt).Milliseconds()
		j.DurationMS = &ms
	}
	return j
}

// scheduleJSON is a schedule as printed with --json.
type scheduleJSON struct {
	ScheduleID  uuid.UUID       `json:"schedule_id"`
	Namespace   string          `json:"namespace"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Version     string          `json:"version,omitempty"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	Status      store.RunStatus `json:"status"`
	MaxCatchup  int             `json:"max_catchup"`
	NextFireAt  *time.Time      `json:"next_fire_at,omitempty"`
	LastFiredAt *time.Time      `json:"last_fired_at,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	RetryPolicy *retry.Policy   `json:"retry_policy,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Overlap     string          `json:"overlap"`
	// JitterMS is the jitter in milliseconds (0: none).
	JitterMS       int64      `json:"jitter_ms,omitempty"`
	BufferedFireAt *time.Time `json:"buffered_fire_at,omitempty"`
	ConcurrencyKey string     `json:"concurrency_key,omitempty"`
	RateLimitKey   string     `json:"rate_limit_key,omitempty"`
}

func toScheduleJSON(s store.Schedule) scheduleJSON {
	return scheduleJSON{ScheduleID: s.ID, Namespace: s.Namespace, Queue: s.Queue, Type: s.Type, Version: s.Version,
		Cron: s.Cron, Timezone: s.Timezone, Status: s.Status, MaxCatchup: s.MaxCatchup,
		NextFireAt: utc(s.NextFireAt), LastFiredAt: utc(s.LastFiredAt), CreatedAt: s.CreatedAt.UTC(),
		RetryPolicy: s.RetryPolicy, Input: payload(s.Input), Overlap: string(s.Overlap), JitterMS: s.Jitter.Milliseconds(),
		BufferedFireAt: utc(s.BufferedFireAt), ConcurrencyKey: s.ConcurrencyKey, RateLimitKey: s.RateLimitKey}
}

// workerJSON is a worker as printed with --json.
type workerJSON struct {
	WorkerID        uuid.UUID           `json:"worker_id"`
	Namespace       string              `json:"namespace"`
	Queue           string              `json:"queue"`
	Hostname        string              `json:"hostname"`
	PID             int                 `json:"pid"`
	Version         string              `json:"version,omitempty"`
	Types           []store.TypeVersion `json:"types"`
	MaxConcurrency  int                 `json:"max_concurrency"`
	Status          store.WorkerStatus  `json:"status"`
	RegisteredAt    time.Time           `json:"registered_at"`
	LastHeartbeatAt time.Time           `json:"last_heartbeat_at"`
	DeregisteredAt  *time.Time          `json:"deregistered_at,omitempty"`
	Labels          map[string]string   `json:"labels,omitempty"`
}

func toWorkerJSON(w store.Worker) workerJSON {
	types := w.Types
	if types == nil {
		types = []store.TypeVersion{}
	}
	return workerJSON{WorkerID: w.ID, Namespace: w.Namespace, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID,
		Version: w.Version, Types: types, MaxConcurrency: w.MaxConcurrency, Status: w.Status,
		RegisteredAt: w.RegisteredAt.UTC(), LastHeartbeatAt: w.LastHeartbeatAt.UTC(),
		DeregisteredAt: utc(w.DeregisteredAt), Labels: w.Labels}
}

// Table formatting.

const timeLayout = "2006-01-02 15:04:05"

func fmtTime(t time.Time) string { return t.Local().Format(timeLayout) }

func fmtTimeP(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func fmtTimeMS(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(timeLayout + ".000")
}

// fmtDur prints a duration as the CLI prints every one, and reads every
// one: days, then Go's units without the zero ones ("7d", "1d12h",
// "1h30m", "1.5s"; internal/durations).
func fmtDur(d time.Duration) string { return durations.Format(d) }

// fmtDuration prints a measured duration for a table, rounded to what
// matters at its size.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmtDur(d.Round(time.Microsecond))
	case d < time.Minute:
		return fmtDur(d.Round(time.Millisecond))
	default:
		return fmtDur(d.Round(time.Second))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to one table cell of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func fmtPayload(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.String()
	}
	return string(payload(b))
}
