package opsstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// Poison events (docs/triggers.md): an event whose fan-out keeps failing
// (a trigger whose run the store refuses every time) is given up after
// MaxFanOutAttempts failures, so that it does not hold up the events after
// it; its runs are not started and its last error is kept.

// MaxFanOutAttempts is how many failed fan-outs give an event up.
const MaxFanOutAttempts = 5

var publishedEventsFanOutFailedSQL = stmt("PublishedEventsFanOutFailed")

// FanOutFailure is what PublishedEventsFanOutFailed recorded.
type FanOutFailure struct {
	// Attempts is the event's failed fan-outs so far (0: it was no longer
	// pending, nothing was recorded).
	Attempts int
	// GivenUp is true when this failure was the last allowed: the event is
	// marked failed and is no longer pending.
	GivenUp bool
}

// PublishedEventsFanOutFailed records a failed fan-out of a pending event
// with its error (cut at protocol.MaxErrorLen), and gives the event up at
// the MaxFanOutAttempts-th failure. An event fanned out meanwhile, or
// deleted, records nothing (Attempts 0).
func (s *Ops) PublishedEventsFanOutFailed(ctx context.Context, id uuid.UUID, cause error) (FanOutFailure, error) {
	msg := "unknown error"
	if cause != nil {
		msg = core.ClipError(cause.Error())
	}
	var out FanOutFailure
	err := publishedEventsFanOutFailedSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"event_id": id, "error": msg,
		"max_attempts": MaxFanOutAttempts}).Scan(&out.Attempts, &out.GivenUp)
	if isNoRows(err) {
		return FanOutFailure{}, nil
	}
	return out, mapErr(fmt.Sprintf("record failed fan-out of event %s", id), err)
}
