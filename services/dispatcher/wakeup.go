package dispatcher

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func (d *Dispatcher) onWakeup(m *nats.Msg) {
	woken := d.hops.Now()
	var w protocol.Wakeup
	if err := protocol.Decode(m.Data, &w); err != nil {
		d.dropMalformed(m, err)
		return
	}
	d.wakeups.Add(1)
	if d.handedOver(&w) {
		return
	}
	d.onWakeupAt(&w, woken)
}

func (d *Dispatcher) onWakeupAt(w *protocol.Wakeup, woken int64) {
	if woken != 0 {
		d.mu.Lock()
		if d.ctx.Err() == nil {
			d.queueLocked(qkey{w.Namespace, w.Queue}).woke = wakeHops{w.NotifiedNS, w.RelayedNS, woken}
		}
		d.mu.Unlock()
	}
	d.wake(qkey{w.Namespace, w.Queue}, w.AvailableAt)
}

// wake records that runs of key are due at at.
func (d *Dispatcher) wake(key qkey, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	q := d.queueLocked(key)
	if !at.After(time.Now()) {
		q.gen++
		d.signal(q)
		return
	}
	d.armLocked(q, at)
}

// queueLocked returns the state for key, creating it (and its loop).
func (d *Dispatcher) queueLocked(key qkey) *queue {
	q := d.queues[key]
	if q != nil {
		return q
	}
	q = &queue{key: key, gen: 1, empty: map[string]uint64{}, signal: make(chan struct{}, 1)}
	q.timer = time.AfterFunc(time.Hour, func() { d.onTimer(q) })
	q.timer.Stop()
	d.queues[key] = q
	d.life.Go(func() { d.queueLoop(q) })
	return q
}

func (d *Dispatcher) signal(q *queue) {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// armLocked arms q's timer for at unless it already fires earlier.
func (d *Dispatcher) armLocked(q *queue, at time.Time) {
	if !q.timerAt.IsZero() && !q.timerAt.After(at) {
		return
	}
	q.timerAt = at
	q.timer.Reset(time.Until(at))
}

func (d *Dispatcher) onTimer(q *queue) {
	d.mu.Lock()
	q.timerAt = time.Time{}
	q.gen++
	d.signal(q)
	d.mu.Unlock()
}

// handedOver reports whether w is the NATS copy of a wakeup the relay of
// this process handed over already, forgetting it and any older one
// whose copy never came.
func (d *Dispatcher) handedOver(w *protocol.Wakeup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, l := range d.local {
		if l.key.ns == w.Namespace && l.key.queue == w.Queue && l.at.Equal(w.AvailableAt) {
			n := copy(d.local, d.local[i+1:])
			clear(d.local[n:])
			d.local = d.local[:n]
			return true
		}
	}
	return false
}
