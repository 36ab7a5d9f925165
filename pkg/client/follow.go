package client

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// follower wakes a reader that waits for something of one run to be in
// Postgres (its end, a state value, a stream entry, an update's answer).
// It subscribes before the reader's first read, so whatever is committed
// in between still wakes it; after that the reader reads again only when
// told something may have changed: a message on one of the run's
// subjects, a NATS reconnect or relay restart (the client's resync), or
// NATS dropping messages it had not read.
type follower struct {
	c       *Client
	subs    []*nats.Subscription
	ch      chan *nats.Msg
	dropped chan struct{}
}

// follow subscribes to the run's end and, with progress, to its progress
// steps, and returns once the subscriptions are live at the server.
func (c *Client) follow(ctx context.Context, id uuid.UUID, progress bool) (*follower, error) {
	if c.nc == nil {
		return nil, fmt.Errorf("follow %s: the client has no NATS connection", id)
	}
	f := &follower{c: c, ch: make(chan *nats.Msg, 64), dropped: make(chan struct{}, 1)}
	subjects := []string{protocol.SubjectDone(c.ns, id)}
	if progress {
		subjects = append(subjects, protocol.SubjectProgress(c.ns, id))
	}
	for _, s := range subjects {
		sub, err := c.nc.ChanSubscribe(s, f.ch)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("follow %s: subscribe: %w", id, err)
		}
		f.subs = append(f.subs, sub)
		c.drops.AddChan(sub, f.ch, f.drop)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := c.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		f.close()
		return nil, fmt.Errorf("follow %s: subscribe: %w", id, err)
	}
	return f, nil
}

func (f *follower) drop() {
	select {
	case f.dropped <- struct{}{}:
	default:
	}
}

// wait blocks until the reader should read again, or ctx ends. resync is
// the client's resync channel taken before the read that came up short.
func (f *follower) wait(ctx context.Context, resync <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.ch:
	case <-resync:
	case <-f.dropped:
	}
	// Several wakeups may have queued behind this one: one read covers them.
	for {
		select {
		case <-f.ch:
		default:
			return nil
		}
	}
}

func (f *follower) close() {
	for _, sub := range f.subs {
		f.c.drops.Remove(sub)
		_ = sub.Unsubscribe()
	}
}
