package dispatcher

import (
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// localWakeup is a wakeup handed over in process, awaiting its NATS copy.
type localWakeup struct {
	key qkey
	at  time.Time
}

// maxLocal bounds the wakeups remembered for want of their NATS copy (a
// publish that failed leaves one behind until a later copy passes it).
const maxLocal = 1024

// expectLocal remembers a wakeup the relay of this process is about to
// publish and hand over (wakeLocal); safe on nil. The same wakeup arrives
// from NATS too (other dispatchers and reapers need it): the relay
// publishes in order and NATS keeps one publisher's order, so its copy is
// the oldest one remembered here, and handedOver drops it rather than
// claim a second time for one start. It is remembered before the publish,
// so the copy cannot come first.
func (d *Dispatcher) expectLocal(w *protocol.Wakeup) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if len(d.local) == maxLocal {
		d.local = append(d.local[:0], d.local[1:]...)
	}
	d.local = append(d.local, localWakeup{qkey{w.Namespace, w.Queue}, w.AvailableAt})
	d.mu.Unlock()
}

// wakeLocal takes a wakeup from the relay of this process, after the
// relay published it: the queue loop it wakes is then the goroutine made
// runnable last, the one that runs when the relay waits again (not NATS's
// flusher). Safe on nil.
func (d *Dispatcher) wakeLocal(w *protocol.Wakeup) {
	if d == nil {
		return
	}
	d.onWakeupAt(w, d.hops.Now())
}
