// Package lifecycle is how every long-running component of Kagzi starts
// and stops (dispatcher, relay, scheduler, reaper, health endpoint,
// worker, console), and how a service process runs them: connect to NATS,
// set up telemetry and the health endpoints, start the components in
// order, stop them in reverse (Serve, RunAll).
//
// A component holds a Base, calls Begin in its Start, runs each of its
// goroutines with Go, and calls Stop with its drain in its own Stop:
//
//   - drain runs first, with the component's context still live: it
//     unsubscribes, finishes what was already received, tells its peers
//     it is leaving;
//   - then the hard stop: the context is cancelled, Go starts nothing any
//     more, and Stop waits for every goroutine Go started.
//
// Stop is safe to call twice (the second call waits for the first) and
// before Begin (it does nothing).
package lifecycle

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is returned by Begin for a component started before.
var ErrStarted = errors.New("already started")

// Base is a component's lifecycle. The zero value is ready to Begin.
type Base struct {
	mu       sync.Mutex
	cancel   context.CancelFunc
	stopping bool
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// Begin starts the lifecycle and returns the component's context, a child
// of parent that the hard stop cancels. A Base begins once.
func (b *Base) Begin(parent context.Context) (context.Context, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return nil, ErrStarted
	}
	ctx, cancel := context.WithCancel(parent)
	b.cancel, b.done = cancel, make(chan struct{})
	return ctx, nil
}

// Go runs fn in a goroutine the component owns, which Stop waits for. It
// runs nothing, and returns false, before Begin and once the hard stop
// began: the caller then undoes what fn was to finish.
func (b *Base) Go(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel == nil || b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
	return true
}

// Stop runs drain (nil: nothing to drain), then cancels the component's
// context and waits for its goroutines. A second call waits for the
// first to finish; a call before Begin does nothing. drain must not call
// Stop.
func (b *Base) Stop(drain func()) {
	b.mu.Lock()
	if b.cancel == nil {
		b.mu.Unlock()
		return
	}
	if b.stopping {
		done := b.done
		b.mu.Unlock()
		<-done
		return
	}
	b.stopping = true
	b.mu.Unlock()
	if drain != nil {
		drain()
	}
	b.mu.Lock()
	b.closed = true
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
	close(b.done)
}
