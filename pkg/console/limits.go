package console

import (
	"context"
	"net/http"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// Limits: the queues view's Limits panel shows each concurrency limit of
// the namespace with the runs of its type RUNNING now and, under a per-key
// limit, the busiest keys; and each rate limit with the claims of its
// current window. It only reads; limits are set with the CLI, the client,
// or the queues view's form for a total limit.

// topKeys is how many of a per-key limit's busiest keys the panel lists.
const topKeys = 10

// GET /api/v1/limits: the Limits panel.
func (c *Console) limitsData(r *http.Request, ns string) (any, error) {
	stats, err := c.st.RunsQueueStats(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	return limitsView(r.Context(), cl, stats)
}

// limitsView reads the namespace's limits and their use; stats are its
// queue stats, which count the RUNNING runs per queue and type.
func limitsView(ctx context.Context, cl *client.Client, stats []store.QueueTypeStats) (LimitsView, error) {
	v := LimitsView{Concurrency: []LimitUseView{}, Rate: []RateLimitView{}, TopKeys: topKeys}
	limits, err := cl.ConcurrencyLimits(ctx)
	if err != nil {
		return v, err
	}
	running := make(map[[2]string]int64, len(stats))
	for _, s := range stats {
		running[[2]string{s.Queue, s.Type}] = s.Running
	}
	for _, l := range limits {
		u := LimitUseView{LimitView: limitView(l), Running: running[[2]string{l.Queue, l.Type}], Keys: []KeyUsageView{}}
		if l.MaxPerKey > 0 {
			keys, err := cl.KeyConcurrencyUsage(ctx, l.Queue, l.Type, topKeys)
			if err != nil {
				return v, err
			}
			for _, k := range keys {
				u.Keys = append(u.Keys, KeyUsageView(k))
			}
		}
		v.Concurrency = append(v.Concurrency, u)
	}
	rates, err := cl.RateLimits(ctx)
	if err != nil {
		return v, err
	}
	for _, r := range rates {
		v.Rate = append(v.Rate, RateLimitView{Key: r.Key, Limit: r.Limit, Period: r.Period.String(), PeriodMS: r.Period.Milliseconds(),
			Claims: r.Claims, WindowStart: r.WindowStart, WindowEnd: r.WindowStart.Add(r.Period)})
	}
	return v, nil
}
