package httpapi

import (
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
)

// limiter holds a token bucket per API token in this process: a token of
// rate r may make r requests per second, in bursts of up to r. The limit
// is per serving process (documented): N console replicas allow N times
// the rate, and a restart refills the buckets.
type limiter struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[uuid.UUID]*bucket
	calls   int
}

type bucket struct {
	rate   float64
	tokens float64
	at     time.Time
}

// idleBucket is how long a bucket stays once full and unused; sweepEvery
// is how many takes pass between sweeps of such buckets.
const (
	idleBucket = time.Minute
	sweepEvery = 4096
)

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, buckets: map[uuid.UUID]*bucket{}}
}

// take spends one request of the token id at rate; when none is left it
// returns false and the whole seconds until one is.
func (l *limiter) take(id uuid.UUID, rate int) (int, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%sweepEvery == 0 {
		for k, b := range l.buckets {
			if now.Sub(b.at) > idleBucket {
				delete(l.buckets, k)
			}
		}
	}
	b, ok := l.buckets[id]
	if !ok || b.rate != float64(rate) {
		b = &bucket{rate: float64(rate), tokens: float64(rate), at: now}
		l.buckets[id] = b
	}
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = math.Min(b.rate, b.tokens+el*b.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return max(1, int(math.Ceil((1-b.tokens)/b.rate))), false
}
