package webhook

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// Counters count what became of deliveries, in-process; safe for
// concurrent use. The zero value is ready.
type Counters struct {
	accepted, badSignature, stale, replayed, tooLarge, malformed, unknown atomic.Int64
}

// Stats is a snapshot of Counters.
type Stats struct {
	// Accepted deliveries were published as events.
	Accepted int64 `json:"accepted"`
	// BadSignature, Stale, Replayed, TooLarge, Malformed and
	// UnknownSource deliveries were refused, and nothing of them stored.
	BadSignature  int64 `json:"bad_signature"`
	Stale         int64 `json:"stale"`
	Replayed      int64 `json:"replayed"`
	TooLarge      int64 `json:"too_large"`
	Malformed     int64 `json:"malformed"`
	UnknownSource int64 `json:"unknown_source"`
}

// Outcome is what became of one delivery.
type Outcome int

// The outcomes Count takes.
const (
	Accepted Outcome = iota
	BadSignature
	StaleTimestamp
	Replayed
	TooLarge
	Malformed
	UnknownSource
)

// Count counts one delivery's outcome.
func (c *Counters) Count(o Outcome) {
	[]*atomic.Int64{&c.accepted, &c.badSignature, &c.stale, &c.replayed, &c.tooLarge, &c.malformed, &c.unknown}[o].Add(1)
}

// Stats returns the counts so far.
func (c *Counters) Stats() Stats {
	return Stats{Accepted: c.accepted.Load(), BadSignature: c.badSignature.Load(), Stale: c.stale.Load(),
		Replayed: c.replayed.Load(), TooLarge: c.tooLarge.Load(), Malformed: c.malformed.Load(), UnknownSource: c.unknown.Load()}
}

// Refusal is the outcome and HTTP status of a Verify error: 401 for a bad
// signature or a stale timestamp, 400 for a malformed delivery.
func Refusal(err error) (Outcome, int) {
	switch {
	case errors.Is(err, ErrStale):
		return StaleTimestamp, http.StatusUnauthorized
	case errors.Is(err, ErrMalformed):
		return Malformed, http.StatusBadRequest
	}
	return BadSignature, http.StatusUnauthorized
}
