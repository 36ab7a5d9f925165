package lifecycle

import (
	"context"
	"log/slog"
)

// Component is a long-running part of a process. Each embeds a Base for
// its start and stop.
type Component interface {
	// Start begins the component's work and returns once it is running.
	Start(ctx context.Context) error
	// Stop drains, then stops; safe to call twice.
	Stop()
}

// RunAll starts the components in order, waits for ctx to end, then stops
// them in reverse order. If a start fails, the started ones are stopped.
func RunAll(ctx context.Context, log *slog.Logger, comps ...Component) error {
	started := make([]Component, 0, len(comps))
	stopAll := func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
	setReady := func(ready bool) {
		for _, c := range comps {
			if h, ok := c.(*Health); ok {
				h.SetReady(ready)
			}
		}
	}
	for _, c := range comps {
		if err := c.Start(ctx); err != nil {
			stopAll()
			return err
		}
		started = append(started, c)
	}
	// Ready only once every component runs, and no longer once draining
	// begins, so an orchestrator routes nothing to a process that is
	// starting or stopping.
	setReady(true)
	log.Info("running")
	<-ctx.Done()
	setReady(false)
	log.Info("shutting down")
	stopAll()
	return nil
}
