package natsutil_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A drop reaches the handler of the subscription that dropped, once, and
// the connection's handler set before still sees it; other subscriptions'
// handlers do not run.
func TestDropsReachTheirSubscription(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	var prev atomic.Int32
	nc := s.Connect(t, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { prev.Add(1) }))
	d := natsutil.WatchDrops(nc)
	hold := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	sub, err := nc.Subscribe("slow", func(*nats.Msg) { <-hold })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	other, err := nc.Subscribe("other", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	dropped := make(chan struct{}, 10)
	var others atomic.Int32
	d.Add(sub, func() { dropped <- struct{}{} })
	d.Add(other, func() { others.Add(1) })
	// The server must have the subscriptions before another connection
	// publishes, or the messages go nowhere and nothing is dropped.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := s.Connect(t)
	// publish sends n messages to the slow subscription.
	publish := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := pub.Publish("slow", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// counted waits until d has counted n drops: a drop is counted once
	// its handler has returned, just after the handler's signal.
	counted := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for d.Count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("count %d, want %d", d.Count(), n)
			}
			runtime.Gosched()
		}
	}
	publish(5) // one in the handler, then drops
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("no drop reported")
	}
	counted(1)
	// The message the handler holds counts as pending until it returns,
	// so 4 of the 5 are dropped in the end; the first report may have come
	// before the last of them, so a look now may report those once.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := sub.Dropped()
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 messages dropped, want 4", n)
		}
		runtime.Gosched()
	}
	d.Check(sub)
	select {
	case <-dropped:
	default:
	}
	// Asking again about the same drops (as NextMsg's error does) calls
	// nothing.
	d.Check(sub)
	select {
	case <-dropped:
		t.Fatal("the same drop was reported twice")
	default:
	}
	base := d.Count()
	if base < 1 || base > 2 || others.Load() != 0 || prev.Load() == 0 {
		t.Fatalf("count %d, other handler %d, previous handler %d: want 1 or 2, 0, >0", base, others.Load(), prev.Load())
	}

	// Later drops of the same episode are silent at the client: the
	// handler runs again once the subscription has caught up, not before.
	publish(3)
	select {
	case <-dropped:
		t.Fatal("the handler ran again before the subscription caught up")
	case <-time.After(300 * time.Millisecond):
	}
	release.Do(func() { close(hold) })
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the drops after the first were never answered")
	}
	counted(base + 1)
	if d.Count() != base+1 {
		t.Fatalf("count %d, want %d", d.Count(), base+1)
	}
}
