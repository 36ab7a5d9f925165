package reaper_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/services/reaper"
)

// The tests of a clocked reaper move its clock instead of waiting: an
// hour-long lease or deadline passes at once, and nothing happens before
// the clock says so.

// clocked is a reaper on a fake clock, whose leader's steps the test
// follows.
type clocked struct {
	t *testing.T
	r *reaper.Reaper
	c *clock.Fake

	mu      sync.Mutex
	last    time.Time // the clock's time before the last step
	stepped chan struct{}
}

func (h *harness) clocked(set func(c *reaper.Config)) *clocked {
	h.t.Helper()
	k := h.clockedOn(reaper.Knobs{Clock: clock.NewFake(time.Now())}, testLogger(h.t), set)
	waitLeader(h.t, k.r)
	return k
}

// clockedOn is clocked on kn.Clock (a *clock.Fake, which several reapers
// may share) with its own logger.
func (h *harness) clockedOn(kn reaper.Knobs, log *slog.Logger, set func(c *reaper.Config)) *clocked {
	h.t.Helper()
	k := &clocked{t: h.t, c: kn.Clock.(*clock.Fake), stepped: make(chan struct{})}
	k.r = reaper.NewWith(h.config(set), kn, h.rst, h.ns.Connect(h.t), log)
	reaper.SetStepHook(k.r, func(at time.Time) {
		k.mu.Lock()
		k.last = at
		close(k.stepped)
		k.stepped = make(chan struct{})
		k.mu.Unlock()
	})
	if err := k.r.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(k.r.Stop)
	return k
}

// settle makes the leader take a step at the clock's time and waits until
// it did: whatever was due by then is done.
func (k *clocked) settle() {
	k.t.Helper()
	target := k.c.Now()
	reaper.Kick(k.r)
	for {
		k.mu.Lock()
		done, stepped := !k.last.Before(target), k.stepped
		k.mu.Unlock()
		if done {
			return
		}
		select {
		case <-stepped:
		case <-time.After(20 * time.Second):
			k.t.Fatal("the leader took no step")
		}
	}
}
