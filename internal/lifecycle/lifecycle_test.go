package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kagzi/kagzi/internal/lifecycle"
)

// Drain runs with the context live, then the context is cancelled and
// Stop returns only after every goroutine ended.
func TestStopDrainsThenStopsHard(t *testing.T) {
	var b lifecycle.Base
	ctx, err := b.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Begin(context.Background()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Begin: %v, want ErrStarted", err)
	}
	running := make(chan struct{})
	var ended bool
	if !b.Go(func() {
		close(running)
		<-ctx.Done()
		ended = true
	}) {
		t.Fatal("Go refused a running component")
	}
	<-running
	var liveInDrain bool
	b.Stop(func() { liveInDrain = ctx.Err() == nil })
	if !liveInDrain {
		t.Error("the context was cancelled before the drain")
	}
	if ctx.Err() == nil {
		t.Error("the context is live after Stop")
	}
	if !ended {
		t.Error("Stop returned before the goroutine ended")
	}
	if b.Go(func() { t.Error("ran after Stop") }) {
		t.Error("Go accepted work after Stop")
	}
}

// Stop is safe twice, concurrently (both return after the stop), and
// before Begin.
func TestStopTwiceAndBeforeBegin(t *testing.T) {
	var idle lifecycle.Base
	idle.Stop(nil)
	idle.Stop(nil)
	if idle.Go(func() {}) {
		t.Error("Go ran before Begin")
	}

	var b lifecycle.Base
	ctx, _ := b.Begin(context.Background())
	release := make(chan struct{})
	b.Go(func() { <-release; <-ctx.Done() })
	drains := 0
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Stop(func() { drains++; close(release) })
			if ctx.Err() == nil {
				t.Error("a Stop returned before the hard stop")
			}
		}()
	}
	wg.Wait()
	if drains != 1 {
		t.Fatalf("drain ran %d times, want 1", drains)
	}
}
