package clock_test

import (
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/clock"
)

// A fake timer fires when the clock reaches it, not before, and not once
// stopped; arming tells Changed.
func TestFakeFiresWhenReached(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewFake(t0)
	changed := c.Changed()
	fired := make(chan time.Time, 2)
	c.AfterFunc(time.Minute, func() { fired <- c.Now() })
	stopped := c.AfterFunc(30*time.Second, func() { t.Error("a stopped timer fired") })
	select {
	case <-changed:
	default:
		t.Fatal("arming did not tell Changed")
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true once, then false")
	}
	if a := c.Armed(); len(a) != 1 || !a[0].Equal(t0.Add(time.Minute)) {
		t.Fatalf("armed %v, want [%v]", a, t0.Add(time.Minute))
	}
	c.Advance(59 * time.Second)
	select {
	case <-fired:
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Second)
	if at := <-fired; !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("fired at %v", at)
	}
	if len(c.Armed()) != 0 {
		t.Fatal("a fired timer is still armed")
	}
	c.Set(t0) // never back
	if !c.Now().Equal(t0.Add(time.Minute)) {
		t.Fatal("the clock went back")
	}
}
