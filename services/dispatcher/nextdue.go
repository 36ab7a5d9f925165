package dispatcher

import "time"

// readNextDue reads when q's next run is due and arms its timer, beside
// the claim loop rather than in it, so that the next wakeup's claim does
// not wait for the read. One read runs per queue at a time; one asked for
// meanwhile runs after it.
func (d *Dispatcher) readNextDue(q *queue) {
	d.mu.Lock()
	if q.nextDue {
		q.nextDueAgain = true
		d.mu.Unlock()
		return
	}
	q.nextDue = true
	d.mu.Unlock()
	if !d.life.Go(func() { d.nextDueLoop(q) }) {
		d.mu.Lock()
		q.nextDue = false
		d.mu.Unlock()
	}
}

func (d *Dispatcher) nextDueLoop(q *queue) {
	for {
		next, pastDue, err := d.st.RunsNextDue(d.ctx, q.key.ns, q.key.queue)
		d.mu.Lock()
		if err == nil {
			var at time.Time
			if next != nil {
				at = *next
			}
			if pastDue {
				// Runs are due that the claim left: of other type sets
				// (claimed when such a worker asks), of a type at its
				// concurrency limit (woken when one of its runs stops
				// running), or held by another transaction for a moment.
				// Look again later, backing off, rather than at once: a run
				// of a type no worker serves must not make the dispatcher
				// spin.
				q.recheck = min(max(2*q.recheck, minRecheck), maxRecheck)
				if recheckAt := time.Now().Add(q.recheck); at.IsZero() || recheckAt.Before(at) {
					at = recheckAt
				}
			}
			// The timer keeps the earliest time it is armed for, so one
			// call with the earlier of the two arms it as two would.
			if !at.IsZero() {
				d.armLocked(q, at)
			}
		}
		again := err == nil && q.nextDueAgain
		q.nextDueAgain = false
		if !again {
			q.nextDue = false
		}
		d.mu.Unlock()
		if err != nil && d.ctx.Err() == nil {
			d.log.Error("next due", "err", err)
		}
		if !again {
			return
		}
	}
}
