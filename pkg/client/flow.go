package client

import (
	"context"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// NoLimit is ConcurrencyLimit.MaxRunning of a type with a per-key limit
// and no cap on the type as a whole.
const NoLimit = store.NoLimit

// SetKeyConcurrencyLimit allows at most maxPerKey runs of workflow type
// typ with the same StartOptions.ConcurrencyKey to run at once in queue
// (empty: the client's default queue), across every worker and
// dispatcher; 0 removes the per-key limit. Claims take the keys in turns
// (each key's first run before any key's second), so a key with few runs
// queued is not starved by one with many. A total limit
// (SetConcurrencyLimit) on the type applies as well. Runs without a key
// count only against the total.
func (c *Client) SetKeyConcurrencyLimit(ctx context.Context, queue, typ string, maxPerKey int) (*ConcurrencyLimit, error) {
	if queue == "" {
		queue = c.queue
	}
	l, err := c.st.LimitsSetPerKey(ctx, c.ns, queue, typ, maxPerKey)
	if err != nil {
		return nil, err
	}
	out := limitFrom(l)
	return &out, nil
}

// KeyUsage is how many runs with one concurrency key are running.
type KeyUsage struct {
	Key     string
	Running int
}

// KeyConcurrencyUsage returns the concurrency keys of typ in queue (empty:
// the client's default queue) with the most running runs, busiest first,
// at most top of them.
func (c *Client) KeyConcurrencyUsage(ctx context.Context, queue, typ string, top int) ([]KeyUsage, error) {
	if queue == "" {
		queue = c.queue
	}
	us, err := c.st.LimitsKeyUsage(ctx, c.ns, queue, typ, top)
	if err != nil {
		return nil, err
	}
	out := make([]KeyUsage, len(us))
	for i, u := range us {
		out[i] = KeyUsage(u)
	}
	return out, nil
}

// RateLimit allows at most Limit claims (starts of execution, including
// resumptions after a sleep or wait) of runs with RateLimitKey Key per
// Period in the namespace, across every dispatcher and queue.
type RateLimit struct {
	Key    string
	Limit  int
	Period time.Duration
	// Claims is the current use: claims counted in the current window,
	// which starts at WindowStart.
	Claims      int
	WindowStart time.Time
	UpdatedAt   time.Time
}

func rateLimitFrom(r store.RateLimit) RateLimit {
	return RateLimit{Key: r.Key, Limit: r.Limit, Period: r.Period, Claims: r.Claims, WindowStart: r.WindowStart, UpdatedAt: r.UpdatedAt}
}

// MaxRatePeriod is the longest rate limit period (a day).
const MaxRatePeriod = store.MaxRatePeriod

// SetRateLimit allows at most limit claims of runs started with
// StartOptions.RateLimitKey key per period (a whole number of
// milliseconds, at most MaxRatePeriod). Windows are fixed and aligned to the Unix epoch: no
// window holds more than limit claims, so any interval of one period
// holds at most twice limit. Runs the limit holds back wait, without
// polling, until the window that has room for them. Setting the limit
// again (or removing it) gives the runs it held their due time back, and
// the new limit spreads them again (RateLimit.Released counts them).
func (c *Client) SetRateLimit(ctx context.Context, key string, limit int, period time.Duration) (*RateLimit, error) {
	r, err := c.st.RateLimitsSet(ctx, c.ns, key, limit, period)
	if err != nil {
		return nil, err
	}
	out := rateLimitFrom(r)
	return &out, nil
}

// RemoveRateLimit lifts the rate limit of key; an absent one is
// ErrNotFound. Runs it held in the windows ahead are due again at the
// time they were due before.
func (c *Client) RemoveRateLimit(ctx context.Context, key string) error {
	_, err := c.st.RateLimitsDelete(ctx, c.ns, key)
	return err
}

// RateLimits lists the namespace's rate limits with their current use.
func (c *Client) RateLimits(ctx context.Context) ([]RateLimit, error) {
	rs, err := c.st.RateLimitsList(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	out := make([]RateLimit, len(rs))
	for i, r := range rs {
		out[i] = rateLimitFrom(r)
	}
	return out, nil
}
