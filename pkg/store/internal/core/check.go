package core

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// ScanRun reads a run from row, whose first columns are the run columns
// every run statement returns (r.run_id … r.epoch, in Run's order), then
// extra.
func ScanRun(row pgx.Row, extra ...any) (Run, error) {
	var r Run
	var policy []byte
	dest := []any{&r.ID, &r.Namespace, &r.ExternalID, &r.Queue, &r.Type, &r.Version,
		&r.Status, &r.Attempts, &r.AvailableAt, &r.LockedBy, &r.LeaseToken, &r.LeaseExpiresAt, &r.Error,
		&r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.DeadlineAt, &policy, &r.ParentRunID,
		&r.ParentStepID, &r.CronExpr, &r.Timezone, &r.MaxCatchup,
		&r.LastFiredAt, &r.ScheduleID, &r.ScheduleFireAt, &r.TraceContext, &r.Priority,
		&r.CancelRequestedAt, &r.ParentClosePolicy, &r.Epoch}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Run{}, err
	}
	if len(policy) > 0 {
		var p retry.Policy
		if err := json.Unmarshal(policy, &p); err != nil {
			return Run{}, fmt.Errorf("decode retry policy of run %s: %w", r.ID, err)
		}
		p = p.WithDefaults()
		r.RetryPolicy = &p
	}
	return r, nil
}

// The store checks names with the same rules and limits as every other
// edge (package protocol), so a name it stores can always be delivered.
const (
	MaxNameLen = protocol.MaxNameLen
	MaxErrLen  = protocol.MaxErrorLen
)

// CheckName checks a namespace, queue, workflow type or version.
func CheckName(field, v string, required bool) error {
	if v == "" && !required {
		return nil
	}
	if err := protocol.ValidToken(field, v); err != nil {
		return Invalidf("%v", err)
	}
	return nil
}

// CheckEventName checks the name of an event.
func CheckEventName(v string) error {
	if err := protocol.ValidEventName(v); err != nil {
		return Invalidf("%v", err)
	}
	return nil
}

// minDBTime and endDBTime bound a Postgres timestamptz. pgx does not
// refuse a time outside them: it wraps it into another time.
var (
	minDBTime = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	endDBTime = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)
)

func CheckTime(field string, t *time.Time) error {
	if t != nil && (t.Before(minDBTime) || !t.Before(endDBTime)) {
		return Invalidf("%s %s is outside the years Postgres stores", field, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// PGText reports whether Postgres can store s as text: it refuses NUL
// bytes and invalid UTF-8 with an error the store cannot type.
func PGText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// CheckExternalID checks an optional idempotency key: any text up to
// MaxNameLen bytes without control characters. Every edge that takes an
// external id (a start, an event by external id) checks it here. The id
// is printed where operators read (the CLI's tables, the console), so
// one holding a terminal's escape sequence would act on their screen.
func CheckExternalID(v string) error {
	if len(v) > MaxNameLen {
		return Invalidf("external id is %d bytes, at most %d", len(v), MaxNameLen)
	}
	return CheckPrintable("external id", v)
}

// CheckPrintable checks an id or key the caller chose (an external id, a
// debounce, concurrency or rate key): UTF-8 text without control
// characters (NUL included), so that printing it is safe.
func CheckPrintable(what, v string) error {
	if !PGText(v) {
		return Invalidf("%s %q is not UTF-8 text without NUL bytes", what, protocol.Echo(v))
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return Invalidf("%s %q holds a control character (%U at byte %d)", what, protocol.Echo(v), []rune(v[i:])[0], i)
	}
	return nil
}

// ClipError and clipText make text that came from user code (error
// messages and types) storable: Postgres text takes neither NUL nor
// invalid UTF-8, and a report it refused would fail its run.
func ClipError(s string) string { return protocol.ClipText(s, MaxErrLen) }

func EncodePolicy(p *retry.Policy) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	if err := p.Validate(); err != nil {
		return nil, Invalidf("%v", err)
	}
	q := p.WithDefaults()
	return json.Marshal(q)
}

// EncodeOverride checks new retry options given to a failing step
// (retry.Policy.ValidateOverride: each field set within its bound) and
// encodes the fields set; options that set none encode to nil.
func EncodeOverride(p *retry.Policy) ([]byte, error) {
	if p == nil || p.IsZero() {
		return nil, nil
	}
	if err := p.ValidateOverride(); err != nil {
		return nil, Invalidf("%v", err)
	}
	return json.Marshal(p.Overriding())
}

// Cursor marks a position in a newest-first listing.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// String encodes the cursor as an opaque token.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "/" + c.ID.String()))
}

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(tok string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return Cursor{}, Invalidf("cursor %q is not a token this store made", tok)
	}
	ts, id, ok := strings.Cut(string(b), "/")
	if !ok {
		return Cursor{}, Invalidf("cursor %q is not a token this store made", tok)
	}
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Cursor{}, Invalidf("cursor %q is not a token this store made", tok)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return Cursor{}, Invalidf("cursor %q is not a token this store made", tok)
	}
	at := time.UnixMicro(us).UTC()
	if CheckTime("cursor time", &at) != nil {
		return Cursor{}, Invalidf("cursor %q is not a token this store made", tok)
	}
	return Cursor{CreatedAt: at, ID: u}, nil
}

func CollectRuns(rows pgx.Rows) ([]Run, error) {
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := ScanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// NewRunID is the id of a run the store starts: a UUID v7, so ids sort by
// creation.
func NewRunID() (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("generate run id: %w", err)
	}
	return id, nil
}

func NullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
