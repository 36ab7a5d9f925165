package dispatcher

import (
	"runtime"
	"time"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

func (d *Dispatcher) queueLoop(q *queue) {
	defer q.timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-q.signal:
		}
		d.serve(q)
	}
}

// next picks the first parked request that might find work, dropping
// expired ones. Called with d.mu held.
func (d *Dispatcher) nextLocked(q *queue, skip map[string]bool) *parked {
	now := time.Now()
	kept := q.parked[:0]
	var pick *parked
	for _, p := range q.parked {
		if now.After(p.expires) {
			continue
		}
		kept = append(kept, p)
		if pick == nil && !skip[p.sig] && q.empty[p.sig] != q.gen {
			pick = p
		}
	}
	for i := len(kept); i < len(q.parked); i++ {
		q.parked[i] = nil
	}
	q.parked = kept
	return pick
}

func (d *Dispatcher) removeLocked(q *queue, p *parked) {
	for i, x := range q.parked {
		if x == p {
			q.parked = append(q.parked[:i], q.parked[i+1:]...)
			return
		}
	}
}

// serve claims for the parked requests of q until none can be served.
func (d *Dispatcher) serve(q *queue) {
	skip := map[string]bool{}
	for d.ctx.Err() == nil {
		d.mu.Lock()
		p := d.nextLocked(q, skip)
		gen := q.gen
		woke := q.woke
		d.mu.Unlock()
		if p == nil {
			return
		}
		limit := min(p.req.Credits, d.cfg.MaxClaim)
		d.claims.Add(1)
		claimStart := time.Now()
		claiming := d.hops.Now()
		runs, flow, err := d.st.RunsClaimStats(d.ctx, store.RunsClaimParams{
			Namespace: q.key.ns, Queue: q.key.queue, WorkerID: p.req.WorkerID,
			Types: p.types, Limit: limit, Lease: d.cfg.Lease.Duration, InlineBytes: protocol.InlinePayloadBytes,
		})
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.log.Error("claim failed", "ns", q.key.ns, "queue", q.key.queue, "err", err)
			// Try again shortly rather than spin on a failing database.
			d.mu.Lock()
			d.armLocked(q, time.Now().Add(time.Second))
			d.mu.Unlock()
			return
		}
		if claiming != 0 {
			d.markClaimed(runs, woke, claiming)
		}
		now := time.Now()
		if len(runs) > 0 {
			// The delivery before the telemetry and the next-due read,
			// which nothing waits for.
			d.mu.Lock()
			d.removeLocked(q, p)
			q.recheck = 0
			d.mu.Unlock()
			d.publishClaimed(q.key.ns, runs)
			if !d.life.Go(func() { d.deliver(p, runs) }) {
				// Stopping: the runs go back now, not at lease expiry.
				d.release(runs)
			}
			// Let the delivery run now: it is the goroutine made runnable
			// last (after NATS's flusher), so it takes this processor.
			runtime.Gosched()
		}
		d.claimed.Add(int64(len(runs)))
		d.tel.claimRound(d.ctx, q.key.ns, q.key.queue, runs, flow, p.req.WorkerID, claimStart, now)
		if len(runs) < limit {
			// Nothing more is due for this type set: remember it, so renewed
			// requests park without a query, and arm the timer for the
			// earliest future run.
			d.mu.Lock()
			if q.gen == gen {
				q.empty[p.sig] = gen
			}
			d.mu.Unlock()
			skip[p.sig] = true
			d.readNextDue(q)
		}
	}
}

// markClaimed records the hops of claimed runs up to the claim's return;
// the wakeup's are the last one the queue received before the claim.
func (d *Dispatcher) markClaimed(runs []store.ClaimedRun, woke wakeHops, claiming int64) {
	claimed := d.hops.Now()
	for i := range runs {
		id := runs[i].ID
		if woke.woken != 0 {
			if woke.notified != 0 {
				d.hops.Mark(id, hops.Notified, woke.notified)
				d.hops.Mark(id, hops.Relayed, woke.relayed)
			}
			d.hops.Mark(id, hops.Woken, woke.woken)
		}
		d.hops.Mark(id, hops.Claiming, claiming)
		d.hops.Mark(id, hops.Claimed, claimed)
	}
}
