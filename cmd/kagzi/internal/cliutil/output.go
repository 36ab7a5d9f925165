package cliutil

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

// Print writes v as indented JSON with --json, else calls table with a
// tabwriter over the command's output (flushed afterwards).
func (a *App) Print(cmd *cobra.Command, v any, table func(w io.Writer)) error {
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

// ParseUUID is uuid.Parse without its leniency about braces: it takes any
// two characters around a 36-character UUID as braces, so a quoted id, or
// an external id that wraps a UUID, would name that run.
func ParseUUID(s string) (uuid.UUID, error) {
	if len(s) == 38 && (s[0] != '{' || s[37] != '}') {
		return uuid.Nil, errors.New("invalid UUID format")
	}
	return uuid.Parse(s)
}

// ParseID parses a UUID argument; a bad one is a usage error.
func ParseID(what, s string) (uuid.UUID, error) {
	id, err := ParseUUID(s)
	if err != nil {
		return uuid.Nil, Usagef("%s %q is not a UUID (like 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e): %v", what, s, err)
	}
	return id, nil
}

// ReadJSON reads a JSON flag value: inline JSON, @FILE to read a file, or
// - to read standard input. Empty means absent (nil). Invalid JSON, or
// JSON that is not UTF-8, is a usage error naming the flag.
func ReadJSON(cmd *cobra.Command, flag, v string) ([]byte, error) {
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
			return nil, Usagef("--%s %s: %v", flag, v, err)
		}
	default:
		b = []byte(v)
	}
	if !json.Valid(b) {
		var x any
		err := json.Unmarshal(b, &x)
		return nil, Usagef("--%s is not valid JSON (%v); quote it for the shell, e.g. --%s '{\"key\": \"value\"}'", flag, err, flag)
	}
	// JSON text is UTF-8; a decoder would read each bad byte as U+FFFD.
	if !utf8.Valid(b) {
		return nil, Usagef("--%s is not UTF-8: JSON text must be (convert it, e.g. with iconv)", flag)
	}
	return b, nil
}

// ParseStatuses reads a list of run statuses, case-insensitive.
func ParseStatuses(in []string) ([]store.RunStatus, error) {
	var out []store.RunStatus
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		st := store.RunStatus(strings.ToUpper(s))
		if !st.Valid() {
			return nil, Usagef("--status %q is not a run status; use PENDING, RUNNING, SLEEPING, COMPLETED, FAILED, CANCELLED, SCHEDULED or PAUSED", s)
		}
		out = append(out, st)
	}
	return out, nil
}

// Payload makes a stored JSON payload printable as JSON.
func Payload(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

// UTC is t in UTC (nil stays nil), so JSON prints times alike.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// RunJSON is a run as the CLI prints it with --json.
type RunJSON struct {
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
	// Paused says who paused the run, why and when; absent for a run that
	// is not paused (run show, run list).
	Paused *PauseJSON `json:"paused,omitempty"`
	// TraceID is the run's trace in the OpenTelemetry backend.
	TraceID string          `json:"trace_id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// PauseJSON is a pause as the CLI prints it.
type PauseJSON struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ToPauseJSON prints a pause (nil for none).
func ToPauseJSON(p *store.Pause) *PauseJSON {
	if p == nil {
		return nil
	}
	return &PauseJSON{By: p.By, Reason: p.Reason, At: p.At.UTC()}
}

// TraceID is the trace id of a W3C traceparent ("" if it is not one).
func TraceID(tc string) string {
	parts := strings.Split(tc, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// ToRunJSON prints a run of the store.
func ToRunJSON(r store.Run) RunJSON {
	return RunJSON{
		RunID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: r.Status, Attempts: r.Attempts, Priority: r.Priority, Error: r.Error,
		CreatedAt: r.CreatedAt.UTC(), StartedAt: UTC(r.StartedAt), FinishedAt: UTC(r.FinishedAt),
		AvailableAt: UTC(r.AvailableAt), DeadlineAt: UTC(r.DeadlineAt), LockedBy: r.LockedBy,
		LeaseExpiresAt: UTC(r.LeaseExpiresAt), ParentRunID: r.ParentRunID, ParentStepID: r.ParentStepID,
		ScheduleID: r.ScheduleID, ScheduleFireAt: UTC(r.ScheduleFireAt), RetryPolicy: r.RetryPolicy,
		TraceID: TraceID(r.TraceContext), Input: Payload(r.Input), Output: Payload(r.Output),
		DebounceKey: r.DebounceKey, DebounceStarts: r.DebounceStarts, ConcurrencyKey: r.ConcurrencyKey, RateLimitKey: r.RateLimitKey,
		Paused: ToPauseJSON(r.Paused),
	}
}

// ClientRunJSON prints a run as the client returns it (without lease).
func ClientRunJSON(r client.Run) RunJSON {
	return ToRunJSON(store.Run{ID: r.ID, Namespace: r.Namespace, ExternalID: r.ExternalID, Queue: r.Queue, Type: r.Type,
		Version: r.Version, Status: store.RunStatus(r.Status), Attempts: r.Attempts, Priority: r.Priority, Error: r.Error,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, DeadlineAt: r.DeadlineAt,
		ParentRunID: r.ParentRunID, ParentStepID: r.ParentStepID, ScheduleID: r.ScheduleID, RetryPolicy: r.RetryPolicy,
		Input: r.Input, Output: r.Output, DebounceKey: r.DebounceKey, DebounceStarts: r.DebounceStarts,
		ConcurrencyKey: r.ConcurrencyKey, RateLimitKey: r.RateLimitKey, Paused: r.Paused})
}

// ToRunsJSON prints runs of the store.
func ToRunsJSON(rs []store.Run) []RunJSON {
	out := make([]RunJSON, len(rs))
	for i, r := range rs {
		out[i] = ToRunJSON(r)
	}
	return out
}

// Event states as `run show` prints them.
const (
	EventReceived   = "RECEIVED"
	EventPending    = "PENDING"
	EventUnreceived = "UNRECEIVED"
)

// EventState is what became of an event: received (by its consumed_by
// step), pending (its run may still receive it), or unreceived (its run
// ended without it).
func EventState(e store.Event) string {
	switch {
	case e.ConsumedAt != nil:
		return EventReceived
	case e.Unreceived:
		return EventUnreceived
	}
	return EventPending
}

// RunEventJSON is an event sent to a run as `run show --json` prints it.
type RunEventJSON struct {
	EventID uuid.UUID `json:"event_id"`
	Name    string    `json:"name"`
	// State is RECEIVED, PENDING or UNRECEIVED (EventState).
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"created_at"`
	ConsumedAt *time.Time      `json:"consumed_at,omitempty"`
	ConsumedBy string          `json:"consumed_by,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// ToRunEventJSON prints an event of a run.
func ToRunEventJSON(e store.Event) RunEventJSON {
	return RunEventJSON{EventID: e.ID, Name: e.Name, State: EventState(e), CreatedAt: e.CreatedAt.UTC(),
		ConsumedAt: UTC(e.ConsumedAt), ConsumedBy: e.ConsumedBy, Payload: Payload(e.Payload)}
}

// StepJSON is one step attempt as printed with --json.
type StepJSON struct {
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

// ToStepJSON prints a step of a run.
func ToStepJSON(s store.Step) StepJSON {
	j := StepJSON{StepID: s.StepID, Kind: s.Kind, Attempt: s.Attempt, Status: s.Status, Latest: s.IsLatest,
		CreatedAt: s.CreatedAt.UTC(), StartedAt: UTC(s.StartedAt), FinishedAt: UTC(s.FinishedAt),
		RetryAt: UTC(s.RetryAt), ChildRunID: s.ChildRunID, Error: s.Error,
		Input: Payload(s.Input), Output: Payload(s.Output)}
	if began, ended := s.Span(); ended != nil {
		ms := ended.Sub(began).Milliseconds()
		j.DurationMS = &ms
	}
	return j
}

// Table formatting.

// TimeLayout is how tables print a time (local, to the second).
const TimeLayout = "2006-01-02 15:04:05"

// FmtTime prints t in tables.
func FmtTime(t time.Time) string { return t.Local().Format(TimeLayout) }

// FmtTimeP prints an optional time in tables.
func FmtTimeP(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return FmtTime(*t)
}

// FmtTimeMS prints an optional time in tables, to the millisecond.
func FmtTimeMS(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(TimeLayout + ".000")
}

// FmtDur prints a duration as the CLI prints every one, and reads every
// one: days, then Go's units without the zero ones ("7d", "1d12h",
// "1h30m", "1.5s"; internal/durations).
func FmtDur(d time.Duration) string { return durations.Format(d) }

// FmtDuration prints a measured duration for a table, rounded to what
// matters at its size.
func FmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return FmtDur(d.Round(time.Microsecond))
	case d < time.Minute:
		return FmtDur(d.Round(time.Millisecond))
	default:
		return FmtDur(d.Round(time.Second))
	}
}

// OrDash is s, or "-" for an empty table cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OneLine shortens s to one table cell of at most n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// FmtPayload prints a JSON payload in a table cell.
func FmtPayload(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.String()
	}
	return string(Payload(b))
}
