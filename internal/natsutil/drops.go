package natsutil

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// OnSlowConsumer adds fn to nc's asynchronous error handler, keeping the
// handler already set (several components share one connection in
// `kagzi dev`): fn receives every subscription whose messages the client
// dropped because they were not read fast enough (nats.ErrSlowConsumer).
func OnSlowConsumer(nc *nats.Conn, fn func(sub *nats.Subscription)) {
	mu.Lock()
	defer mu.Unlock()
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		if prev != nil {
			prev(c, sub, err)
		}
		if sub != nil && errors.Is(err, nats.ErrSlowConsumer) {
			fn(sub)
		}
	})
}

// Drops tells a component that NATS dropped messages of one of its
// subscriptions. A dropped wakeup is a lost wakeup, so the component's
// handler reads its backlog again. The connection's error handler reports
// a drop, and so does NextMsg of a synchronous subscription (Check): the
// handler runs once per drop whichever reports it first.
//
// The client reports only the first drop of an episode: until the
// subscription takes a message again, later drops are silent, and a
// backlog read made at the first one does not cover them. So after a
// drop, Drops watches the subscription until it has caught up (nothing
// left unread, so the next message is taken and a drop after it is
// reported again) and runs the handler once more if anything was dropped
// since it last ran. Running
// it only then keeps a handler that makes others send again (a renewal of
// work requests) from feeding the overload it answers.
type Drops struct {
	n atomic.Int64

	mu   sync.Mutex
	subs map[*nats.Subscription]*watched
}

type watched struct {
	fn func()
	// queued counts what a channel subscription holds (nil: ask NATS).
	queued   func() int
	seen     int
	watching bool
}

// settleTick is how often a subscription that dropped messages is looked
// at until it has caught up.
const settleTick = 50 * time.Millisecond

// WatchDrops returns the watch of one component's subscriptions on nc.
func WatchDrops(nc *nats.Conn) *Drops {
	d := &Drops{subs: map[*nats.Subscription]*watched{}}
	OnSlowConsumer(nc, d.Check)
	return d
}

// Add calls fn whenever messages of sub are dropped. fn runs on the
// connection's callback goroutine or the caller of Check: it must not
// block.
func (d *Drops) Add(sub *nats.Subscription, fn func()) {
	d.mu.Lock()
	d.subs[sub] = &watched{fn: fn}
	d.mu.Unlock()
}

// AddChan is Add for a subscription made with ChanSubscribe on ch.
func (d *Drops) AddChan(sub *nats.Subscription, ch chan *nats.Msg, fn func()) {
	d.mu.Lock()
	d.subs[sub] = &watched{fn: fn, queued: func() int { return len(ch) }}
	d.mu.Unlock()
}

// Remove stops watching sub.
func (d *Drops) Remove(sub *nats.Subscription) {
	d.mu.Lock()
	delete(d.subs, sub)
	d.mu.Unlock()
}

// Check calls sub's handler if sub dropped messages since the last call;
// a subscription the component does not own, or no longer has, is
// ignored.
func (d *Drops) Check(sub *nats.Subscription) {
	n, err := sub.Dropped()
	d.mu.Lock()
	w := d.subs[sub]
	fire := w != nil && err == nil && n > w.seen
	watch := false
	if fire {
		w.seen = n
		watch, w.watching = !w.watching, true
	}
	d.mu.Unlock()
	if !fire {
		return
	}
	if watch {
		go d.settle(sub, w)
	}
	w.fn()
	d.n.Add(1)
}

// settle waits for sub to catch up after a drop and runs its handler again
// if more was dropped meanwhile, until a look finds nothing new.
func (d *Drops) settle(sub *nats.Subscription, w *watched) {
	t := time.NewTicker(settleTick)
	defer t.Stop()
	for range t.C {
		n, err := sub.Dropped()
		if err != nil {
			break // unsubscribed
		}
		pending := 0
		if w.queued != nil {
			pending = w.queued()
		} else if pending, _, err = sub.Pending(); err != nil {
			break
		}
		if pending > 0 {
			continue
		}
		d.mu.Lock()
		more := d.subs[sub] == w && n > w.seen
		if more {
			w.seen = n
		}
		d.mu.Unlock()
		if !more {
			break
		}
		w.fn()
		d.n.Add(1)
	}
	d.mu.Lock()
	w.watching = false
	d.mu.Unlock()
}

// Count is the number of drops the handlers were called for. A drop is
// counted once its handler has returned, so whoever sees the count sees
// what the handler did (a reaper's amnesty, say).
func (d *Drops) Count() int64 { return d.n.Load() }
