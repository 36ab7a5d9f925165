package reaper

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Lease expiry: runs whose lease nobody extends (their worker is not
// tracked, or it stopped listing them) are taken back when the lease
// expires. Wakeups and work requests from unknown claimers tell the leader
// when to look.

// bucket returns the lease re-read bucket for runs claimable from e.
func (r *Reaper) bucket(e time.Time) int64 {
	half := int64(r.cfg.Lease / 2)
	return e.Add(r.cfg.Lease).UnixNano() / half
}

func (r *Reaper) bucketTime(b int64) time.Time {
	return time.Unix(0, b*int64(r.cfg.Lease/2))
}

// onWorkRequest watches for claimers the reaper does not track (they never
// registered, or their registration was refused): a claim for one may
// follow at once, and only the lease expiry will ever take it back. The
// dispatchers count malformed requests; here they are just ignored.
func (r *Reaper) onWorkRequest(m *nats.Msg) {
	var req protocol.WorkRequest
	if err := protocol.Decode(m.Data, &req); err != nil {
		return
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	news := false
	if w := r.workers[req.WorkerID]; w == nil || w.rejected {
		if b := r.bucket(now); !hasKey(r.leaseChecks, b) {
			news = true
			r.leaseChecks[b] = struct{}{}
		}
	}
	r.mu.Unlock()
	if news {
		r.wakeLeader()
	}
}

// leases serves the lease timer and re-reads the next expiry when asked.
func (r *Reaper) leases(ctx context.Context, t *term) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	for b := range r.leaseChecks {
		if !r.bucketTime(b).After(now) {
			delete(r.leaseChecks, b)
			t.leaseQueryAt = now
		}
	}
	r.mu.Unlock()
	acted := false
	if !t.leaseAt.IsZero() && !t.leaseAt.After(now) {
		runs, err := fenced(ctx, r, func(st *store.Store) ([]store.RecoveredRun, error) { return st.RunsExpireLeases(ctx, now) })
		if err != nil {
			if ctx.Err() == nil {
				r.failed("expire leases", err)
			}
			t.leaseAt = now.Add(retryAfter)
			return
		}
		acted = true
		t.leaseQueryAt = now
		if len(runs) > 0 {
			var failed, undelivered int64
			for _, rr := range runs {
				if rr.Status == store.StatusFailed {
					failed++
				}
				if rr.Undelivered {
					undelivered++
				}
				r.log.Debug("lease expired", "run_id", rr.RunID, "ns", rr.Namespace, "status", rr.Status, "undelivered", rr.Undelivered)
			}
			r.c.expired.Add(int64(len(runs)))
			r.c.undelivered.Add(undelivered)
			r.log.Warn("leases expired: runs recovered", "runs", len(runs), "failed", failed, "undelivered", undelivered)
		}
	}
	if t.leaseQueryAt.IsZero() || t.leaseQueryAt.After(now) {
		return
	}
	r.c.leaseQ.Add(1)
	next, err := r.st.RunsNextLeaseExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed("next lease expiry", err)
		}
		t.leaseQueryAt = now.Add(retryAfter)
		return
	}
	t.leaseQueryAt = time.Time{}
	switch {
	case next == nil:
		t.leaseAt = time.Time{}
	case acted && !next.After(now):
		// Rows a report held were skipped: try again shortly.
		t.leaseAt = now.Add(recheck)
	default:
		t.leaseAt = *next
	}
}
