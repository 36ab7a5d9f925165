package reaper

import (
	"context"
	"errors"
	"testing"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/tests/testnats"
)

// Every sweep starts once, subscribes to what it follows, and undoes it on
// Stop, which is safe to call twice; stopping one leaves the others'
// subscriptions alone.
func TestSweepsStartOnceAndStopTwice(t *testing.T) {
	t.Parallel()
	cfg, err := config.Defaults[Config](context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nc := testnats.Start(t).Connect(t)
	r := New(cfg, nil, nc, nil)
	ctx := context.Background()
	subs := map[sweep]int{r.live: 3, r.leases: 2, r.reg: 0, r.deadlines: 0, r.retain: 0, r.batches: 1, r.fanOuts: 1, r.starts: 1}
	total := 0
	for _, s := range r.sweeps {
		if err := s.Start(ctx); err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStarted) {
			t.Fatalf("%T started twice: %v", s, err)
		}
		total += subs[s]
		if got := nc.NumSubscriptions(); got != total {
			t.Fatalf("%T started: %d subscriptions, want %d", s, got, total)
		}
	}
	for _, s := range r.sweeps {
		s.Stop()
		s.Stop()
		total -= subs[s]
		if got := nc.NumSubscriptions(); got != total {
			t.Fatalf("%T stopped: %d subscriptions, want %d", s, got, total)
		}
	}
}
