package reaper

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Lease expiry: runs whose lease nobody extends (their worker is not
// tracked, or it stopped listing them) are taken back when the lease
// expires. Wakeups and work requests from unknown claimers tell the leader
// when to look (see the package doc).

// leases is the lease expiry sweep.
type leases struct {
	*shared
	faults
	cfg config.Lease
	// tracked reports whether a worker is followed by liveness (and its
	// registration not refused): its runs' leases are its heartbeats'.
	tracked func(id uuid.UUID) bool
	// pending is the pending limit of its subscriptions (0: 1<<20), and
	// onDropped is called when NATS dropped some of their messages.
	pending   int
	onDropped func()

	mu sync.Mutex
	// checks are pending lease re-reads, by bucket.
	checks map[int64]struct{}
	tm     leasesTerm
	c      leasesCounters

	life lifecycle.Base
	subs []*nats.Subscription
}

// leasesTerm is the lease sweep's state for one term.
type leasesTerm struct {
	// at is the armed timer, queryAt asks for a re-read (zero: none).
	at, queryAt time.Time
}

type leasesCounters struct {
	expired, undelivered, queries atomic.Int64
}

func newLeases(sh *shared, cfg config.Lease, tracked func(uuid.UUID) bool, pending int, onDropped func()) *leases {
	return &leases{shared: sh, faults: faults{lg: sh.log}, cfg: cfg, tracked: tracked, pending: pending, onDropped: onDropped,
		checks: map[int64]struct{}{}}
}

// Start watches work requests (without a queue group).
func (s *leases) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return fmt.Errorf("leases: %w", err)
	}
	pending := 1 << 20
	if s.pending > 0 {
		pending = s.pending
	}
	for _, subj := range []string{protocol.SubjectWorkAll, protocol.SubjectDirectWorkAll} {
		sub, err := s.nc.Subscribe(subj, s.onWorkRequest)
		if err != nil {
			s.unsubscribe()
			s.life.Stop(nil)
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		_ = sub.SetPendingLimits(pending, 1<<30)
		s.drops.Add(sub, s.onDropped)
		s.subs = append(s.subs, sub)
	}
	return nil
}

func (s *leases) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.subs = nil
}

// Stop unsubscribes; safe to call twice.
func (s *leases) Stop() { s.life.Stop(s.unsubscribe) }

// bucket returns the lease re-read bucket for runs claimable from e.
func (s *leases) bucket(e time.Time) int64 {
	half := int64(s.cfg.Duration / 2)
	return e.Add(s.cfg.Duration).UnixNano() / half
}

func (s *leases) bucketTime(b int64) time.Time {
	return time.Unix(0, b*int64(s.cfg.Duration/2))
}

// schedule adds the re-read bucket of e, and reports whether it is new;
// with too many pending, it forgets those of runs long claimable.
func (s *leases) schedule(e, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	news := false
	if b := s.bucket(e); !hasKey(s.checks, b) {
		news = true
		s.checks[b] = struct{}{}
	}
	if len(s.checks) > 4096 {
		cut := s.bucket(now.Add(-s.cfg.Duration))
		for b := range s.checks {
			if b < cut {
				delete(s.checks, b)
			}
		}
	}
	return news
}

// onWakeup schedules the re-read a wakeup calls for (a run claimable from
// w.AvailableAt may be claimed), and reports whether it is new.
func (s *leases) onWakeup(w *protocol.Wakeup, now time.Time) bool {
	e := now
	if w.AvailableAt.After(e) {
		e = w.AvailableAt
	}
	return s.schedule(e, now)
}

// onWorkRequest watches for claimers the reaper does not track (they never
// registered, or their registration was refused): a claim for one may
// follow at once, and only the lease expiry will ever take it back. The
// dispatchers count malformed requests; here they are just ignored.
func (s *leases) onWorkRequest(m *nats.Msg) {
	var req protocol.WorkRequest
	if err := protocol.Decode(m.Data, &req); err != nil {
		return
	}
	if s.tracked(req.WorkerID) {
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	news := false
	if b := s.bucket(now); !hasKey(s.checks, b) {
		news = true
		s.checks[b] = struct{}{}
	}
	s.mu.Unlock()
	if news {
		s.wake()
	}
}

// resync asks for a re-read now and another one a lease later.
func (s *leases) resync(now time.Time) {
	s.tm.queryAt = now
	s.mu.Lock()
	s.checks[s.bucket(now)] = struct{}{}
	s.mu.Unlock()
}

// gain takes over: the next expiry is read at the first step.
func (s *leases) gain(_ context.Context, now time.Time) error {
	s.tm = leasesTerm{}
	s.resync(now)
	return nil
}

// next is the timer or a re-read, whichever is first.
func (s *leases) next() time.Time {
	var e earliest
	e.at(s.tm.at)
	e.at(s.tm.queryAt)
	s.mu.Lock()
	defer s.mu.Unlock()
	for b := range s.checks {
		e.at(s.bucketTime(b))
	}
	return e.t
}

func (s *leases) pendingChecks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.checks)
}

// step serves the lease timer and re-reads the next expiry when asked.
func (s *leases) step(ctx context.Context) {
	t := &s.tm
	now := s.clock.Now()
	s.mu.Lock()
	for b := range s.checks {
		if !s.bucketTime(b).After(now) {
			delete(s.checks, b)
			t.queryAt = now
		}
	}
	s.mu.Unlock()
	acted := false
	if !t.at.IsZero() && !t.at.After(now) {
		runs, err := fenced(ctx, s.shared, func(st *store.Store) ([]store.RecoveredRun, error) { return st.RunsExpireLeases(ctx, now) })
		if err != nil {
			if ctx.Err() == nil {
				s.failed("expire leases", err)
			}
			t.at = now.Add(retryAfter)
			return
		}
		acted = true
		t.queryAt = now
		if len(runs) > 0 {
			var failed, undelivered int64
			for _, rr := range runs {
				if rr.Status == store.StatusFailed {
					failed++
				}
				if rr.Undelivered {
					undelivered++
				}
				s.log.Debug("lease expired", "run_id", rr.RunID, "ns", rr.Namespace, "status", rr.Status, "undelivered", rr.Undelivered)
			}
			s.c.expired.Add(int64(len(runs)))
			s.c.undelivered.Add(undelivered)
			s.log.Warn("leases expired: runs recovered", "runs", len(runs), "failed", failed, "undelivered", undelivered)
		}
	}
	if t.queryAt.IsZero() || t.queryAt.After(now) {
		return
	}
	s.c.queries.Add(1)
	next, err := s.st.RunsNextLeaseExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("next lease expiry", err)
		}
		t.queryAt = now.Add(retryAfter)
		return
	}
	t.queryAt = time.Time{}
	switch {
	case next == nil:
		t.at = time.Time{}
	case acted && !next.After(now):
		// Rows a report held were skipped: try again shortly.
		t.at = now.Add(recheck)
	default:
		t.at = *next
	}
}
