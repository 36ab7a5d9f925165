package httpapi

import (
	"time"

	"github.com/google/uuid"
)

// Served returns the patterns a's mux was given.
func (a *API) Served() []string { return a.served }

// Take spends one request of a bucket of a limiter whose clock is now.
func Take(now func() time.Time) func(id uuid.UUID, rate int) (int, bool) {
	return newLimiter(now).take
}
